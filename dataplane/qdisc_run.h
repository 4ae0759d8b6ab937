#pragma once
// The qdisc run, written once (Linux __qdisc_run -> qdisc_restart -> sch_direct_xmit), for the
// three places that run a qdisc: the root-locked queue (rootlock_queue.cc) wraps its phases in
// the root lock, the lock-free queue (nolock_queue.cc) runs them while it holds the run flag,
// and the simulation (engine/sim_queue.cc) takes them as its actors' steps and charges virtual
// time per phase. Neither a lock nor a clock is inside: a caller brings its own synchronisation
// and time.
//
// One run is, until it ends:
//   1. Open, Dequeue — a stopped queue ends the run; else, under the policy's budget
//      (DequeueContext: what the device lets it take), a bulk from the qdisc; nothing dequeued
//      ends the run;
//   2. hand over — the caller gives batch() to the driver (its TX lock, its clock) and learns
//      how many frames were accepted;
//   3. Settle — the quota is charged (a packet a frame; 3.18's requeued list one; the bypass's
//      frame none), the refused frames go back to the head (requeue counted) and the run ends
//      (sch_direct_xmit after dev_requeue_skb), else the run goes on, or ends asking the
//      completion role to run it again (__netif_schedule) when the quota is spent with frames
//      left (a dedicated runner's run also ends where its policy holds back what is left).
// The decisions around a run are here too: when a dedicated runner runs (RunnerReady), until
// when it may sleep (RunnerWakeBy) and what a completion that restarted the queue does
// (OnRestart).

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>

#include "base/tsc.h"
#include "batching/batch.h"
#include "batching/flush_policy.h"
#include "dataplane/gso.h"
#include "dataplane/queue_config.h"

namespace txbatch {

// The backlog at which a run wakes blocked stream producers: hysteresis, as a socket's
// write-space callback — once a quarter of a band of `txqueuelen` is free, not for every frame
// dequeued.
inline unsigned WakeLevel(unsigned txqueuelen) { return txqueuelen - std::max(1u, txqueuelen / 4); }

// Whether the kernel a cell models has the empty-qdisc bypass for `shape` (TxQueueConfig::bypass,
// unless --no-bypass): only an inline run can take it (no qdisc, or a dedicated runner, has
// none); blist-2007's kernel predates it (TCQ_F_CAN_BYPASS came with 2.6.32, 2009); a lock-free
// qdisc has it since 5.14 (2021), after linux-2014's kernel.
inline bool KernelBypass(const PolicySpec& policy, const QueueShape& shape) {
  if (shape.noqueue || shape.dedicated) return false;
  if (policy.kind == PolicyKind::kBlist2007) return false;
  return !(shape.nolock && policy.kind == PolicyKind::kLinux2014);
}

// Whether the kernel `policy` names ran `shape`'s qdisc lock-free (TCQ_F_NOLOCK), --sync auto's
// choice. Only pfifo_fast has a lock-free form (4.16 on; tc's pfifo takes the root lock in every
// kernel, and so does fq_codel). linux-2025 (6.x) and bql (today's BQL drivers): lock-free;
// linux-2014 (3.18), blist-2007 (2.6) and the DPDK-style count:N and buffer:N: the root lock.
inline bool KernelNolock(const PolicySpec& policy, const QueueShape& shape) {
  if (shape.noqueue || shape.pfifo || shape.fq_codel) return false;
  return policy.kind == PolicyKind::kLinux2025 || policy.kind == PolicyKind::kBql;
}

// A lock-free qdisc's notes (5.14's __QDISC_STATE_MISSED and __QDISC_STATE_DRAINING) and their
// rules, written once for the real lock-free queue (Flag = std::atomic<bool>: a note is a
// store-then-load pair between threads, and a seq_cst fence stands where the kernel has its
// barrier) and for the simulation's (Flag = SimFlag: one thread).
template <class Flag>
struct QdiscNotes {
  Flag missed{false};    // a producer lost the run flag, or a run left work (quota, requeue)
  Flag draining{false};  // a run found the queue stopped

