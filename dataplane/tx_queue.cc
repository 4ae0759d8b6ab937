#include "dataplane/tx_queue.h"

#include <pthread.h>
#include <rte_lcore.h>
#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>

#include "dataplane/frame.h"

namespace txbatch {

TxQueue::TxQueue(TxDriver& driver, const FlushPolicy& policy, const TxQueueConfig& config,
                 const RunWindow& window)
    : driver_(driver),
      policy_(policy),
      config_(config),
      window_(window),
      // Hysteresis, as a socket's write-space callback: wake blocked producers once a quarter of
      // the band is free, not for every frame dequeued.
      wake_level_(config.txqueuelen - std::max(1u, config.txqueuelen / 4)),
      qdisc_(config.txqueuelen),
      // With --qdisc none every producer takes the TX lock for every batch (HARD_TX_LOCK):
      // inheritance's strict hand-over made that contention collapse (measured), so only the
      // qdisc shapes, where producers rarely take it, keep priority inheritance for the txirq.
      tx_lock_(/*inherit=*/!config.noqueue) {}

TxQueue::~TxQueue() { StopIrq(); }

bool TxQueue::Send(rte_mbuf* m, int band) {
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
  } else if (!running_ && !qdisc_.empty()) {
    // As __dev_xmit_skb: run the qdisc after the enqueue whatever it returned.
    running_ = true;
    counters_.runs.Add();
    Run(root);
  }
  root.unlock();
  if (!queued) rte_pktmbuf_free(m);
  return queued;
}

