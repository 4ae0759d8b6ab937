#include "dataplane/rootlock_queue.h"

#include <rte_lcore.h>

#include "dataplane/frame.h"
#include "dataplane/gso.h"

namespace txbatch {

RootlockTxQueue::RootlockTxQueue(TxDriver& driver, const FlushPolicy& policy,
                                 const TxQueueConfig& config, const RunWindow& window)
    : TxQueue(driver, policy, config, window),
      qdisc_(MakeQdisc(config, counters_.qdisc)),
      enqueue_(config),
      run_(policy, config.shape.dedicated, WakeLevel(config.txqueuelen), MaxBulk(config)) {}

RootlockTxQueue::~RootlockTxQueue() { StopIrq(); }

bool RootlockTxQueue::Send(rte_mbuf* m, int band, bool run) {
  UniqueLock root(root_lock_);
  bool queued = true;
  bool waited = false;
  Refusal refused = Refusal::kWait;
  while (aborted_ || qdisc_->band_full(band)) {
    refused = enqueue_.Refuse(aborted_, m, counters_);
    if (refused != Refusal::kWait) {
      queued = false;
      break;
    }
    ++waiters_;
    space_cv_.wait(root);
    --waiters_;
    waited = true;
  }
  if (queued) {
    if (waited) RestampTx(m, Now());
    if (enqueue_.Bypass(run, [this]() NO_THREAD_SAFETY_ANALYSIS {  // under root
          return !running_ && qdisc_->empty();
        })) {
      // The frame is the run's first bulk.
      running_ = true;
      counters_.runs.Add();
      counters_.bypassed.Add();
      run_.Begin();
      run_.Bypass(m);
      Run(/*in_hand=*/true);
      return true;
    }
    if (qdisc_->empty()) first_enqueued_ = Now();
    // Cannot fail: the band has room (fq_codel makes room, and reads the clock: CoDel's stamp).
    (void)qdisc_->Enqueue(m, band, config_.shape.fq_codel ? Now() : 0);
  }
  // Whether the frame went in or was dropped at a full band, as the kernel's.
  switch (enqueue_.Next(run, refused)) {
    case AfterEnqueue::kWakeRunner:
      if (runner_idle_) runner_cv_.notify_one();
      break;
    case AfterEnqueue::kRun:
      RunIfIdle(counters_.runs);
      break;
    case AfterEnqueue::kNothing:
      break;
  }
  root.unlock();
  if (!queued) rte_pktmbuf_free(m);
  return queued;
}

void RootlockTxQueue::Run(bool in_hand) {
  if (!in_hand) run_.Begin();
  const auto stopped = [this] { return tx_stopped_.load(std::memory_order_acquire); };
  while (true) {
    Tsc t0;
    if (in_hand) {
      t0 = Now();
    } else {
      // An empty qdisc ends the run before the clock is read (every run ends so).
      if (!run_.Open(stopped, &resched_pending_) || qdisc_->empty()) break;
      t0 = Now();
      bool wake = false;
      const uint16_t n = run_.Dequeue(
          *qdisc_, Device(t0), [this]() NO_THREAD_SAFETY_ANALYSIS { return waiters_; }, &wake);
      if (n == 0) break;
      if (wake) space_cv_.notify_all();
    }
    in_hand = false;
    uint16_t accepted;
    {
      const Unlocked<Mutex> driver_call(root_lock_);  // sch_direct_xmit: let go around the call
      accepted = Transmit(run_.batch(), t0, run_.handover());
    }
    const RunNext next = run_.Settle(*qdisc_, accepted, counters_, [this] {
      return tx_stopped_.load(std::memory_order_acquire);
    });
    if (next == RunNext::kDequeue) continue;
    if (next == RunNext::kReschedule) Kick(true);  // __netif_schedule
    break;
  }
  resched_pending_ = false;
  running_ = false;
}

void RootlockTxQueue::RunIfIdle(Counter& runs) {
  if (running_ || qdisc_->empty()) return;
  running_ = true;
  runs.Add();
  Run();
}

void RootlockTxQueue::RunQdisc() {
  LockGuard root(root_lock_);
  if (config_.shape.dedicated) {
    if (runner_idle_) runner_cv_.notify_one();
  } else {
    RunIfIdle(counters_.runs);
  }
}

void RootlockTxQueue::Restart(bool /*resched*/) {
  LockGuard root(root_lock_);
  switch (OnRestart(config_.shape.dedicated, running_, qdisc_->empty())) {
    case RestartAction::kWakeRunner:
      if (runner_idle_) runner_cv_.notify_one();  // netif_wake_queue: the runner goes on
      break;
    case RestartAction::kPending:
      resched_pending_ = true;
      break;
    case RestartAction::kRun:
      RunIfIdle(counters_.reschedules);
      break;
    case RestartAction::kNothing:
      break;
  }
}

void RootlockTxQueue::Abort() {
  LockGuard root(root_lock_);
  aborted_ = true;
  space_cv_.notify_all();
}

void RootlockTxQueue::Drain() {
  LockGuard root(root_lock_);
  draining_ = true;
  runner_cv_.notify_one();
}

void RootlockTxQueue::WakeRunner() {
  LockGuard root(root_lock_);
  runner_cv_.notify_one();
}

RunnerTurn RootlockTxQueue::Look(Tsc now) const {
  return RunnerLook(policy_, qdisc_->backlog(), tx_stopped_.load(std::memory_order_acquire),
                    draining_, first_enqueued_, now);
}

void RootlockTxQueue::RunnerTurnsUntilStopped() {
  UniqueLock root(root_lock_);
  // Each part under root (exempt: see root_lock_).
  RunnerTurns([this](Tsc now) NO_THREAD_SAFETY_ANALYSIS { return Look(now); },
              [&](const RunnerTurn& turn, Tsc now) NO_THREAD_SAFETY_ANALYSIS {
                // Until an enqueue, a restarted queue, the drain or the buffer's timer.
                runner_idle_ = true;
                runner_cv_.wait_for(root, RunnerSleep(turn.wake_by, now));
                runner_idle_ = false;
              },
              [&]() NO_THREAD_SAFETY_ANALYSIS {
                running_ = true;
                Run();
                if (!qdisc_->empty()) first_enqueued_ = Now();  // what is left starts a new wait
              });
}

bool RootlockTxQueue::QdiscIdle() {
  LockGuard root(root_lock_);
  return !running_ && qdisc_->empty();
}

unsigned RootlockTxQueue::backlog() {
  LockGuard root(root_lock_);
  return qdisc_->backlog();
}

unsigned RootlockTxQueue::Purge() {
  LockGuard root(root_lock_);
  return qdisc_->Purge();
}

}  // namespace txbatch