  // qdisc_run_begin for TCQ_F_NOLOCK (5.14): whether this caller takes the run flag `running`;
  // `*found_taken` (if given) is set when its first try found it taken. One that finds it taken
  // leaves MISSED for the holder and tries once more; a note already there is the holder's to
  // read (no second try).
  template <class RunFlag>
  bool RunBegin(RunFlag& running, bool* found_taken = nullptr) {
    if (!running.exchange(true)) return true;
    if (found_taken != nullptr) *found_taken = true;
    if (missed.exchange(true)) return false;
    return !running.exchange(true);
  }
  // qdisc_run_end: the flag goes, then the note is read (a store-load pair: seq_cst); returns
  // whether to reschedule (__netif_schedule). A note a producer left after the run's last look
  // (its dequeue that found nothing, or Settle's) is seen here and nowhere else.
  template <class RunFlag>
  bool RunEnd(RunFlag& running) {
    running.store(false);
    return missed.load();
  }

  // nolock_qdisc_is_empty, the bands looked at too (`empty`).
  bool LooksEmpty(bool empty) const { return !missed.load() && !draining.load() && empty; }
  // qdisc_maybe_clear_missed, for a run that found the queue stopped: MISSED goes (the wake
  // reschedules) and DRAINING keeps producers from the bypass; `stopped()` is read after the
  // clear, so a wake that came in between keeps its MISSED.
  template <class StoppedFn>
  void QueueStopped(StoppedFn&& stopped) {
    missed.store(false);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!stopped())
      missed.store(true);
    else
      draining.store(true);
  }
  // pfifo_fast_dequeue: a dequeue that found nothing with a note set clears both and looks once
  // more (returns whether to); the look comes after the clear (smp_mb__after_atomic).
  bool ClearForAnotherLook() {
    if (!missed.load() && !draining.load()) return false;
    missed.store(false);
    draining.store(false);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    return true;
  }
  // Whether the completion role's restart has nothing to run: net_tx_action runs even a qdisc
  // that looks empty when asked to reschedule or a note is set (a producer that found MISSED
  // already set left its frame to that run).
  bool NothingToRestart(bool empty, bool resched) const {
    return empty && !resched && !missed.load();
  }
};

// A note of the simulation's lock-free queue, read and written as std::atomic<bool> is.
struct SimFlag {
  bool v = false;
  bool load() const { return v; }
  void store(bool x) { v = x; }
  bool exchange(bool x) { return std::exchange(v, x); }
};

// The most frames one bulk of a queue configured so may hold: a bulk the stack cuts into
// segments before the driver (--offload gso) must fit a Batch once cut (kMaxGsoBulk, gso.h).
inline uint16_t MaxBulk(const TxQueueConfig& config) {
  return config.segment_gso ? kMaxGsoBulk : kMaxBatch;
}

// What a run does after Settle.
enum class RunNext : uint8_t {
  kDequeue,     // go on: the next bulk
  kEnd,         // the run is over
  kReschedule,  // over with its quota spent and frames left: kick the completion role
};

// `Qdisc`: Qdisc (pfifo_fast, pfifo or fq_codel under a root lock, or the simulation's) or
// LockfreePfifo (run-flag holder).
template <class Qdisc>
class QdiscRun {
 public:
  // `dedicated`: a dedicated runner, which goes on after its quota (it has no softirq to
  // hand the rest to). `wake_level`: blocked producers are woken once the backlog falls to it.
  // `max_bulk`: the most frames a bulk may hold (below kMaxBatch where the stack cuts GSO
  // frames into segments before the driver: MaxBulk).
  QdiscRun(const FlushPolicy& policy, bool dedicated, unsigned wake_level,
           uint16_t max_bulk = kMaxBatch)
      : policy_(policy),
        dedicated_(dedicated),
        wake_level_(wake_level),
        max_bulk_(max_bulk),
        bypass_handover_(policy.spec().handover()) {}

  // A run starts with a fresh quota (dev_tx_weight), or what is left of one (a run flag's
  // holder that let its flag go and took it again after MISSED).
  void Begin(int quota = kDevTxWeight) { quota_ = quota; }

  // Phase 1, in two steps. First whether the queue takes frames at all: `stopped()` reads
  // whether the driver's queue is stopped (Linux dequeue_skb's netif_xmit_frozen_or_stopped),
  // which ends the run unless the completion role restarted it during this run
  // (`resched_pending`, cleared here; nullptr where a run flag's MISSED note does that job) —
  // then it is read once more.
  template <class StoppedFn>
  static bool Open(StoppedFn&& stopped, bool* resched_pending) {
    while (stopped()) {
      if (resched_pending == nullptr || !*resched_pending) return false;
      *resched_pending = false;
    }
    return true;
  }

