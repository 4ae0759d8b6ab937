#pragma once
// The handover step's accounting, written once (Linux sch_direct_xmit's and, for --qdisc none,
// __dev_queue_xmit's dev_hard_start_xmit), for the real queues (TxQueue::Transmit, by the one
// runner after the TX lock; SendBatch, whose producers share the counters, under it) and the
// simulation's (SimQueue::Xmit and SendBatch). Neither a lock nor a clock is inside: a caller
// times the call in its own clock (tx_cycles) and brings its own synchronisation.

#include <span>

#include <rte_mbuf.h>

#include "dataplane/gso.h"
#include "dataplane/netdev_queue.h"
#include "dataplane/queue_config.h"

namespace txbatch {

struct HandoverStep {
  // After the driver call `x` on `frames` (as offered, GSO frames already cut where the stack
  // cuts them): a qdisc's bulk (`from_qdisc`) is a batch only if the driver was called (a queue
  // stopped by then refuses it whole, with no call: it is requeued, not sent); --qdisc none's
  // batch always is one, and what the driver refused of it is dropped (a device without a
  // queue drops what it cannot take: dropped_noqueue).
  static void Count(std::span<rte_mbuf* const> frames, const XmitResult& x, bool from_qdisc,
                    TxQueueCounters& c) {
    if (from_qdisc && !x.offered) return;
    c.batch_hist[frames.size()].Add();
    if (!from_qdisc) c.dropped_noqueue.Add(WireFrames(frames.subspan(x.accepted)));
  }
};

}  // namespace txbatch
