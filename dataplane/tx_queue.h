#pragma once
// One TX queue: its qdisc, its runner and its TX-completion role. Two qdisc synchronisations
// (MakeTxQueue, make_queue.h, picks one):
// * rootlock (rootlock_queue.h): one root lock around enqueue and dequeue, the pre-4.16 model;
// * nolock (nolock_queue.h): lock-free bands and an exclusive run flag, Linux >= 4.16
//   (TCQ_F_NOLOCK).
//
// Runner (Linux __dev_xmit_skb/qdisc_run): a producer that enqueues and finds the qdisc idle
// becomes its runner and dequeues batches (as the flush policy allows) and transmits them until
// the qdisc is empty, the ring is full or its quota (dev_tx_weight) is spent. The others only
// enqueue. With --runner dedicated one thread per queue is the only runner.
//
// The missing IRQ (DESIGN.md Terms): a `txirq` thread per queue plays Linux's TX-completion
// interrupt and NET_TX softirq. It sleeps until the driver's next modelled completion (no
// spinning), reclaims, and when that restarted a stopped queue, or a runner ran out of quota,
// runs the qdisc again (counted as a reschedule). So a full ring never hangs the run.
//
// This base class owns the driver side: tx_lock_ (HARD_TX_LOCK) around every driver call, the
// txirq, --qdisc none's SendBatch and the counters. Lock order: a qdisc lock is never taken
// while holding tx_lock_; irq_mu_ may be taken under either (Kick), never the other way round;
// of the receiver's two locks (TxQueueConfig::receiver) the short one over what is staged is
// taken under tx_lock_ and nothing under it, the one held while the receiver works only after
// tx_lock_ is let go; the control thread takes tx_lock_ alone, to read the driver's counters as one
// cut (DriverCountsNow). tx_lock_ and irq_mu_, which the SCHED_FIFO txirq takes on every wake,
// inherit priority (tx_lock_ not with --qdisc none, whose many producers contend on it).

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "base/counters.h"
#include "base/pi_mutex.h"
#include "base/thread_annotations.h"
#include "base/tsc.h"
#include "batching/batch.h"
#include "batching/dql.h"
#include "batching/flush_policy.h"
#include "dataplane/fq_codel.h"
#include "dataplane/histogram.h"
#include "dataplane/netdev_queue.h"
#include "dataplane/qdisc.h"
#include "dataplane/qdisc_run.h"
#include "dataplane/queue_config.h"
#include "dataplane/run_window.h"
#include "dataplane/rx_port.h"
#include "dataplane/tx_driver.h"

namespace txbatch {

class TxQueue {
 public:
  virtual ~TxQueue();
  TxQueue(const TxQueue&) = delete;
  TxQueue& operator=(const TxQueue&) = delete;

  // The producer path (dev_queue_xmit). Enqueues `m` (ownership moves to the queue) into `band`
  // and, if nobody is running the qdisc, runs it. When the band is full a stream producer blocks
  // on a condition variable until the runner frees room; a datagram producer's frame is freed and
  // counted as dropped (returns false). A frame that waited is restamped when it gets in.
  // Thread-safe. `run` false: another enqueue follows at once (a bridge enqueueing one RX
  // burst), so the qdisc is not run now; the caller runs it with RunQdisc after the last.
  virtual bool Send(rte_mbuf* m, int band, bool run = true) = 0;
  // Runs the qdisc if frames are queued and nobody runs it (with a dedicated runner: wakes it).
  virtual void RunQdisc() = 0;

  // The producer path of `--qdisc none` (Linux noqueue): hands `batch` to the driver under the
  // TX lock (HARD_TX_LOCK) and returns how many it accepted. Those leave `batch`; the refused
  // ones stay in it, counted as dropped_noqueue, for the caller to free (Linux drops what a
  // device without a queue refuses). With segment_gso its GSO frames are cut into segments
  // first (at most kMaxGsoBulk frames then). Thread-safe.
  uint16_t SendBatch(Batch& batch);

  // Starts / stops the txirq thread (and the dedicated runner). Stop only once Idle() (or when
  // abandoning the run).
  void StartIrq();
  void StopIrq();

  // Generation has stopped: a dedicated runner now sends what a buffer:N policy holds back.
  virtual void Drain() = 0;