  // Then the dequeue. `device` is what the policy reads of the device (BQL's room, free slots);
  // the quota and the requeued count are filled in here. Returns how many frames batch() holds
  // now (0: the run ends); `wake` says whether blocked producers should be woken: `waiters()`
  // of them wait and the backlog fell to the wake level. The count
  // is read after the dequeue: a producer counts itself before it looks at its band (the
  // lock-free queue's Dekker pair), so one that still saw it full is seen here.
  template <class WaitersFn>
  uint16_t Dequeue(Qdisc& qdisc, DequeueContext device, WaitersFn&& waiters, bool* wake) {
    batch_.Clear();
    device.quota_left = quota_;
    device.requeued = qdisc.requeued();
    DequeueBudget budget = policy_.Budget(device);
    // max_bulk_ bounds the GSO frames the stack will cut; a 3.18 requeued list (one_packet) is
    // what a driver refused of a bulk already cut, handed back whole (dequeue_skb's gso_skb).
    if (!budget.one_packet) budget.frames = std::min(budget.frames, max_bulk_);
    handover_ = budget.handover;
    const uint16_t n = qdisc.DequeueBulk(batch_, budget, device.now);
    packets_ = budget.one_packet ? 1 : n;
    *wake = n > 0 && waiters() > 0 && qdisc.backlog() <= wake_level_;
    return n;
  }

  // Instead of phase 1, Linux's empty-qdisc bypass (TCQ_F_CAN_BYPASS, __dev_xmit_skb): a frame
  // that found the qdisc empty and took the run goes to the driver as the run's first bulk,
  // never enqueued nor dequeued, whether or not the queue is stopped (no kernel's condition
  // looks; sch_direct_xmit finds it stopped and requeues the frame). It costs the run no quota:
  // the kernel's __qdisc_run begins after it, with dev_tx_weight of its own. The run then goes
  // on from Settle as after any bulk. The caller counts it. It is handed over as the policy's
  // bulks are: the kernel policies' sch_direct_xmit gives dev_hard_start_xmit whatever
  // validate_xmit_skb made of it, a GSO frame cut in the stack (--offload gso) going a segment
  // a call with xmit_more on all but the last (xmit_one), not as one burst.
  void Bypass(rte_mbuf* m) {
    batch_.Clear();
    batch_.Push(m);
    handover_ = bypass_handover_;
    packets_ = 0;
  }

  // Phase 3, after the driver accepted `accepted` of batch(): charges the quota, requeues the
  // rest at the head (counted in `c`) and says what comes next; `stopped()` reads whether the
  // driver's queue is stopped now. Leaves batch() empty.
  template <class StoppedFn>
  RunNext Settle(Qdisc& qdisc, uint16_t accepted, TxQueueCounters& c, StoppedFn&& stopped) {
    const uint16_t n = batch_.size();
    // The bulk as qdisc:qdisc_dequeue reports it: its packets, here where every dequeue that
    // took frames ends, whatever the driver made of it (a bypassed frame was never dequeued).
    if (packets_ > 0) c.dequeue_hist[packets_].Add();
    quota_ -= packets_;
    const bool refused = accepted < n;
    if (refused)
      qdisc.Requeue(batch_.frames().subspan(accepted), policy_.spec().requeues_as_list());
    batch_.Clear();
    if (refused) {
      c.requeues.Add();
      c.requeued_frames.Add(n - accepted);
      // sch_direct_xmit ends the run after dev_requeue_skb (3.18 returns its 0, 4.x on false),
      // and dev_requeue_skb schedules the softirq (__netif_schedule; a lock-free qdisc's MISSED
      // does it at qdisc_run_end). That run finds a stopped queue and does nothing, so only a
      // queue still open is rescheduled; the wake restarts a stopped one. A dedicated runner
      // goes on (and sees the stopped queue).
      if (dedicated_) return RunNext::kDequeue;
      return stopped() ? RunNext::kEnd : RunNext::kReschedule;
    }
    // A dedicated runner runs when its policy's trigger says so (RunnerReady), and each bulk it
    // takes is one the trigger allowed: what is left that the policy still holds back (buffer:N,
    // fewer than N) waits for the runner's next look, which reads the buffer's timer and the
    // drain as well. Going on here took what producers had enqueued during the driver call, a
    // bulk of 1..16 after each 32 under buffer:32 in the VM lab (issue 44).
    if (dedicated_ && HeldBack(qdisc)) return RunNext::kEnd;
    if (quota_ > 0) return RunNext::kDequeue;
    // __netif_schedule: the softirq role continues (a dedicated runner just goes on).
    return !dedicated_ && !qdisc.empty() ? RunNext::kReschedule : RunNext::kEnd;
  }

