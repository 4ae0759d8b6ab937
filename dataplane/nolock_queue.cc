#include "dataplane/nolock_queue.h"

#include <rte_lcore.h>

#include <algorithm>

#include "dataplane/frame.h"
#include "dataplane/gso.h"

namespace txbatch {

// Every flag below is sequentially consistent: the run flag and MISSED, and a waiter's count
// and the backlog, are each a store-then-load pair on two threads (Dekker), which only a single
// total order keeps from both missing the other. Where one side of a pair is not one of these
// flags (the published tx_stopped_, a lock-free band's emptied slots), a seq_cst fence stands where
// the kernel has its barrier (smp_mb__after_atomic after clearing MISSED).

NolockTxQueue::NolockTxQueue(TxDriver& driver, const FlushPolicy& policy,
                             const TxQueueConfig& config, const RunWindow& window)
    : TxQueue(driver, policy, config, window),
      qdisc_(config.txqueuelen),
      enqueue_(config),
      run_(policy, config.shape.dedicated, WakeLevel(config.txqueuelen), MaxBulk(config)) {}

NolockTxQueue::~NolockTxQueue() { StopIrq(); }

bool NolockTxQueue::Send(rte_mbuf* m, int band, bool run) {
  // The empty-qdisc bypass (5.14's TCQ_F_CAN_BYPASS for TCQ_F_NOLOCK): a qdisc that looks empty
  // and nobody runs, looked at without the flag, then again holding it (TryRun).
  const auto idle_empty = [this] {
    return !aborted_.load() && !running_.load() && LooksEmpty();
  };
  if (enqueue_.Bypass(run, idle_empty) && TryRun(counters_.runs, m, band)) return true;
  bool queued = true;
  Refusal refused = Refusal::kWait;
  while (true) {
    bool was_empty = false;
    if (!aborted_.load() && qdisc_.Enqueue(m, band, &was_empty)) {
      if (was_empty) first_enqueued_.store(Now());
      break;
    }
    refused = enqueue_.Refuse(aborted_.load(), m, counters_);
    if (refused != Refusal::kWait) {
      queued = false;
      break;
    }
    WaitForSpace(band);
    RestampTx(m, Now());  // the frame enters the stack now (EnqueueStep: phase 1)
  }
  // Whether the frame went in or was dropped at a full band, as the kernel's.
  switch (enqueue_.Next(run, refused)) {
    case AfterEnqueue::kWakeRunner:
      if (runner_idle_.load()) WakeRunner();
      break;
    case AfterEnqueue::kRun:
      TryRun(counters_.runs);  // qdisc_run after dev_qdisc_enqueue
      break;
    case AfterEnqueue::kNothing:
      break;
  }
  if (!queued) rte_pktmbuf_free(m);
  return queued;
}

void NolockTxQueue::RunQdisc() {
  if (config_.shape.dedicated) {
    WakeRunner();
  } else if (!qdisc_.empty()) {
    TryRun(counters_.runs);
  }
}

void NolockTxQueue::WaitForSpace(int band) {
  UniqueLock lk(space_mu_);
  waiters_.fetch_add(1);
  while (!aborted_.load() && qdisc_.band_full(band)) space_cv_.wait(lk);
  waiters_.fetch_sub(1);
}

bool NolockTxQueue::TryRun(Counter& runs, rte_mbuf* bypass, int band) {
  if (bypass != nullptr) {
    // A frame to bypass is in no queue yet: with the flag taken, the caller enqueues it (no
    // note: nothing of it is queued), and tries again.
    if (running_.exchange(true)) return false;
  } else {
    // qdisc_run_begin (5.14): somebody runs it, so the note is left — either this thread wins
    // the flag at its second try, or the holder reads the note when it lets the flag go.
    bool found_taken = false;
    const bool won = notes_.RunBegin(running_, &found_taken);
    if (found_taken) counters_.missed.Add();
    if (!won) return false;
  }
  runs.Add();
  // Frames pushed by a producer that lost the flag, and a restart the txirq published, must be
  // seen by this run: order them before its first look at the queue. The flag was just taken by
  // a seq_cst exchange; on x86-64 its locked instruction already orders every earlier store
  // before every later load (the kernel's qdisc_run_begin relies on its spin_trylock's atomic
  // alone, and its smp_mb__after_atomic is a compiler barrier there), so the fence is one only
  // elsewhere, where C++'s model asks for it: a locked instruction less a frame (~5 ns here).
#if defined(__x86_64__)
  std::atomic_signal_fence(std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
  run_.Begin();
  // The bypass's second look, holding the flag (a requeue or an enqueue may have come between;
  // 5.14 retests nolock_qdisc_is_empty under q->seqlock): still empty, the frame is the run's
  // first bulk; else it is enqueued behind what is there (dev_qdisc_enqueue under the seqlock),
  // for this same run — unless its band is full, when it goes the usual way (it may have to
  // wait) after this run.
  bool taken = false;
  const bool in_hand = bypass != nullptr && LooksEmpty();
  if (in_hand) {
    counters_.bypassed.Add();
    run_.Bypass(bypass);
    taken = true;
  } else if (bypass != nullptr) {
    bool was_empty = false;
    taken = qdisc_.Enqueue(bypass, band, &was_empty);
    if (taken && was_empty) first_enqueued_.store(Now());
  }
  // A spent quota (__qdisc_run's set_bit) or a requeue (dev_requeue_skb's) leaves the note.
  if (Run(in_hand) == RunNext::kReschedule) notes_.missed.store(true);
  // qdisc_run_end: a note left by a producer after the run's last look, or by the run itself,
  // reschedules: the txirq runs the qdisc with a fresh quota (__netif_schedule, net_tx_action).
  if (notes_.RunEnd(running_)) Kick(true);
  return taken;
}

RunNext NolockTxQueue::Run(bool in_hand) {
  const auto stopped = [this] { return tx_stopped_.load(std::memory_order_acquire); };
  bool after_bypass = false;
  while (true) {
    Tsc t0, handed;
    if (in_hand) {
      t0 = handed = Now();
    } else {
      // The last look is the dequeue itself (under the policy's budget), not an empty(): a
      // frame landing after it is the MISSED note's to catch.
      if (!run_.Open(stopped, /*resched_pending=*/nullptr)) {
        NoteStopped();  // dequeue_skb's qdisc_maybe_clear_missed
        return RunNext::kEnd;
      }
      // After the bypass 5.14's __dev_xmit_skb runs the qdisc only where it does not look
      // empty (`!nolock_qdisc_is_empty`): no dequeue, and no clock read, for nothing.
      if (after_bypass && LooksEmpty()) return RunNext::kEnd;
      t0 = Now();
      bool wake = false;
      const auto waiters = [this] { return waiters_.load(); };
      uint16_t n = run_.Dequeue(qdisc_, Device(t0), waiters, &wake);
      // pfifo_fast_dequeue (5.14): a producer that left its note before the clear has its
      // frame seen by the second look.
      if (n == 0 && notes_.ClearForAnotherLook())
        n = run_.Dequeue(qdisc_, Device(t0), waiters, &wake);
      if (n == 0) return RunNext::kEnd;
      // Producers enqueue without a lock: a frame stamped after t0 may be in this bulk, so its
      // handover is read after the dequeue (under a root lock t0 comes after every enqueue).
      handed = Now();
      if (wake) {
        LockGuard lk(space_mu_);
        space_cv_.notify_all();
      }
    }
    after_bypass = in_hand;
    in_hand = false;
    const uint16_t accepted = Transmit(run_.batch(), t0, run_.handover(), handed);
    const RunNext next = run_.Settle(qdisc_, accepted, counters_, stopped);
    if (next == RunNext::kDequeue) continue;
    // A requeue into a stopped queue: the run the kernel's requeue schedules finds it stopped
    // and leaves DRAINING (sch_direct_xmit, then dequeue_skb's qdisc_maybe_clear_missed).
    if (next == RunNext::kEnd && stopped()) NoteStopped();
    return next;
  }
}

void NolockTxQueue::Restart(bool resched) {
  // No kPending here: a run in progress is the flag's holder, told through MISSED by TryRun. A
  // reschedule runs even a qdisc that looks empty (net_tx_action's qdisc_run): a producer that
  // found the note already set left its frame to this run.
  // The restart was published (tx_stopped_, a release store) before this: order it before
  // these reads, as a holder's NoteStopped orders its clear before reading tx_stopped_.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const bool nothing = notes_.NothingToRestart(qdisc_.empty(), resched);
  switch (OnRestart(config_.shape.dedicated, /*running=*/false, nothing)) {
    case RestartAction::kWakeRunner:
      WakeRunner();  // netif_wake_queue: the runner goes on
      break;
    case RestartAction::kRun:
      TryRun(counters_.reschedules);
      break;
    case RestartAction::kPending:
    case RestartAction::kNothing:
      break;
  }
}

void NolockTxQueue::Abort() {
  aborted_.store(true);
  LockGuard lk(space_mu_);
  space_cv_.notify_all();
}

void NolockTxQueue::Drain() {
  draining_.store(true);
  WakeRunner();
}

void NolockTxQueue::WakeRunner() {
  LockGuard lk(runner_mu_);
  runner_cv_.notify_one();
}

RunnerTurn NolockTxQueue::Look(Tsc now) const {
  return RunnerLook(policy_, qdisc_.backlog(), tx_stopped_.load(std::memory_order_acquire),
                    draining_.load(), first_enqueued_.load(), now);
}

void NolockTxQueue::RunnerTurnsUntilStopped() {
  RunnerTurns([this](Tsc now) { return Look(now); },
              [this](const RunnerTurn& /*turn*/, Tsc now) {
                // Announce the sleep, then look once more: an enqueue that missed the
                // announcement was seen by this second look (see the note at the top).
                UniqueLock lk(runner_mu_);
                runner_idle_.store(true);
                if (!runner_stop_.load()) {
                  const RunnerTurn again = Look(Now());
                  if (again.why == FlushTrigger::kNone)
                    runner_cv_.wait_for(lk, RunnerSleep(again.wake_by, now));
                }
                runner_idle_.store(false);
              },
              [this] {
                running_.store(true);  // only this thread runs the qdisc with a dedicated runner
                run_.Begin();
                (void)Run();  // a dedicated runner goes on after its quota: no softirq to hand to
                running_.store(false);
                if (!qdisc_.empty()) first_enqueued_.store(Now());  // a new wait
              });
}

bool NolockTxQueue::QdiscIdle() {
  // Backlog, then the flag, then the backlog again: a holder sets the flag before it dequeues
  // and clears it only after transmitting and requeueing, so frames it took are seen either in
  // the backlog or through the flag.
  if (!qdisc_.empty() || running_.load()) return false;
  return qdisc_.empty();
}

}  // namespace txbatch
