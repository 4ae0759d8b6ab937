#include "dataplane/tx_queue.h"

#include <fmt/format.h>
#include <pthread.h>
#include <rte_lcore.h>
#include <sched.h>
#include <sys/prctl.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "dataplane/gso.h"
#include "dataplane/handover_step.h"
#include "dataplane/qdisc_run.h"
#include "dataplane/tx_meta.h"

namespace txbatch {

TxQueue::TxQueue(TxDriver& driver, const FlushPolicy& policy, const TxQueueConfig& config,
                 const RunWindow& window)
    : driver_(driver),
      policy_(policy),
      config_(config),
      window_(window),
      tx_lock_(/*inherit=*/config.tx_lock_inherits),
      dev_(driver, policy, config.bql, config.tsc_hz, counters_),
      has_bql_(dev_.has_bql()),
      meta_offset_(config.track_stages ? TxMetaOffset() : -1) {
  if (config.time_handover && meta_offset_ >= 0)
    handover_latency_ = std::make_unique<LatencyHistogram>();
  LockGuard tx(tx_lock_);  // nothing runs yet: uncontended
  PublishLocked();
}

LatencyHistogram TxQueue::TakeHandoverLatency() {
  LatencyHistogram taken;
  if (handover_latency_) {
    LockGuard lk(handover_mu_);
    std::swap(taken, *handover_latency_);
  }
  return taken;
}

// Derived classes stop the threads in their own destructors, while their members still exist.
TxQueue::~TxQueue() = default;

void TxQueue::MarkHandover(const Batch& batch, Tsc now) {
  if (meta_offset_ < 0) return;
  const auto frames = batch.frames();
  txbatch::MarkHandover(frames, now, meta_offset_);
  if (handover_latency_) {
    // Frames received in one burst share their stamp: one record per run of equal stamps.
    LockGuard lk(handover_mu_);
    for (size_t i = 0; i < frames.size();) {
      const Tsc stamp = MetaOf(frames[i], meta_offset_)->stamp;
      size_t j = i + 1;
      while (j < frames.size() && MetaOf(frames[j], meta_offset_)->stamp == stamp) ++j;
      handover_latency_->Record(
          static_cast<double>(now > stamp ? now - stamp : 0) * 1e9 / config_.tsc_hz, j - i);
      i = j;
    }
  }
}

DequeueContext TxQueue::Device(Tsc now) const {
  DequeueContext ctx;
  ctx.has_bql = has_bql_;
  ctx.bql_avail = bql_avail_.load(std::memory_order_acquire);
  ctx.free_slots = free_slots_.load(std::memory_order_acquire);
  ctx.now = now;
  return ctx;
}

uint16_t TxQueue::Transmit(Batch& batch, Tsc t0, Handover handover, Tsc handed) {
  if (config_.segment_gso) SegmentBatch(batch);
  MarkHandover(batch, handed != 0 ? handed : t0);
  XmitResult x;
  Tsc end;
  {
    UniqueLock tx(tx_lock_);
    x = XmitLocked(batch, handover, /*from_qdisc=*/true, t0);
    end = Now();
    HandOn(tx);
  }
  HandoverStep::Count(batch.frames(), x, /*from_qdisc=*/true, counters_);
  counters_.tx_cycles.Add(end - t0);
  return x.accepted;
}

void TxQueue::HandOn(UniqueLock<PiMutex>& tx) {
  if (DeferredReceiver* const r = config_.receiver; r != nullptr && r->HasStaged())
    r->Flush([&tx]() NO_THREAD_SAFETY_ANALYSIS { tx.unlock(); }, counters_.rx_cycles,
             counters_.rx_frames);
  if (tx.owns_lock()) tx.unlock();
}

XmitResult TxQueue::XmitLocked(const Batch& batch, Handover handover, bool from_qdisc, Tsc now) {
  const XmitResult x = dev_.Xmit(batch.frames(), handover, from_qdisc, now);
  PublishLocked();
  // netif_tx_stop_queue: only the completion role can restart it, at its next deadline. Told
  // once, when the queue stops: with --qdisc none producers keep offering to a stopped queue,
  // and a kick per refused batch had them and the SCHED_FIFO txirq ping-pong (~12 us a frame).
  // Kick takes irq_mu_, never tx_lock_, so calling it here keeps the lock order.
  if (x.stopped_now) Kick(false);
  return x;
}

void TxQueue::PublishLocked() {
  tx_stopped_.store(dev_.Stopped(), std::memory_order_release);
  if (dev_.has_bql()) bql_avail_.store(dev_.bql_avail(), std::memory_order_release);
  free_slots_.store(driver_.FreeSlots(), std::memory_order_release);
}

std::optional<uint32_t> TxQueue::bql_limit() {
  LockGuard tx(tx_lock_);
  return dev_.bql_limit();
}

void TxQueue::Completion(Tsc now, bool resched) {
  bool woke;
  {
    UniqueLock tx(tx_lock_);
    const Tsc t0 = Now();
    unsigned reclaimed = 0;
    woke = dev_.Complete(now, &reclaimed);
    if (reclaimed > 0) {
      counters_.completions.Add();
      counters_.completion_frames.Add(reclaimed);
      counters_.completion_cycles.Add(Now() - t0);
    }
    PublishLocked();
    HandOn(tx);
  }
  if (woke || resched) Restart(resched);
}

uint16_t TxQueue::SendBatch(Batch& batch) {
  if (batch.empty()) return 0;
  const Tsc t0 = Now();
  if (config_.segment_gso) SegmentBatch(batch);
  MarkHandover(batch, t0);
  uint16_t accepted;
  {
    // Producers share these counters here, so they are written under the TX lock.
    UniqueLock tx(tx_lock_);
    const XmitResult x = XmitLocked(batch, Handover::kBurst, /*from_qdisc=*/false, t0);
    accepted = x.accepted;
    HandoverStep::Count(batch.frames(), x, /*from_qdisc=*/false, counters_);
    counters_.tx_cycles.Add(Now() - t0);
    HandOn(tx);
  }
  batch.ConsumeFront(accepted);
  return accepted;
}

void TxQueue::Kick(bool resched) {
  LockGuard lk(irq_mu_);
  irq_kicked_ = true;
  irq_resched_ |= resched;
  irq_cv_.notify_one();
}

std::chrono::microseconds TxQueue::RunnerSleep(Tsc flush_by, Tsc now) const {
  if (flush_by == kNever || flush_by <= now) return kIrqIdlePoll;
  const auto until = std::chrono::microseconds(
      static_cast<int64_t>(static_cast<double>(flush_by - now) * 1e6 / config_.tsc_hz) + 1);
  return std::min(kIrqIdlePoll, until);
}

bool TxQueue::EnterServiceThread(std::string_view role) const {
  // Named for top -H, perf and ps -L: txb-txirq0, txb-runner0.
  const std::string name = fmt::format("txb-{}{}", role, config_.index).substr(0, 15);
  pthread_setname_np(pthread_self(), name.c_str());
  // Sleep to the deadline asked for, not to the next timer tick plus 50 us of default slack.
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  // Any allowed CPU, not the main lcore the creating thread was pinned to by EAL.
  if (!config_.irq_cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c : config_.irq_cpus) CPU_SET(c, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
  return rte_thread_register() == 0;  // mempool cache for frees
}

void TxQueue::RunnerLoop() {
  const bool registered = EnterServiceThread("runner");
  RunnerTurnsUntilStopped();
  if (registered) rte_thread_unregister();
}

void TxQueue::StartIrq() {
  {
    LockGuard lk(irq_mu_);
    irq_stop_ = false;
  }
  runner_stop_ = false;
  irq_ = std::thread([this] { IrqLoop(); });
  if (config_.shape.dedicated) runner_ = std::thread([this] { RunnerLoop(); });
}

void TxQueue::StopIrq() {
  if (runner_.joinable()) {
    runner_stop_.store(true);
    WakeRunner();
    runner_.join();
  }
  if (!irq_.joinable()) return;
  {
    LockGuard lk(irq_mu_);
    irq_stop_ = true;
    irq_cv_.notify_one();
  }
  irq_.join();
}

void TxQueue::IrqLoop() {
  const bool registered = EnterServiceThread("txirq");
  // BQL learns its limit from completions (dql_completed), which the idle poll reports where
  // the driver completes inside its call: keep it polling then.
  const bool idle_polling = [this] {
    LockGuard tx(tx_lock_);
    return driver_.IdlePolling() || has_bql_;
  }();
  {
    // A TX-completion interrupt preempts whatever runs; a CFS thread would wait behind the
    // producers for milliseconds and let a 630 us ixgbe ring run dry.
    sched_param sp{};
    sp.sched_priority = 1;
    irq_realtime_ = pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0;
  }
  UniqueLock lk(irq_mu_);
  while (!irq_stop_) {
    lk.unlock();
    Tsc deadline;
    {
      LockGuard tx(tx_lock_);
      deadline = driver_.NextCompletion();
    }
    lk.lock();
    const auto pending = [this]() REQUIRES(irq_mu_) { return irq_kicked_ || irq_resched_ || irq_stop_; };
    if (!pending()) {
      if (deadline == kNever && !idle_polling) {
        irq_cv_.wait(lk, pending);  // nothing to complete until the queue stops (a kick)
      } else if (deadline == kNever) {
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

    Completion(Now(), resched);
    lk.lock();
  }
  lk.unlock();
  if (registered) rte_thread_unregister();
}

std::vector<std::thread::native_handle_type> TxQueue::service_threads() {
  std::vector<std::thread::native_handle_type> out;
  for (std::thread* t : {&irq_, &runner_})
    if (t->joinable()) out.push_back(t->native_handle());
  return out;
}

DriverCounts TxQueue::DriverCountsNow() {
  LockGuard tx(tx_lock_);
  DriverCounts c{};
  ReadInto(c, driver_.counters());
  return c;
}

std::optional<std::string> TxQueue::StoppedBecause() {
  LockGuard tx(tx_lock_);
  if (!driver_.Stopped()) return std::nullopt;
  return driver_.StopCause();
}

bool TxQueue::Idle() {
  if (!QdiscIdle()) return false;
  {
    LockGuard tx(tx_lock_);
    if (driver_.InFlight() != 0) return false;
  }
  // Outside the TX lock: the receiver's lock is waited for if a hand-off is under way.
  return config_.receiver == nullptr || config_.receiver->Idle();
}

}  // namespace txbatch
