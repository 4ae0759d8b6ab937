#pragma once
// The part the queue tests' fake drivers share: the frames a driver took and has not completed,
// oldest first, freed by Purge (and on destruction); no wire, counted at the driver, no
// completion timed.

#include <rte_mbuf.h>

#include <deque>
#include <optional>

#include "dataplane/tx_driver.h"

namespace txbatch::test {

class HoldingDriver : public TxDriver {
 public:
  ~HoldingDriver() override { Purge(); }
  Tsc NextCompletion() const override { return kNever; }
  unsigned InFlight() const override { return static_cast<unsigned>(held_.size()); }
  unsigned Purge() final {
    const auto n = static_cast<unsigned>(held_.size());
    for (rte_mbuf* m : held_) rte_pktmbuf_free(m);
    held_.clear();
    return n;
  }
  std::optional<WireSpec> Wire() const override { return std::nullopt; }
  CountedAt counted_at() const override { return CountedAt::kDriver; }

 protected:
  std::deque<rte_mbuf*> held_;  // taken, not yet completed; oldest first
};

}  // namespace txbatch::test