  // Gives up on a run whose drain did not finish: wakes every blocked producer, and from now on
  // Send frees and counts (dropped_aborted) instead of queueing, so producers return. Thread-safe.
  virtual void Abort() = 0;

  // Nothing queued, nobody running, nothing in flight in the driver, nothing staged for the
  // receiver or being handed on. Thread-safe.
  bool Idle();
  virtual unsigned backlog() = 0;
  // Frees whatever is still queued (teardown of an abandoned run, every thread stopped); returns
  // how many.
  virtual unsigned Purge() = 0;

  // The completion role's work at `now` (what the txirq does each time it wakes): reclaims what
  // the driver completed, reports the bytes to BQL, and runs the qdisc again when that restarted
  // a stopped queue or `resched` (a runner ran out of quota) asks for it. Public so that scripted
  // tests can play the txirq on a virtual clock (with StartIrq never called).
  void Completion(Tsc now, bool resched);

  // The handover times (ns) recorded since the last call (config.time_handover). Thread-safe.
  LatencyHistogram TakeHandoverLatency();

  // BQL's limit now, when the queue uses BQL. Thread-safe.
  std::optional<uint32_t> bql_limit();

  // TCP Small Queues' ledger, for a qdisc that drops frames it had queued (Qdisc::set_tsq).
  // Before the queue runs.
  virtual void set_tsq(TsqLedger* /*tsq*/) {}

  const TxQueueCounters& counters() const { return counters_; }
  // The driver's counters read as one cut, under the TX lock the driver keeps them under: a
  // handover's doorbell, its accepted frames and its departures fall on the same side of the
  // cut (the run window's ends are read while the queue's threads send). Thread-safe.
  DriverCounts DriverCountsNow();
  // When the driver's queue is stopped now: why, as its driver says (TxDriver::StopCause); a
  // drain that ends with it so waited for the device, not for txbatch. Thread-safe.
  std::optional<std::string> StoppedBecause();
  // The threads this queue runs besides the producers (the txirq; a dedicated runner), whose
  // CPU time is the TX path's too.
  std::vector<std::thread::native_handle_type> service_threads();
  // Whether the txirq thread got SCHED_FIFO (it preempts producers like a hard IRQ; needs root).
  bool irq_realtime() const { return irq_realtime_.load(); }

 protected:
  TxQueue(TxDriver& driver, const FlushPolicy& policy, const TxQueueConfig& config,
          const RunWindow& window);

  // The qdisc side, implemented per synchronisation.
  virtual bool QdiscIdle() = 0;
  // From the txirq: the completion restarted a stopped queue, or a runner ran out of quota
  // (`resched`): run the qdisc again (or wake the dedicated runner).
  virtual void Restart(bool resched) = 0;
  // The dedicated runner's turns (RunnerTurns with its synchronisation's parts), until
  // runner_stop_.
  virtual void RunnerTurnsUntilStopped() = 0;
  // Wakes a sleeping dedicated runner (to see runner_stop_, a drain, an enqueue).
  virtual void WakeRunner() = 0;

  // The dedicated runner's loop, written once for both synchronisations: `look(now)` says why
  // to run now (a RunnerTurn: RunnerLook on the queue's state), `sleep(turn, now)` sleeps until
  // woken or turn.wake_by (at most kIrqIdlePoll: RunnerSleep), `run()` runs the qdisc once,
  // counted here as a run and by its trigger. The root-locked queue calls it holding its lock.
  template <class Look, class Sleep, class RunOnce>
  void RunnerTurns(Look&& look, Sleep&& sleep, RunOnce&& run) {
    while (!runner_stop_.load()) {
      const Tsc now = Now();
      const RunnerTurn turn = look(now);
      if (turn.why == FlushTrigger::kNone) {
        sleep(turn, now);
        continue;
      }
      counters_.runs.Add();
      counters_.flush_triggers[static_cast<size_t>(turn.why)].Add();
      run();
    }
  }

  // What the policy reads of the device before a dequeue at `now` (BQL's room, free slots,
  // whether the qdisc may bulk), as last published under the TX lock; QdiscRun fills in the rest.
  DequeueContext Device(Tsc now) const;