void TxQueue::Run(std::unique_lock<std::mutex>& root) {
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
    const uint16_t n = qdisc_.DequeueBulk(batch_, policy_.Budget().frames);
    if (n == 0) break;
    if (waiters_ > 0 && qdisc_.backlog() <= wake_level_) space_cv_.notify_all();
    root.unlock();

    uint16_t accepted;
    {
      std::lock_guard tx(tx_lock_);
      accepted = XmitLocked(batch_);
    }
    counters_.batch_hist[n].Add();
    counters_.tx_cycles.Add(Now() - t0);

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

uint16_t TxQueue::XmitLocked(const Batch& batch) {
  const bool was_stopped = driver_.Stopped();
  const uint16_t accepted = driver_.Xmit(batch.frames());
  const bool stopped = driver_.Stopped();
  tx_stopped_.store(stopped, std::memory_order_release);
  // netif_tx_stop_queue: only the completion role can restart it, at its next deadline. Told
  // once, when the queue stops: with --qdisc none producers keep offering to a stopped queue,
  // and a kick per refused batch had them and the SCHED_FIFO txirq ping-pong (~12 us a frame).
  // Kick takes irq_mu_, never tx_lock_, so calling it here keeps the lock order.
  if (stopped && !was_stopped) Kick(false);
  return accepted;
}

uint16_t TxQueue::SendBatch(Batch& batch) {
  const uint16_t n = batch.size();
  if (n == 0) return 0;
  const Tsc t0 = Now();
  uint16_t accepted;
  {
    // Producers share these counters here, so they are written under the TX lock.
    std::lock_guard tx(tx_lock_);
    accepted = XmitLocked(batch);
    counters_.batch_hist[n].Add();
    counters_.dropped_noqueue.Add(n - accepted);
    counters_.tx_cycles.Add(Now() - t0);
  }
  batch.ConsumeFront(accepted);
  return accepted;
}

void TxQueue::Abort() {
  std::lock_guard root(root_lock_);
  aborted_ = true;
  space_cv_.notify_all();
}

void TxQueue::Kick(bool resched) {
  std::lock_guard lk(irq_mu_);
  irq_kicked_ = true;
  irq_resched_ |= resched;
  irq_cv_.notify_one();
}

void TxQueue::StartIrq() {
  irq_stop_ = false;
  irq_ = std::thread([this] { IrqLoop(); });
  if (config_.dedicated) runner_ = std::thread([this] { RunnerLoop(); });
}

void TxQueue::Drain() {
  std::lock_guard root(root_lock_);
  draining_ = true;
  runner_cv_.notify_one();
}

bool TxQueue::RunnerReady(Tsc now) const {
  if (qdisc_.empty() || tx_stopped_.load(std::memory_order_acquire)) return false;
  if (draining_) return true;
  const auto n = static_cast<uint16_t>(std::min<unsigned>(qdisc_.backlog(), UINT16_MAX));
  // count:N takes what is queued; buffer:N[:T] waits for N frames or the drain timer.
  return policy_.FlushNow(n, first_enqueued_, now, /*write_done=*/true);
}

void TxQueue::RunnerLoop() {
  const bool registered = rte_thread_register() == 0;
  if (!config_.irq_cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : config_.irq_cpus) CPU_SET(c, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  std::unique_lock root(root_lock_);
  while (!runner_stop_) {
    const Tsc now = Now();
    if (!RunnerReady(now)) {
      // Sleep until an enqueue, a restarted queue, the drain or the buffer's timer; at most
      // kIrqIdlePoll, so nothing is ever left waiting on a missed signal.
      auto wait = kIrqIdlePoll;
      const Tsc by = qdisc_.empty() ? kNever : policy_.FlushBy(first_enqueued_);
      if (by != kNever && by > now)
        wait = std::min(
            wait,
            std::chrono::microseconds(
                static_cast<int64_t>(static_cast<double>(by - now) * 1e6 / config_.tsc_hz) + 1));
      runner_idle_ = true;
      runner_cv_.wait_for(root, wait);
      runner_idle_ = false;
      continue;
    }
    running_ = true;
    counters_.runs.Add();
    Run(root);
    if (!qdisc_.empty()) first_enqueued_ = Now();  // what is left starts a new wait
  }
  root.unlock();
  if (registered) rte_thread_unregister();
}

void TxQueue::StopIrq() {
  if (runner_.joinable()) {
    {
      std::lock_guard root(root_lock_);
      runner_stop_ = true;
      runner_cv_.notify_one();
    }
    runner_.join();
  }
  if (!irq_.joinable()) return;
  {
    std::lock_guard lk(irq_mu_);
    irq_stop_ = true;
    irq_cv_.notify_one();
  }
  irq_.join();
}

void TxQueue::IrqLoop() {
  // Sleep to the modelled completion, not to the next timer tick plus 50 us of default slack.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  // Any allowed CPU, not the main lcore the creating thread was pinned to by EAL.
  if (!config_.irq_cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : config_.irq_cpus) CPU_SET(c, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
  {
    // A TX-completion interrupt preempts whatever runs; a CFS thread would wait behind the
    // producers for milliseconds and let a 630 us ixgbe ring run dry.
    sched_param sp{};
    sp.sched_priority = 1;
    irq_realtime_ = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
  }
  const bool registered = rte_thread_register() == 0;  // mempool cache for frees
  std::unique_lock lk(irq_mu_);
  while (!irq_stop_) {
    lk.unlock();
    Tsc deadline;
    {
      std::lock_guard tx(tx_lock_);
      deadline = driver_.NextCompletion();
    }
    lk.lock();
    const auto pending = [this] { return irq_kicked_ || irq_resched_ || irq_stop_; };
    if (!pending()) {
      if (deadline == kNever) {
        // An idle ring needs no interrupt; poll at the coalescing bound so frames sent at low
        // rates are still delivered promptly (a stopped ring kicks us at once).
        irq_cv_.wait_for(lk, kIrqIdlePoll, pending);
      } else {
        const Tsc now = Now();
        if (deadline > now) {
          const auto wait = std::chrono::nanoseconds(
              static_cast<int64_t>(static_cast<double>(deadline - now) * 1e9 / config_.tsc_hz));
          irq_cv_.wait_until(lk, std::chrono::steady_clock::now() + wait, pending);
        }
      }
    }
    if (irq_stop_) break;
    if (const Tsc now = Now(); deadline != kNever && now > deadline && window_.Contains(now))
      counters_.irq_max_late_tsc.Max(now - deadline);
    const bool resched = irq_resched_;
    irq_kicked_ = false;
    irq_resched_ = false;
    lk.unlock();

    bool woke;
    {
      std::lock_guard tx(tx_lock_);
      const bool was_stopped = driver_.Stopped();
      driver_.Complete(Now());
      woke = was_stopped && !driver_.Stopped();
      tx_stopped_.store(driver_.Stopped(), std::memory_order_release);
    }
    if ((woke || resched) && config_.dedicated) {
      std::lock_guard root(root_lock_);
      if (runner_idle_) runner_cv_.notify_one();  // netif_wake_queue: the runner goes on
    } else if (woke || resched) {
      std::unique_lock root(root_lock_);
      if (running_) {
        resched_pending_ = true;
      } else if (!qdisc_.empty()) {
        running_ = true;
        counters_.reschedules.Add();
        Run(root);
      }
    }
    lk.lock();
  }
  lk.unlock();
  if (registered) rte_thread_unregister();
}

bool TxQueue::Idle() {
  {
    std::lock_guard root(root_lock_);
    if (running_ || !qdisc_.empty()) return false;
  }
  std::lock_guard tx(tx_lock_);
  return driver_.InFlight() == 0;
}

unsigned TxQueue::backlog() {
  std::lock_guard root(root_lock_);
  return qdisc_.backlog();
}

unsigned TxQueue::Purge() {
  std::lock_guard root(root_lock_);
  return qdisc_.Purge();
}

}  // namespace txbatch
