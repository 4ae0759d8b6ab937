#pragma once
// The enqueue step, written once (Linux __dev_xmit_skb, after sk_stream_wait_memory), beside the
// qdisc run (qdisc_run.h), for the four places a producer puts a frame into a qdisc: the
// root-locked queue (rootlock_queue.cc) under its root lock, the lock-free queue
// (nolock_queue.cc) around its run flag, and the simulation's queue (engine/sim_queue.cc) in both
// synchronisations, charging virtual time per phase. Neither a lock nor a clock is inside: a
// caller brings its own synchronisation and time, and asks in this order:
//   1. Refuse — the run was given up (Abort), or the frame's band has no room: the frame is
//      dropped (counted; the caller frees it) or, a stream's producer, waits for room (counted)
//      and asks again (its frame restamped by the caller once in: time blocked is
//      back-pressure, not latency, as an skb built after sk_stream_wait_memory);
//   2. Bypass — an empty qdisc nobody runs takes no frame: it is the run's first bulk
//      (TCQ_F_CAN_BYPASS; QdiscRun::Bypass), counted;
//   3. else the frame is enqueued, and Next says what the producer does then: wake the
//      dedicated runner, run the qdisc (qdisc_run), or nothing (a burst's frame before its last)
//      — after a drop at a full band too, as the kernel runs the qdisc whatever
//      dev_qdisc_enqueue returned (not after an abandoned run's drop: nothing runs then).

#include <cstdint>

#include <rte_mbuf.h>

#include "dataplane/gso.h"
#include "dataplane/queue_config.h"

namespace txbatch {

// What becomes of a frame its band has no room for, or of any frame once the run was given up.
enum class Refusal : uint8_t {
  kWait,         // a stream's producer waits for room (TxQueueCounters::waits), then asks again
  kDropFull,     // a datagram: dropped (dropped_qdisc_full)
  kDropAborted,  // the run was given up: dropped (dropped_aborted)
};

// What a producer does after its frame is enqueued.
enum class AfterEnqueue : uint8_t {
  kWakeRunner,  // --runner dedicated: producers only enqueue; the runner sends
  kRun,         // run the qdisc (__dev_xmit_skb's qdisc_run; a lock-free qdisc's flag may be taken)
  kNothing,     // another enqueue follows at once (a bridge's RX burst): run after the last
};

class EnqueueStep {
 public:
  explicit EnqueueStep(const TxQueueConfig& config)
      : bypass_(config.bypass && !config.shape.dedicated),
        block_(config.block_when_full),
        dedicated_(config.shape.dedicated) {}

  // Phase 1, for a frame `m` that cannot go in: the run was given up (`aborted`), or its band is
  // full. Counts what it decides.
  Refusal Refuse(bool aborted, const rte_mbuf* m, TxQueueCounters& c) const {
    if (aborted) {
      c.dropped_aborted.Add(WireFrames(m));
      return Refusal::kDropAborted;
    }
    if (!block_) {
      c.dropped_qdisc_full.Add(WireFrames(m));
      return Refusal::kDropFull;
    }
    c.waits.Add();
    return Refusal::kWait;
  }
  // Phase 2: whether the frame takes the empty-qdisc bypass: the cell has it (TxQueueConfig::
  // bypass, never with a dedicated runner), the producer runs the qdisc (`run`) and
  // `idle_empty()` (nobody runs the qdisc and it looks empty: a lock-free one's notes clear too). The queue's
  // state is not looked at (3.18 and 6.9 alike): a stopped one refuses the frame in the
  // handover. `bypassed` is counted by the caller once the frame is the run's (a lock-free
  // queue's second look, holding the flag, may find the qdisc no longer empty).
  // `idle_empty()` is asked last (it reads the run flag, a lock-free qdisc's notes and bands:
  // lines every producer and the runner write), only where the bypass could be taken.
  template <class IdleEmptyFn>
  bool Bypass(bool run, IdleEmptyFn&& idle_empty) const {
    return bypass_ && run && idle_empty();
  }

  // Phase 3, after the enqueue, or after a drop at a full band (`refused`, kWait where the frame
  // went in); an abandoned run's drop (kDropAborted) runs nothing.
  AfterEnqueue Next(bool run, Refusal refused = Refusal::kWait) const {
    if (refused == Refusal::kDropAborted) return AfterEnqueue::kNothing;
    if (dedicated_) return AfterEnqueue::kWakeRunner;
    return run ? AfterEnqueue::kRun : AfterEnqueue::kNothing;
  }

 private:
  const bool bypass_;
  const bool block_;
  const bool dedicated_;
};

}  // namespace txbatch
