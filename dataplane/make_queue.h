#pragma once
// The queue's factory: the queue with the synchronisation its configuration names. Apart from
// tx_queue.h, whose base class does not know the queues derived from it (rootlock_queue.h,
// nolock_queue.h).

#include <memory>

#include "batching/flush_policy.h"
#include "dataplane/queue_config.h"
#include "dataplane/run_window.h"
#include "dataplane/tx_driver.h"
#include "dataplane/tx_queue.h"

namespace txbatch {

// The queue for `config`: nolock or rootlock synchronisation (rootlock for --qdisc none, where
// nothing is queued, and for pfifo and fq_codel, which have no lock-free form).
std::unique_ptr<TxQueue> MakeTxQueue(TxDriver& driver, const FlushPolicy& policy,
                                     const TxQueueConfig& config, const RunWindow& window);

}  // namespace txbatch
