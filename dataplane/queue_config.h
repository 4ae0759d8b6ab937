#pragma once
// What a TX queue is made from, apart from the queue: its shape (--qdisc, --sync, --runner), its
// configuration and its counters. The qdisc's run (qdisc_run.h), the queues (tx_queue.h and the
// two synchronisations), the simulation's queue and the factories (make_queue.h) all read these;
// nothing here knows a queue.

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "base/counters.h"
#include "batching/batch.h"
#include "batching/dql.h"
#include "batching/flush_policy.h"
#include "dataplane/fq_codel.h"
#include "dataplane/qdisc.h"
#include "dataplane/rx_port.h"

namespace txbatch {

// Longest the txirq sleeps while the ring is idle: an interrupt-coalescing bound (e1000's
// default ITR allows ~8000 interrupts/s), so a frame sent alone is delivered within ~125 us.
inline constexpr std::chrono::microseconds kIrqIdlePoll{125};

// How a TX queue is shaped: its qdisc, its synchronisation and who runs it. One struct from the
// command line (run_options: each --qdisc/--sync/--runner value) through the cell to the queue.
struct QueueShape {
  bool noqueue =
      false;            // --qdisc none: producers call SendBatch, nothing is queued (Linux noqueue)
  bool pfifo = false;   // --qdisc pfifo: one band, installed by tc, root-locked
  // --qdisc fq_codel: its parameters (fq_codel.h); root-locked, as every kernel runs it.
  std::optional<FqCodelParams> fq_codel;
  bool nolock = false;  // --sync nolock: lock-free bands and a run flag (TCQ_F_NOLOCK, >= 4.16)
  bool dedicated = false;  // --runner dedicated: one runner thread, producers only enqueue
  bool operator==(const QueueShape&) const = default;
};

// The qdisc's name, as tc and --qdisc write it: pfifo_fast, pfifo, fq_codel or none.
inline const char* QdiscName(const QueueShape& s) {
  return s.noqueue ? "none" : s.pfifo ? "pfifo" : s.fq_codel ? "fq_codel" : "pfifo_fast";
}

struct TxQueueConfig {
  unsigned txqueuelen = kDefaultTxQueueLen;
  // The device's MTU plus its link header (psched_mtu): fq_codel's default quantum and CoDel's
  // `mtu` (no drop while no more than that is queued).
  unsigned psched_mtu = 1514;
  bool block_when_full = true;  // stream producers block; datagram producers drop
  double tsc_hz = 0;
  std::vector<int> irq_cpus;  // where the txirq may run (the process's allowed CPUs); empty = any
  unsigned index = 0;         // the queue's number: its threads' names (txb-txirqN, txb-runnerN)
  QueueShape shape;
  // Linux's empty-qdisc bypass (TCQ_F_CAN_BYPASS, set by pfifo_fast_init and fifo_init; for a
  // lock-free qdisc since 5.14): with an inline runner, a frame that finds the qdisc empty and
  // not running goes straight to the driver (QdiscRun::Bypass). Off unless the cell turns it on
  // (CellConfig::bypass: KernelBypass of its policy and shape, not with --no-bypass).
  bool bypass = false;
  // --offload gso: the stack cuts GSO frames into segments between the dequeue and the driver
  // (validate_xmit_skb; gso.h), and a bulk holds at most kMaxGsoBulk frames (MaxBulk).
  bool segment_gso = false;
  bool track_stages = true;  // record handovers in TxMeta (only where frames come back)
  // With track_stages: keep every frame's time from its stamp to the driver call that took it
  // (the bridge: time through it), for TakeHandoverLatency.
  bool time_handover = false;
  // Used when the policy reads BQL and the driver reports completions.
  BqlBounds bql;
  // Whether the TX lock inherits priority (PiMutex), so that the SCHED_FIFO txirq waiting for
  // it lifts a holder a sibling thread preempted on its CPU. Under contention a priority-
  // inheriting futex costs far more than a plain one (futex_lock_pi/futex_unlock_pi in the
  // kernel: 2 inline producers on 2 CPUs sent 1.9-2.6x fewer frames with it): TxLockInherits
  // (cell.h) keeps it for run's cells only where a holder can be preempted by a sibling.
  bool tx_lock_inherits = true;
  // The receiver the driver delivers to where it delivers inside its calls (the emulated sink):
  // what it staged is handed on after each TX-lock section, outside the lock and the TX path's
  // windows, its time booked into rx_cycles.
  DeferredReceiver* receiver = nullptr;
};

// A queue's counters (TxQueueCounters, live: SharedCounter where producers write outside any
// lock) and their values at one moment (TxQueueCounts).
template <class C, class S = C>
struct TxQueueCountersOf {
  S dropped_qdisc_full;  // datagram producers that found their band full
  S dropped_aborted;     // frames refused after Abort() (a drain that did not finish)
  S waits;               // times a stream producer blocked on a full band
  C dropped_noqueue;     // --qdisc none: frames the driver refused (Linux drops them)
  C requeues;            // driver calls that left frames to requeue at the head
  C requeued_frames;
  C reschedules;  // qdisc runs started by the txirq role
  C runs;         // qdisc runs started by producers (or the dedicated runner)
  S missed;       // nolock: producers that found the run flag taken (__QDISC_STATE_MISSED)
  C bypassed;     // frames that took the empty-qdisc bypass (TxQueueConfig::bypass): straight
                  // to the driver, or, a stopped queue refusing them, into the requeue slot
  C tx_cycles;    // TSC spent dequeuing + in Xmit (the TX path)
  // The completion role's reclaims that freed something: calls, frames, and the TSC they took
  // under the TX lock (the driver's reclaim), for calibrate.
  C completions, completion_frames, completion_cycles;
  // The receiver's (TxQueueConfig::receiver) TSC handing on what the driver delivered, after
  // the TX path's and the completion role's calls, and those frames: written under its lock.
  C rx_cycles, rx_frames;
  // Longest the txirq woke after the completion deadline it slept for, within the run window:
  // the scheduler's (or the host's) delay in serving the modelled interrupt. Large values
  // explain an idle wire.
  C irq_max_late_tsc;
  std::array<C, kMaxBatch + 1> batch_hist;  // frames offered per Xmit call
  // The qdisc's bulks by their exact size: every dequeue that took frames (QdiscRun::Settle),
  // those a stopped queue then refused whole included, the bypass's frames not (Linux's
  // qdisc:qdisc_dequeue tracepoint with packets > 0: a requeued 2025 frame is a bulk of 1).
  std::array<C, kMaxBatch + 1> dequeue_hist;
  // A dedicated runner's runs, by why it ran (buffer:N's N, its timer, the drain; count:N runs
  // on whatever is there: kWriteDone).
  std::array<C, kFlushTriggers> flush_triggers;
  // BQL (policies that read it, on drivers that report completions): times the stack stopped
  // the queue because the bytes in the driver reached the limit (__QUEUE_STATE_STACK_XOFF),
  // and the largest limit it reached.
  C bql_stops;
  C bql_limit_max;
  // What a qdisc that drops frames it had queued (fq_codel) dropped and marked.
  QdiscCountersOf<C> qdisc;

