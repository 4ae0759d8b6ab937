#pragma once
// A driver's frames in flight waited out on the real clock, as its completion role would: each
// completion at its time (the driver's NextCompletion), spinning until then.

#include "base/tsc.h"
#include "dataplane/tx_driver.h"

namespace txbatch::test {

// `complete(t)` reclaims at `t`: the driver's own Complete, or a NetdevQueue's (BQL's books).
template <class Complete>
void CompleteAll(const TxDriver& nic, Complete&& complete) {
  while (nic.InFlight() > 0) {
    const Tsc due = nic.NextCompletion();
    while (Now() < due) {
    }
    (void)complete(due);
  }
}

inline void CompleteAll(TxDriver& nic) {
  CompleteAll(nic, [&nic](Tsc t) { return nic.Complete(t); });
}

}  // namespace txbatch::test
