#pragma once
// One TX queue: its qdisc (pfifo_fast under one root lock, the pre-4.16 Linux model), the inline
// runner and the TX-completion role.
//
// Runner (Linux __dev_xmit_skb/qdisc_run): a producer that enqueues and finds the qdisc idle
// becomes its runner and, dropping the root lock around each driver call, dequeues batches (as
// the flush policy allows) and transmits them until the qdisc is empty, the ring is full or its
// quota (dev_tx_weight) is spent. The others only enqueue.
//
// The missing IRQ (DESIGN.md Terms): a `txirq` thread per queue plays Linux's TX-completion
// interrupt and NET_TX softirq. It sleeps until the driver's next modelled completion (no
// spinning), reclaims, and when that restarted a stopped queue, or a runner ran out of quota,
// runs the qdisc again (counted as a reschedule). So a full ring never hangs the run.
//
// Locks: root_lock_ guards the qdisc, running_ and the waiters; tx_lock_ (HARD_TX_LOCK) guards
// the driver. Neither is taken while holding the other; irq_mu_ may be taken under either
// (Kick), never the other way round. tx_lock_ and irq_mu_, which the txirq
// takes on every wake, inherit priority; root_lock_, which it takes only to run the qdisc, does
// not: under heavy producer contention a priority-inheriting mutex's strict hand-over collapsed
// throughput (measured; doc/design.md).

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "batching/batch.h"
#include "batching/flush_policy.h"
#include "dataplane/counters.h"
#include "dataplane/pi_mutex.h"
#include "dataplane/qdisc.h"
#include "dataplane/run_window.h"
#include "dataplane/tsc.h"
#include "drivers/driver.h"

namespace txbatch {

// Linux dev_tx_weight: frames one qdisc run may send before it must yield and reschedule.
inline constexpr int kDevTxWeight = 64;
// Longest the txirq sleeps while the ring is idle: an interrupt-coalescing bound (e1000's
// default ITR allows ~8000 interrupts/s), so a frame sent alone is delivered within ~125 us.
inline constexpr std::chrono::microseconds kIrqIdlePoll{125};

struct TxQueueConfig {
  unsigned txqueuelen = kDefaultTxQueueLen;
  bool block_when_full = true;  // stream producers block; datagram producers drop
  double tsc_hz = 0;
  std::vector<int> irq_cpus;  // where the txirq may run (the process's allowed CPUs); empty = any
  bool noqueue = false;       // --qdisc none: producers call SendBatch, nothing is queued
  bool dedicated = false;     // --runner dedicated: one runner thread, producers only enqueue
};

struct TxQueueCounters {
  Counter dropped_qdisc_full;  // datagram producers that found their band full
  Counter dropped_aborted;     // frames refused after Abort() (a drain that did not finish)
  Counter dropped_noqueue;     // --qdisc none: frames the driver refused (Linux drops them too)
  Counter requeues;            // driver calls that left frames to requeue at the head
  Counter requeued_frames;
  Counter reschedules;  // qdisc runs started by the txirq role
  Counter runs;         // qdisc runs started by producers
  Counter tx_cycles;    // TSC spent dequeuing + in Xmit (the TX path)
  Counter waits;        // times a stream producer blocked on a full band
  // Longest the txirq woke after the completion deadline it slept for, within the run window:
  // the scheduler's (or the host's) delay in serving the modelled interrupt. Large values
  // explain an idle wire.
  Counter irq_max_late_tsc;
  std::array<Counter, kMaxBatch + 1> batch_hist;  // frames offered per Xmit call
};

class TxQueue {
 public:
  TxQueue(TxDriver& driver, const FlushPolicy& policy, const TxQueueConfig& config,
          const RunWindow& window);
  ~TxQueue();
  TxQueue(const TxQueue&) = delete;
  TxQueue& operator=(const TxQueue&) = delete;