  // Hands `batch` to the driver under the TX lock, as `handover` says (one call; one call per
  // frame with xmit_more), timed from `t0` (taken before the dequeue) into tx_cycles and counted
  // in batch_hist (unless a stopped queue refused it whole, with no driver call); the frames'
  // handover stamp is `handed` (0: t0). With segment_gso its GSO frames are first cut into
  // segments, in `batch`, outside the TX lock (validate_xmit_skb_list). Returns how many
  // frames of `batch` (as it is then) the driver accepted.
  uint16_t Transmit(Batch& batch, Tsc t0, Handover handover = Handover::kBurst, Tsc handed = 0);
  void Kick(bool resched);
  // How long a dedicated runner may sleep: kIrqIdlePoll, or less to meet `flush_by`.
  std::chrono::microseconds RunnerSleep(Tsc flush_by, Tsc now) const;
  // The txirq and a dedicated runner (`role`): named txb-<role><queue>, registered with EAL
  // (mempool caches), on the allowed CPUs, with 1 ns timer slack. Returns whether registration
  // worked (unregister at exit).
  bool EnterServiceThread(std::string_view role) const;

  TxDriver& driver_;
  const FlushPolicy& policy_;
  const TxQueueConfig config_;
  const RunWindow& window_;

  // The driver's Stopped(), published by whoever last held tx_lock_, so a runner can see a
  // stopped queue before dequeuing (Linux dequeue_skb checks netif_xmit_frozen_or_stopped).
  std::atomic<bool> tx_stopped_{false};
  std::atomic<bool> runner_stop_{false};
  TxQueueCounters counters_;

 private:
  void IrqLoop();
  // The dedicated runner's thread: a service thread's setup, then its turns.
  void RunnerLoop();
  // Records in each frame's TxMeta when it was handed to the driver and at which position: at
  // `now`, when the run began to take the bulk (its dequeue is the qdisc's, no TSC read of its
  // own), or when a producer's own batch went (--qdisc none).
  void MarkHandover(const Batch& batch, Tsc now);
  // One handover (NetdevQueue::Xmit's `from_qdisc`); publishes whether the queue stopped and
  // kicks the txirq if it did. Called under tx_lock_.
  XmitResult XmitLocked(const Batch& batch, Handover handover, bool from_qdisc, Tsc now)
      REQUIRES(tx_lock_);
  // Publishes what runners read without tx_lock_ (stopped, BQL's room, free slots).
  void PublishLocked() REQUIRES(tx_lock_);
  // Ends a TX-lock section held through `tx`: what the driver delivered to
  // TxQueueConfig::receiver is handed on after tx_lock_ is let go, and `tx` comes back unlocked
  // either way (RELEASE: the analysis refuses a guarded member touched after it). Its body lets
  // go inside the receiver's Flush, a callback the analysis cannot follow: the body alone is
  // not checked.
  void HandOn(UniqueLock<PiMutex>& tx) RELEASE(tx) NO_THREAD_SAFETY_ANALYSIS;

  // Priority-inheriting: the SCHED_FIFO txirq takes it to reclaim (see pi_mutex.h). The lock
  // order above, as the analysis checks it (base/thread_annotations.h): irq_mu_ after it.
  PiMutex tx_lock_ ACQUIRED_BEFORE(irq_mu_);
  std::thread runner_;
  Mutex handover_mu_;  // runners write handover_latency_'s histogram, a reader takes it
  // Made at construction (or not), then only its histogram changes.
  std::unique_ptr<LatencyHistogram> handover_latency_ PT_GUARDED_BY(handover_mu_);
  // The driver and BQL, under tx_lock_ (netdev_tx_sent_queue runs in the driver's xmit, under
  // HARD_TX_LOCK).
  NetdevQueue dev_ GUARDED_BY(tx_lock_);
  const bool has_bql_;  // dev_.has_bql(), fixed at construction: read without tx_lock_
  // Published under tx_lock_ for runners, which plan a dequeue before taking it.
  std::atomic<int64_t> bql_avail_{0};
  std::atomic<unsigned> free_slots_{kMaxBatch};

  PiMutex irq_mu_;  // producers take it to kick the txirq: priority-inheriting too
  std::condition_variable_any irq_cv_;
  bool irq_kicked_ GUARDED_BY(irq_mu_) = false;
  bool irq_resched_ GUARDED_BY(irq_mu_) = false;
  bool irq_stop_ GUARDED_BY(irq_mu_) = false;
  std::atomic<bool> irq_realtime_{false};
  std::thread irq_;
  const int meta_offset_;  // TxMetaOffset()
};

}  // namespace txbatch