  // The bulk in hand between Dequeue and Settle (what the driver is offered, as handover()).
  Batch& batch() { return batch_; }
  Handover handover() const { return handover_; }
  // What is left of the run's quota.
  int quota() const { return quota_; }

 private:
  // Whether frames are queued that the policy's trigger would not send yet, its timer aside
  // (count:N and the kernel policies send whatever is queued: never; buffer:N fewer than N).
  bool HeldBack(const Qdisc& qdisc) const {
    const unsigned left = qdisc.backlog();
    const auto n = static_cast<uint16_t>(std::min<unsigned>(left, UINT16_MAX));
    // `first` and `now` both 0: no timer has run out (the runner's loop reads the real one).
    return left > 0 && policy_.Trigger(n, 0, 0, /*write_done=*/true) == FlushTrigger::kNone;
  }

  const FlushPolicy& policy_;
  const bool dedicated_;
  const unsigned wake_level_;
  const uint16_t max_bulk_;
  const Handover bypass_handover_;  // the policy's handover of a fresh bulk
  int quota_ = kDevTxWeight;
  int packets_ = 0;  // what the bulk in hand costs the quota (DequeueBudget::one_packet)
  Batch batch_;
  Handover handover_ = Handover::kBurst;
};

// Why a dedicated runner should run the qdisc now (kNone: not yet): nothing when the qdisc is
// empty or the queue stopped, the drain once generation ended, else the policy's trigger on
// the backlog (count:N takes what is queued; buffer:N[:T] waits for N frames or its timer).
inline FlushTrigger RunnerReady(const FlushPolicy& policy, unsigned backlog, bool stopped,
                                bool draining, Tsc first_enqueued, Tsc now) {
  if (backlog == 0 || stopped) return FlushTrigger::kNone;
  if (draining) return FlushTrigger::kEnd;
  const auto n = static_cast<uint16_t>(std::min<unsigned>(backlog, UINT16_MAX));
  return policy.Trigger(n, first_enqueued, now, /*write_done=*/true);
}

// Until when a dedicated runner that found nothing to do may sleep, unless woken by an enqueue,
// a restarted queue or the drain: the buffer's timer, or kNever (an empty qdisc or a stopped
// queue waits for a wake).
inline Tsc RunnerWakeBy(const FlushPolicy& policy, unsigned backlog, bool stopped,
                        Tsc first_enqueued) {
  return backlog == 0 || stopped ? kNever : policy.FlushBy(first_enqueued);
}

// A dedicated runner's look, written once for the real queues' loop (TxQueue::RunnerTurns) and
// the simulation's (SimQueue::Poll): why it runs the qdisc now (RunnerReady) or, kNone, until
// when it may sleep unless woken (RunnerWakeBy).
struct RunnerTurn {
  FlushTrigger why = FlushTrigger::kNone;
  Tsc wake_by = kNever;
};
inline RunnerTurn RunnerLook(const FlushPolicy& policy, unsigned backlog, bool stopped,
                             bool draining, Tsc first_enqueued, Tsc now) {
  const FlushTrigger why = RunnerReady(policy, backlog, stopped, draining, first_enqueued, now);
  if (why != FlushTrigger::kNone) return {why, kNever};
  return {why, RunnerWakeBy(policy, backlog, stopped, first_enqueued)};
}

// What the completion role does when it restarted a stopped queue or a run asked to be
// rescheduled (Linux netif_wake_queue / net_tx_action).
enum class RestartAction : uint8_t {
  kWakeRunner,  // --runner dedicated: the runner goes on
  kPending,     // somebody runs the qdisc: it looks at the queue once more (resched_pending)
  kRun,         // run the qdisc now, counted as a reschedule
  kNothing,     // nothing queued
};
// `running`: a run is in progress and will see a pending restart (false where a run flag's
// MISSED note does that job).
inline RestartAction OnRestart(bool dedicated, bool running, bool empty) {
  if (dedicated) return RestartAction::kWakeRunner;
  if (running) return RestartAction::kPending;
  return empty ? RestartAction::kNothing : RestartAction::kRun;
}

}  // namespace txbatch