  // Every field once (base/counters.h): totals, snapshots and window differences read this.
  template <class F, class... Q>
  static void Fields(F&& f, Q&... q) {
    f(Sum{}, q.dropped_qdisc_full...);
    f(Sum{}, q.dropped_aborted...);
    f(Sum{}, q.waits...);
    f(Sum{}, q.dropped_noqueue...);
    f(Sum{}, q.requeues...);
    f(Sum{}, q.requeued_frames...);
    f(Sum{}, q.reschedules...);
    f(Sum{}, q.runs...);
    f(Sum{}, q.missed...);
    f(Sum{}, q.bypassed...);
    f(Sum{}, q.tx_cycles...);
    f(Sum{}, q.completions...);
    f(Sum{}, q.completion_frames...);
    f(Sum{}, q.completion_cycles...);
    f(Sum{}, q.rx_cycles...);
    f(Sum{}, q.rx_frames...);
    f(Max{}, q.irq_max_late_tsc...);
    f(Sum{}, q.batch_hist...);
    f(Sum{}, q.dequeue_hist...);
    f(Sum{}, q.flush_triggers...);
    f(Sum{}, q.bql_stops...);
    f(Max{}, q.bql_limit_max...);
    QdiscCountersOf<C>::Fields(f, q.qdisc...);
  }
};
struct TxQueueCounters : TxQueueCountersOf<Counter, SharedCounter> {};
struct TxQueueCounts : TxQueueCountersOf<uint64_t> {};

// The root-locked qdisc `config` names (pfifo_fast, pfifo or fq_codel), its drops counted in
// `counters`; `bound`: what pfifo_fast's limit bounds.
std::unique_ptr<Qdisc> MakeQdisc(const TxQueueConfig& config, QdiscCounters& counters,
                                 QdiscLimit bound = QdiscLimit::kLength);

}  // namespace txbatch