  // The producer path (dev_queue_xmit). Enqueues `m` (ownership moves to the queue) into `band`
  // and, if nobody is running the qdisc, runs it. When the band is full a stream producer blocks
  // on a condition variable until the runner frees room; a datagram producer's frame is freed and
  // counted as dropped (returns false). A frame that waited is restamped when it gets in.
  // Thread-safe.
  bool Send(rte_mbuf* m, int band);

  // The producer path of `--qdisc none` (Linux noqueue): hands `batch` to the driver under the
  // TX lock (HARD_TX_LOCK) and returns how many it accepted. Those leave `batch`; the refused
  // ones stay in it, counted as dropped_noqueue, for the caller to free (Linux drops what a
  // device without a queue refuses). Thread-safe.
  uint16_t SendBatch(Batch& batch);

  // Starts / stops the txirq thread (and the dedicated runner). Stop only once Idle() (or when
  // abandoning the run).
  void StartIrq();
  void StopIrq();

  // Generation has stopped: a dedicated runner now sends what a buffer:N policy holds back.
  void Drain();

  // Gives up on a run whose drain did not finish: wakes every blocked producer, and from now on
  // Send frees and counts (dropped_aborted) instead of queueing, so producers return. Thread-safe.
  void Abort();

  // Nothing queued, nobody running, nothing in flight in the driver. Thread-safe.
  bool Idle();
  unsigned backlog();
  // Frees whatever is still queued (teardown of an abandoned run); returns how many.
  unsigned Purge();

  const TxQueueCounters& counters() const { return counters_; }
  std::thread::native_handle_type irq_thread() { return irq_.native_handle(); }
  // Whether the txirq thread got SCHED_FIFO (it preempts producers like a hard IRQ; needs root).
  bool irq_realtime() const { return irq_realtime_.load(); }

 private:
  // __qdisc_run. Called with root held and running_ set by the caller; clears running_.
  void Run(std::unique_lock<std::mutex>& root);
  void IrqLoop();
  void RunnerLoop();
  // Whether the dedicated runner should run the qdisc now. Called under root_lock_.
  bool RunnerReady(Tsc now) const;
  void Kick(bool resched);
  // One driver call; publishes whether the queue stopped and kicks the txirq if it did.
  // Called under tx_lock_.
  uint16_t XmitLocked(const Batch& batch);

  TxDriver& driver_;
  const FlushPolicy& policy_;
  const TxQueueConfig config_;
  const RunWindow& window_;
  const unsigned wake_level_;  // blocked producers are woken once the backlog falls to this

  std::mutex root_lock_;
  std::condition_variable space_cv_;
  PfifoFast qdisc_;
  bool running_ = false;          // __QDISC_STATE_RUNNING
  bool resched_pending_ = false;  // the txirq asked for another pass while a runner ran
  bool aborted_ = false;
  // --runner dedicated: the runner sleeps on runner_cv_ while there is nothing to send.
  std::condition_variable runner_cv_;
  bool runner_idle_ = false;
  bool runner_stop_ = false;
  bool draining_ = false;
  Tsc first_enqueued_ = 0;  // when the backlog last became non-empty (buffer:N:T's timer)
  std::thread runner_;
  unsigned waiters_ = 0;
  Batch batch_;  // used only by the current runner

  // Priority-inheriting: the SCHED_FIFO txirq takes it to reclaim (see pi_mutex.h).
  PiMutex tx_lock_;
  // The driver's Stopped(), published by whoever last held tx_lock_, so a runner can see a
  // stopped queue before dequeuing (Linux dequeue_skb checks netif_xmit_frozen_or_stopped).
  std::atomic<bool> tx_stopped_{false};

  PiMutex irq_mu_;  // producers take it to kick the txirq: priority-inheriting too
  std::condition_variable_any irq_cv_;
  bool irq_kicked_ = false;
  bool irq_resched_ = false;
  bool irq_stop_ = false;
  std::atomic<bool> irq_realtime_{false};
  std::thread irq_;

  TxQueueCounters counters_;
};

}  // namespace txbatch
