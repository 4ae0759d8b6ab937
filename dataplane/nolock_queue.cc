#include "dataplane/nolock_queue.h"

#include <rte_lcore.h>

#include <algorithm>

#include "dataplane/frame.h"

namespace txbatch {

// Every flag below is sequentially consistent: the run flag and MISSED, and a waiter's count
// and the backlog, are each a store-then-load pair on two threads (Dekker), which only a single
// total order keeps from both missing the other.

NolockTxQueue::NolockTxQueue(TxDriver& driver, const FlushPolicy& policy,
                             const TxQueueConfig& config, const RunWindow& window)
    : TxQueue(driver, policy, config, window), qdisc_(config.txqueuelen) {}

NolockTxQueue::~NolockTxQueue() { StopIrq(); }

bool NolockTxQueue::Send(rte_mbuf* m, int band, bool run) {
  while (true) {
    if (aborted_.load()) {
      counters_.dropped_aborted.Add();
      rte_pktmbuf_free(m);
      return false;
    }
    bool was_empty = false;
    if (qdisc_.Enqueue(m, band, &was_empty)) {
      if (was_empty) first_enqueued_.store(Now());
      break;
    }
    if (!config_.block_when_full) {
      counters_.dropped_qdisc_full.Add();
      rte_pktmbuf_free(m);
      return false;
    }
    counters_.waits.Add();
    WaitForSpace(band);
    // The frame enters the stack now: time spent blocked is back-pressure, not latency.
    RestampTx(m, Now());
  }
  if (config_.dedicated) {
    if (runner_idle_.load()) WakeRunner();  // producers only enqueue; the runner sends
  } else if (run) {
    TryRun(counters_.runs);  // as __dev_xmit_skb: run the qdisc after the enqueue
  }
  return true;
}

void NolockTxQueue::RunQdisc() {
  if (config_.dedicated) {
    WakeRunner();
  } else if (!qdisc_.empty()) {
    TryRun(counters_.runs);
  }
}

void NolockTxQueue::WaitForSpace(int band) {
  std::unique_lock lk(space_mu_);
  waiters_.fetch_add(1);
  space_cv_.wait(lk, [&] { return aborted_.load() || !qdisc_.band_full(band); });
  waiters_.fetch_sub(1);
}

void NolockTxQueue::TryRun(Counter& runs) {
  int quota = kDevTxWeight;
  bool counted = false;
  while (true) {
    if (running_.exchange(true)) {
      // Somebody runs it: leave the note. If the holder left before seeing it, try again.
      counters_.missed.Add();
      missed_.store(true);
      if (running_.load()) return;
      continue;
    }
    missed_.store(false);
    // Frames pushed by a producer that lost the flag, and a restart the txirq published, must be
    // seen by this run: order them before its first look at the queue (C++'s model, not only
    // x86's, guarantees it with the fence).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!counted) runs.Add();
    counted = true;
    quota = Run(quota);
    running_.store(false);
    if (quota <= 0) {
      // __netif_schedule: the softirq role continues with a fresh quota.
      if (!qdisc_.empty()) Kick(true);
      return;
    }
    // Frames enqueued by producers that found the flag taken: this run takes them, within
    // what is left of its quota.
    if (!missed_.load()) return;
  }
}

int NolockTxQueue::Run(int quota) {
  while (quota > 0 && !tx_stopped_.load(std::memory_order_acquire)) {
    batch_.Clear();
    const Tsc t0 = Now();
    const DequeueBudget budget = Plan(quota, qdisc_.requeued());
    const uint16_t n = qdisc_.DequeueBulk(batch_, budget);
    if (n == 0) break;
    if (waiters_.load() > 0 && qdisc_.backlog() <= wake_level_) {
      std::lock_guard lk(space_mu_);
      space_cv_.notify_all();
    }
    const uint16_t accepted = Transmit(batch_, t0, budget.handover);
    if (accepted < n) {
      qdisc_.Requeue(batch_.frames().subspan(accepted));
      counters_.requeues.Add();
      counters_.requeued_frames.Add(n - accepted);
    }
    quota -= n;
  }
  return quota;
}

void NolockTxQueue::Restart(bool /*resched*/) {
  if (config_.dedicated) {
    WakeRunner();  // netif_wake_queue: the runner goes on
  } else if (!qdisc_.empty()) {
    TryRun(counters_.reschedules);
  }
}

void NolockTxQueue::Abort() {
  aborted_.store(true);
  std::lock_guard lk(space_mu_);
  space_cv_.notify_all();
}

void NolockTxQueue::Drain() {
  draining_.store(true);
  WakeRunner();
}

void NolockTxQueue::WakeRunner() {
  std::lock_guard lk(runner_mu_);
  runner_cv_.notify_one();
}

FlushTrigger NolockTxQueue::RunnerReady(Tsc now) const {
  const unsigned backlog = qdisc_.backlog();
  if (backlog == 0 || tx_stopped_.load(std::memory_order_acquire)) return FlushTrigger::kNone;
  if (draining_.load()) return FlushTrigger::kEnd;
  const auto n = static_cast<uint16_t>(std::min<unsigned>(backlog, UINT16_MAX));
  return policy_.Trigger(n, first_enqueued_.load(), now, /*write_done=*/true);
}

void NolockTxQueue::RunnerLoop() {
  const bool registered = EnterServiceThread();
  while (!runner_stop_.load()) {
    const Tsc now = Now();
    const FlushTrigger why = RunnerReady(now);
    if (why == FlushTrigger::kNone) {
      // Announce the sleep, then look once more: an enqueue that missed the announcement was
      // seen by this second look (see the note at the top).
      std::unique_lock lk(runner_mu_);
      runner_idle_.store(true);
      if (!runner_stop_.load() && RunnerReady(Now()) == FlushTrigger::kNone) {
        const Tsc by = qdisc_.empty() ? kNever : policy_.FlushBy(first_enqueued_.load());
        runner_cv_.wait_for(lk, RunnerSleep(by, now));
      }
      runner_idle_.store(false);
      continue;
    }
    running_.store(true);  // only this thread runs the qdisc with a dedicated runner
    counters_.runs.Add();
    counters_.flush_triggers[static_cast<size_t>(why)].Add();
    Run(kDevTxWeight);
    running_.store(false);
    if (!qdisc_.empty()) first_enqueued_.store(Now());  // what is left starts a new wait
  }
  if (registered) rte_thread_unregister();
}

bool NolockTxQueue::QdiscIdle() {
  // Backlog, then the flag, then the backlog again: a holder sets the flag before it dequeues
  // and clears it only after transmitting and requeueing, so frames it took are seen either in
  // the backlog or through the flag.
  if (!qdisc_.empty() || running_.load()) return false;
  return qdisc_.empty();
}

}  // namespace txbatch
