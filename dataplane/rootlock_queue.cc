#include "dataplane/rootlock_queue.h"

#include <rte_lcore.h>

#include <algorithm>

#include "dataplane/frame.h"

namespace txbatch {

RootlockTxQueue::RootlockTxQueue(TxDriver& driver, const FlushPolicy& policy,
                                 const TxQueueConfig& config, const RunWindow& window)
    : TxQueue(driver, policy, config, window),
      qdisc_(config.txqueuelen, config.pfifo ? 1 : kPfifoBands) {}

RootlockTxQueue::~RootlockTxQueue() { StopIrq(); }

bool RootlockTxQueue::Send(rte_mbuf* m, int band, bool run) {
  std::unique_lock root(root_lock_);
  bool queued = true;
  bool waited = false;
  while (aborted_ || qdisc_.band_full(band)) {
    if (aborted_) {
      counters_.dropped_aborted.Add();
      queued = false;
      break;
    }
    if (!config_.block_when_full) {
      counters_.dropped_qdisc_full.Add();
      queued = false;
      break;
    }
    counters_.waits.Add();
    ++waiters_;
    space_cv_.wait(root);
    --waiters_;
    waited = true;
  }
  if (queued) {
    // The frame enters the stack now, as an skb built after sk_stream_wait_memory would: time
    // a producer spent blocked is back-pressure, not latency.
    if (waited) RestampTx(m, Now());
    if (qdisc_.empty()) first_enqueued_ = Now();
    (void)qdisc_.Enqueue(m, band);  // cannot fail: the band has room
  }
  if (config_.dedicated) {
    // Producers only enqueue; the runner thread sends.
    if (runner_idle_) runner_cv_.notify_one();
  } else if (run && !running_ && !qdisc_.empty()) {
    // As __dev_xmit_skb: run the qdisc after the enqueue whatever it returned.
    running_ = true;
    counters_.runs.Add();
    Run(root);
  }
  root.unlock();
  if (!queued) rte_pktmbuf_free(m);
  return queued;
}

void RootlockTxQueue::Run(std::unique_lock<std::mutex>& root) {
  int quota = kDevTxWeight;
  while (true) {
    if (tx_stopped_.load(std::memory_order_acquire)) {
      // The txirq restarts the queue; if it already did while we held the lock, go on.
      if (!resched_pending_) break;
      resched_pending_ = false;
      continue;
    }
    batch_.Clear();
    const Tsc t0 = Now();
    const DequeueBudget budget = Plan(quota, qdisc_.requeued());
    const uint16_t n = qdisc_.DequeueBulk(batch_, budget);
    if (n == 0) break;
    if (waiters_ > 0 && qdisc_.backlog() <= wake_level_) space_cv_.notify_all();
    root.unlock();
    const uint16_t accepted = Transmit(batch_, t0, budget.handover);
    root.lock();
    if (accepted < n) {
      qdisc_.Requeue(batch_.frames().subspan(accepted));
      counters_.requeues.Add();
      counters_.requeued_frames.Add(n - accepted);
    }
    quota -= n;
    if (quota <= 0) {
      // __netif_schedule: the softirq role continues (a dedicated runner just goes on).
      if (!config_.dedicated && !qdisc_.empty()) Kick(true);
      break;
    }
  }
  resched_pending_ = false;
  running_ = false;
}

void RootlockTxQueue::RunQdisc() {
  std::unique_lock root(root_lock_);
  if (config_.dedicated) {
    if (runner_idle_) runner_cv_.notify_one();
  } else if (!running_ && !qdisc_.empty()) {
    running_ = true;
    counters_.runs.Add();
    Run(root);
  }
}

void RootlockTxQueue::Restart(bool /*resched*/) {
  std::unique_lock root(root_lock_);
  if (config_.dedicated) {
    if (runner_idle_) runner_cv_.notify_one();  // netif_wake_queue: the runner goes on
  } else if (running_) {
    resched_pending_ = true;
  } else if (!qdisc_.empty()) {
    running_ = true;
    counters_.reschedules.Add();
    Run(root);
  }
}

void RootlockTxQueue::Abort() {
  std::lock_guard root(root_lock_);
  aborted_ = true;
  space_cv_.notify_all();
}

void RootlockTxQueue::Drain() {
  std::lock_guard root(root_lock_);
  draining_ = true;
  runner_cv_.notify_one();
}

void RootlockTxQueue::WakeRunner() {
  std::lock_guard root(root_lock_);
  runner_cv_.notify_one();
}

FlushTrigger RootlockTxQueue::RunnerReady(Tsc now) const {
  if (qdisc_.empty() || tx_stopped_.load(std::memory_order_acquire)) return FlushTrigger::kNone;
  if (draining_) return FlushTrigger::kEnd;
  const auto n = static_cast<uint16_t>(std::min<unsigned>(qdisc_.backlog(), UINT16_MAX));
  // count:N takes what is queued; buffer:N[:T] waits for N frames or the drain timer.
  return policy_.Trigger(n, first_enqueued_, now, /*write_done=*/true);
}

void RootlockTxQueue::RunnerLoop() {
  const bool registered = EnterServiceThread();
  std::unique_lock root(root_lock_);
  while (!runner_stop_.load()) {
    const Tsc now = Now();
    const FlushTrigger why = RunnerReady(now);
    if (why == FlushTrigger::kNone) {
      // Sleep until an enqueue, a restarted queue, the drain or the buffer's timer; at most
      // kIrqIdlePoll, so nothing is ever left waiting on a missed signal.
      const Tsc by = qdisc_.empty() ? kNever : policy_.FlushBy(first_enqueued_);
      runner_idle_ = true;
      runner_cv_.wait_for(root, RunnerSleep(by, now));
      runner_idle_ = false;
      continue;
    }
    running_ = true;
    counters_.runs.Add();
    counters_.flush_triggers[static_cast<size_t>(why)].Add();
    Run(root);
    if (!qdisc_.empty()) first_enqueued_ = Now();  // what is left starts a new wait
  }
  root.unlock();
  if (registered) rte_thread_unregister();
}

bool RootlockTxQueue::QdiscIdle() {
  std::lock_guard root(root_lock_);
  return !running_ && qdisc_.empty();
}

unsigned RootlockTxQueue::backlog() {
  std::lock_guard root(root_lock_);
  return qdisc_.backlog();
}

unsigned RootlockTxQueue::Purge() {
  std::lock_guard root(root_lock_);
  return qdisc_.Purge();
}

}  // namespace txbatch
