#include "engine/sim_queue.h"

#include <algorithm>
#include <chrono>

#include "dataplane/frame.h"
#include "dataplane/gso.h"
#include "dataplane/handover_step.h"
#include "dataplane/tsq.h"
#include "dataplane/tx_meta.h"

namespace txbatch {

SimCycles::SimCycles(const CostModel& c)
    : write(Round(c.write)),
      frame(Round(c.frame)),
      lock(Round(c.lock)),
      lock_contended(Round(c.lock_contended)),
      enqueue(Round(c.enqueue)),
      dequeue(Round(c.dequeue)),
      dequeue_frame(Round(c.dequeue_frame)),
      run_xmit(Round(c.run_xmit)),
      bypass(Round(c.bypass)),
      xmit_call(Round(c.xmit_call)),
      xmit_frame(Round(c.xmit_frame)),
      completion(Round(c.completion)),
      completion_frame(Round(c.completion_frame)),
      deliver(Round(c.deliver)),
      gso_segment(Round(c.gso_segment)),
      futex(Round(c.futex)),
      context_switch(Round(c.context_switch)),
      wakeup(Round(c.wakeup)),
      remote_wake(Round(c.remote_wake)),
      halt_after(Round(c.halt_after)),
      remote_wake_halted(Round(c.remote_wake_halted)),
      wakeup_halted(Round(c.wakeup_halted)),
      timer_arm(Round(c.timer_arm)),
      timer_wake(Round(c.timer_wake)),
      timer_irq(Round(c.timer_irq)),
      tick(Round(c.tick)),
      tick_interval(Round(c.tick_interval)),
      pi_unlock(Round(c.pi_unlock)),
      pi_handover(Round(c.pi_handover)),
      slice(Round(c.slice)),
      handover(Round(c.handover)),
      handover_bulk(Round(c.handover_bulk)),
      recycle(Round(c.recycle)),
      deliver_remote(Round(c.deliver_remote)) {}

SimPoolCpus::SimPoolCpus(bool on) : on_(on) {
  if (!on_) return;
  // Two bytes in the mbuf (its dynamic fields, as TxMeta): the frame's own, so that which mbuf
  // comes back from the pool never matters.
  static const int offset =
      RegisterDynfield("txbatch_sim_written_on", sizeof(int16_t), alignof(int16_t));
  offset_ = offset;
}

void SimPoolCpus::Built(rte_mbuf* m) {
  if (!on_ || offset_ < 0) return;
  for (rte_mbuf* seg = m; seg != nullptr; seg = seg->next)
    *RTE_MBUF_DYNFIELD(seg, offset_, int16_t*) = static_cast<int16_t>(cpu_);
}

void SimPoolCpus::Written(rte_mbuf* m) {
  if (!on_ || offset_ < 0) return;
  int16_t* const on = RTE_MBUF_DYNFIELD(m, offset_, int16_t*);
  if (*on != cpu_) *on = kSeveral;
}

void SimPoolCpus::Freed(const rte_mbuf* m) {
  if (!on_ || cpu_ < 0) return;
  // Every segment by its frame's head, which Built and Written keep (a link's copy of a chain
  // carries the fields in its first mbuf only).
  int on = cpu_;
  if (offset_ >= 0) {
    on = *RTE_MBUF_DYNFIELD(m, offset_, const int16_t*) == cpu_ ? cpu_ : kSeveral;
  }
  for (const rte_mbuf* seg = m; seg != nullptr; seg = seg->next) freed_on_.push_back(on);
}

unsigned SimPoolCpus::Reused(unsigned n, int cpu) {
  unsigned moved = 0;
  for (; n > 0 && !freed_on_.empty(); --n) {
    if (freed_on_.back() != cpu) ++moved;
    freed_on_.pop_back();
  }
  return moved;
}

void SimDelivery::Receive(std::span<rte_mbuf* const> frames, std::span<const Tsc> arrival) {
  const int cpu = pool_.cpu();
  for (const rte_mbuf* m : frames) {
    // Where a frame came from, read before the sink frees it (FlowOf reads the txbatch header
    // past the lengths the builder set, which a link's corruption does not reach).
    if (count_remote_ && cpu >= 0) {
      const unsigned flow = FlowOf(m);
      if (flow < flow_cpus_.size() && flow_cpus_[flow] != cpu) ++remote_;
    }
    pool_.Freed(m);
  }
  sink_.Receive(frames, arrival);
}

bool SimCpu::Acquire(SimActor& a, SimLock& l) const {
  // The holder's futex call as it let go at free_at (already stepped): it ends its last step
  // later; its next step follows where it went straight on, else (asleep on a timer) keeps its
  // time unless the call runs past it.
  const auto holder_calls = [&](Tsc call) {
    SimActor& h = *l.holder;
    Charge(h, l.free_at, call);
    if (h.t != kNever && !h.queued) Lengthen(h, h.ran_to, call);
  };
  // The release at free_at (already stepped) wakes `a`: its holder's futex call after it, then
  // the wake-up's latency.
  const auto woken_by_holder = [&] {
    // Its step (this one) ends with its futex call at a.t, before the release: its CPU may have
    // halted by then.
    const bool remote = Remote(*l.holder, a);
    const bool halted = remote && Halted(a, l.free_at, /*to_stepping=*/true);
    const Tsc call = WakeCall(remote, halted);
    holder_calls(call);
    a.t = l.free_at + call + WakeLatency(remote, halted);
    a.lock_wait = true;
    return false;
  };
  // Taken at a.t, after `cost`: by default its line, from the last holder's core when that was
  // another.
  const auto take = [&](std::optional<Tsc> cost = std::nullopt) {
    if (l.holding != nullptr || a.t < l.free_at) ++l.overlaps;
    l.holding = &a;
    Work(a, cost.value_or((l.holder != nullptr && Remote(*l.holder, a) ? c.lock_contended : 0) +
                          c.lock));
    return true;
  };
  if (l.woken == &a) {  // woken by a release
    if (l.free_at <= a.t) {
      l.woken = nullptr;
      l.handed = false;
      return take();
    }
    l.handed = l.handoff;  // taken meanwhile: asleep again, woken as that holder lets go
    return woken_by_holder();
  }
  // Held: a.t before its last release already stepped (when that hold began does not matter:
  // a take later in a step than its start, after a spin or a futex call, may begin after a.t,
  // and a.t's hold would run into it), or kept for the thread a release woke: handed to it, or
  // (a plain mutex) that thread is due first (its wake-up at or before a.t: ties in time
  // would otherwise always go to the lower actor number).
  const auto held = [&] {
    return l.free_at > a.t || (l.woken != nullptr && (l.handed || l.woken->t <= a.t));
  };
  if (!held()) return take();
  // A priority-inheriting lock held by a thread running on another CPU: the kernel's waiter
  // spins on its owner (FUTEX_LOCK_PI's rtmutex_spin_on_owner) instead of sleeping, and takes
  // the lock as the holder's FUTEX_UNLOCK_PI hands it over (`pi_unlock` of the holder's CPU;
  // the waiter returns `pi_handover` after that call began): no wake-up's latency, no IPI (the
  // waiter is running). Only its top waiter spins: one that finds sleepers, or the lock kept
  // for a thread on its way, sleeps. (A holder is never preempted inside a step: one on
  // another CPU is running.)
  if (l.handoff && l.woken == nullptr && l.sleepers.empty() && l.holder != nullptr &&
      l.holder != &a && Remote(*l.holder, a)) {
    Work(a, c.futex);
    holder_calls(c.pi_unlock);
    RunTo(a, l.free_at + c.pi_handover);  // the hand-over is the take: nothing more after it
    return take(0);
  }
  // Held: into the kernel to sleep. Freed meanwhile, the call returns: a priority-inheriting
  // lock's (FUTEX_LOCK_PI) with the lock taken; a plain mutex's with EAGAIN, and the thread
  // tries its atomic exchange again (lll_lock_wait), a step of its own at the call's end (a
  // hold taken inside this step would begin after threads stepped meanwhile found the lock
  // free, and they would sleep in the kernel on a lock nobody held).
  Work(a, c.futex);
  if (!held()) return l.handoff ? take() : false;
  if (l.woken == nullptr && l.holder != nullptr && l.holder != &a && l.free_at > a.t - c.futex) {
    l.woken = &a;
    l.handed = l.handoff;
    return woken_by_holder();
  }
  a.t = kNever;  // a later release wakes it
  a.lock_wait = true;
  l.sleepers.push_back(&a);
  return false;
}

bool SimCpu::Halted(const SimActor& to, Tsc at, bool to_stepping) const {
  if (c.halt_after == 0 || to.cpu < 0 || idle == nullptr) return false;
  const auto cpu = static_cast<size_t>(to.cpu);
  if (cpu >= idle->size()) return false;
  Tsc since = to_stepping ? to.ran_to : 0;
  if (actors != nullptr)
    for (const SimActor& x : *actors) {
      if (x.cpu != to.cpu || &x == &to) continue;
      if (x.queued || x.t <= at) return false;  // due (kNever is never)
      since = std::max(since, x.ran_to);
    }
  if (!to_stepping) {
    if (to.queued || to.t <= at) return false;
    since = std::max(since, to.ran_to);
  }
  return (*idle)[cpu].Halted(at, c.halt_after, since, to_stepping);
}

void SimCpu::Release(SimActor& a, SimLock& l) const {
  if (l.holding == &a) l.holding = nullptr;
  l.free_at = a.t;  // never earlier than it was: every take is at or after it
  l.holder = &a;
  if (l.woken != nullptr) return;  // a woken thread has not come yet: it tries then
  if (l.sleepers.empty()) return;
  SimActor* s = l.sleepers.front();
  l.sleepers.erase(l.sleepers.begin());
  l.woken = s;
  l.handed = l.handoff;
  const bool remote = Remote(a, *s);
  const bool halted = remote && Halted(*s, a.t);
  Work(a, WakeCall(remote, halted));
  // Asleep in the lock, nothing else woke it; not before its own last step ended (a step is
  // stepped whole: one that let the lock go, ran on and came back to sleep in it ends after
  // a.t where the thread it woke let go quickly).
  s->t = std::max(a.t + WakeLatency(remote, halted), s->ran_to);
}

SimQueue::SimQueue(TxDriver& driver, RxSink* sink, const FlushPolicy& policy,
                   const TxQueueConfig& config, const SimCpu& cpu, VirtualClock& clock)
    : driver_(driver),
      sink_(sink),
      policy_(policy),
      config_(config),
      cpu_(cpu),
      clock_(clock),
      dev_(driver, policy, config.bql, config.tsc_hz, qc_),
      qdisc_(MakeQdisc(config, qc_.qdisc,
                       config.shape.nolock ? QdiscLimit::kPerBand : QdiscLimit::kLength)),
      enqueue_(config),
      run_(policy, config.shape.dedicated, WakeLevel(config.txqueuelen), MaxBulk(config)),
      tx_(/*handoff=*/config.tx_lock_inherits),
      meta_offset_(config.track_stages ? TxMetaOffset() : -1),
      idle_poll_(
          static_cast<Tsc>(std::chrono::duration<double>(kIrqIdlePoll).count() * config.tsc_hz)) {}

SimQueue::Put SimQueue::Enqueue(SimActor& p, rte_mbuf* m, int band, bool waited) {
  if (config_.shape.nolock) return EnqueueNolock(p, m, band, waited);
  if (!cpu_.Acquire(p, root_)) return Put::kRetry;
  // EnqueueStep's phases, as RootlockTxQueue::Send takes them under its root lock.
  const bool queued = !qdisc_->band_full(band);
  if (!queued && enqueue_.Refuse(/*aborted=*/false, m, qc_) == Refusal::kWait) {
    cpu_.Release(p, root_);
    return Put::kWait;
  }
  if (queued) {
    if (waited) RestampTx(m, p.t);
    if (enqueue_.Bypass(/*run=*/true, [this] { return !running_ && qdisc_->empty(); })) {
      // The lock for the look and the run's beginning, no enqueue; the frame is handed to the
      // driver at the run's next step (which a stopped queue refuses).
      cpu_.Work(p, cpu_.c.bypass);
      cpu_.Release(p, root_);
      Bypass(p, m);
      return Put::kDone;
    }
    if (qdisc_->empty()) first_enqueued_ = p.t;
    cpu_.Work(p, Line(p, band_last_) + cpu_.c.enqueue);
    (void)qdisc_->Enqueue(m, band, p.t);  // cannot fail: the band has room (fq_codel makes it)
  }
  const Put put = queued ? Put::kDone : Put::kDropped;
  if (enqueue_.Next(/*run=*/true) == AfterEnqueue::kWakeRunner) {
    // Producers only enqueue and the runner sends: a sleeping runner is woken under the root
    // lock (RootlockTxQueue::Send's notify_one), its futex call (an IPI across CPUs) inside it.
    WakeRunner(&p, p.t);
  } else if (!running_) {
    // As __dev_xmit_skb: the run begins after the enqueue (whatever it did), its first dequeue
    // under the same hold of the root lock.
    BeginRun(p, false);
    Dequeue(p, /*held=*/true);
    return put;
  }
  cpu_.Release(p, root_);
  return put;
}

SimQueue::Put SimQueue::EnqueueNolock(SimActor& p, rte_mbuf* m, int band, bool waited) {
  // NolockTxQueue::Send: no root lock; the run flag is one atomic exchange (`lock`), a lost one
  // leaves MISSED for the holder (qdisc_run_begin).
  if (!qdisc_->band_full(band)) {
    if (waited) RestampTx(m, p.t);
    if (enqueue_.Bypass(/*run=*/true,
                        [this] { return !running_ && notes_.LooksEmpty(qdisc_->empty()); })) {
      // The flag, won: still empty, the frame is the first bulk (the run's path as the
      // root-locked queue's: `bypass`).
      cpu_.Work(p, Line(p, band_last_) + Line(p, flag_last_) + cpu_.c.lock + cpu_.c.bypass);
      Bypass(p, m);
      return Put::kDone;
    }
    if (qdisc_->empty()) first_enqueued_ = p.t;
    cpu_.Work(p, Line(p, band_last_) + cpu_.c.enqueue);
    (void)qdisc_->Enqueue(m, band, p.t);  // cannot fail: the band has room (fq_codel makes it)
    return AfterNolockEnqueue(p, Put::kDone);
  }
  if (enqueue_.Refuse(/*aborted=*/false, m, qc_) == Refusal::kWait) return Put::kWait;
  return AfterNolockEnqueue(p, Put::kDropped);  // qdisc_run after a drop too
}

SimQueue::Put SimQueue::AfterNolockEnqueue(SimActor& p, Put put) {
  if (enqueue_.Next(/*run=*/true) == AfterEnqueue::kWakeRunner) {
    WakeRunner(&p, p.t);
    return put;
  }
  cpu_.Work(p, Line(p, flag_last_) + cpu_.c.lock);  // the flag: won, or the note left
  if (!running_) {
    BeginRun(p, false);
  } else {
    qc_.missed.Add();
    notes_.missed.store(true);
  }
  return put;
}

void SimQueue::Bypass(SimActor& p, rte_mbuf* m) {
  BeginRun(p, false);
  qc_.bypassed.Add();
  run_.Bypass(m);
  run_t0_ = p.t;
  cpu_.Work(p, cpu_.c.run_xmit);  // the TX path's, as a dequeued bulk's
  p.step = SimStep::kXmit;
}

void SimQueue::Block(SimActor& p) {
  p.step = SimStep::kBlocked;
  p.t = kNever;
  waiters_.push_back(&p);
}

std::optional<uint16_t> SimQueue::SendBatch(SimActor& p, Batch& own) {
  if (p.send_t0 == kNever) p.send_t0 = p.t;  // a retry's wait is the TX path's too (as Xmit's)
  if (Segment(p, own)) return std::nullopt;  // a step of its own, once: again with no GSO frame
  if (!cpu_.Acquire(p, tx_)) return std::nullopt;
  const Tsc t0 = p.send_t0;
  p.send_t0 = kNever;
  const auto n = own.size();
  clock_.now = p.t;
  if (meta_offset_ >= 0) MarkHandover(own.frames(), p.t, meta_offset_);
  if (pool_ != nullptr) pool_->Written(own.frames());
  const Handed handled = Handled();
  const XmitResult x = dev_.Xmit(own.frames(), Handover::kBurst, /*from_qdisc=*/false, clock_.now);
  const uint16_t accepted = x.accepted;
  cpu_.RunTo(p, clock_.now);
  cpu_.Work(p, cpu_.c.xmit_call + cpu_.c.xmit_frame * n);
  HandoverStep::Count(own.frames(), x, /*from_qdisc=*/false, qc_);
  // The queue stopped: the txirq is told inside the driver call's section, as XmitLocked's
  // Kick (its wake in the TX path's cycles, as the real engine's).
  if (x.stopped_now) Kick(p, false);
  qc_.tx_cycles.Add(p.t - t0);
  HandOn(p, handled);
  own.ConsumeFront(accepted);
  return accepted;
}

void SimQueue::HandOn(SimActor& a, Handed before) {
  const Handed now = Handled();
  const uint64_t frames = now.frames - before.frames;
  if (frames == 0) {
    cpu_.Release(a, tx_);
    return;
  }
  cpu_.Release(a, tx_);  // the TX lock is let go before the receiver's is waited for
  cpu_.Spin(a, rx_free_);
  // The lock's price is the receiver's; a wait for it is left out, as completion_cycles leaves
  // out the TX lock's: an actor woken earlier than its own last step ended would wait for
  // itself here.
  const Tsc t0 = a.t - cpu_.c.lock;
  cpu_.Work(a, cpu_.c.deliver * frames + cpu_.c.deliver_remote * (now.remote - before.remote));
  rx_free_ = a.t;
  qc_.rx_cycles.Add(a.t - t0);
  qc_.rx_frames.Add(frames);
}

void SimQueue::BeginRun(SimActor& a, bool resched) {
  running_ = true;
  (resched ? qc_.reschedules : qc_.runs).Add();
  run_.Begin();
  a.step = SimStep::kDequeue;
}

void SimQueue::StepRun(SimActor& a) {
  switch (a.step) {
    case SimStep::kDequeue:
      return Dequeue(a, /*held=*/false);
    case SimStep::kXmit:
      return Xmit(a);
    case SimStep::kRequeue:
      return Requeue(a);
    default:
      return;
  }
}

void SimQueue::Dequeue(SimActor& a, bool held) {
  const bool nolock = config_.shape.nolock;
  // A stopped queue ends the run before it takes the root lock (not charged).
  const auto stopped = [this] { return dev_.Stopped(); };
  if (!run_.Open(stopped, nolock ? nullptr : &resched_pending_)) {
    if (nolock) notes_.QueueStopped(stopped);  // dequeue_skb's qdisc_maybe_clear_missed
    if (held) cpu_.Release(a, root_);
    return EndRun(a);
  }
  // The lock-free run holds its flag throughout.
  if (!nolock && !held && !cpu_.Acquire(a, root_)) return;
  // The dequeue writes the band's lines, last written maybe on another CPU.
  const Tsc band = Line(a, band_last_);
  run_t0_ = a.t;  // the TX path's time from here, with the root lock held, as the real run's
  DequeueContext device;
  device.has_bql = dev_.has_bql();
  device.bql_avail = dev_.bql_avail();
  device.free_slots = driver_.FreeSlots();
  device.now = a.t;
  bool wake = false;
  const auto waiters = [this] { return waiters_.size(); };
  uint16_t n = run_.Dequeue(*qdisc_, device, waiters, &wake);
  if (n == 0 && nolock && notes_.ClearForAnotherLook())  // pfifo_fast_dequeue
    n = run_.Dequeue(*qdisc_, device, waiters, &wake);
  // A dequeue that finds nothing (the one ending every run) costs only its lock and the line.
  // After a lock-free bypass the real run looks instead (nolock_qdisc_is_empty: the notes and
  // the same band lines) and ends: the same cost here, since no clock read is charged.
  cpu_.Work(a, n > 0 ? cpu_.c.dequeue + cpu_.c.dequeue_frame * n + Handovers(a, band) : band);
  if (n > 0 && wake) {
    // space_cv_.notify_all() under the root lock: one futex call wakes every blocked producer.
    cpu_.WakeAllFrom(a, waiters_, a.t);
    waiters_.clear();
  }
  if (!nolock) cpu_.Release(a, root_);
  if (n == 0) return EndRun(a);
  // The bulk's handover to the driver beyond the call (`run_xmit`: the root lock let go, the
  // handover's bookkeeping), in the TX path.
  cpu_.Work(a, cpu_.c.run_xmit);
  a.step = SimStep::kXmit;
}

Tsc SimQueue::Handovers(const SimActor& a, Tsc band) {
  unsigned moved = 0;
  for (const rte_mbuf* m : run_.batch().frames()) {
    const unsigned flow = FlowOf(m);
    if (flow < flow_cpus_.size() && flow_cpus_[flow] != a.cpu) ++moved;  // a GSO frame: its head
  }
  if (moved == 0) return band;
  // Half of each frame's now, half as the handover writes its TxMeta (Xmit, MarkHandover).
  const Tsc frames = cpu_.c.handover * moved;
  handover_due_ = frames - frames / 2;
  return frames / 2 + std::max(band, cpu_.c.handover_bulk);
}

bool SimQueue::Segment(SimActor& a, Batch& batch) {
  const unsigned cut = config_.segment_gso ? SegmentBatch(batch) : 0;
  cpu_.Work(a, cpu_.c.gso_segment * cut);
  return cut > 0;
}

void SimQueue::Xmit(SimActor& a) {
  Batch& batch = run_.batch();
  // validate_xmit_skb_list, and the handover's writes to frames another CPU built (the rest of
  // their `handover`): after the root lock, before the TX lock; a step of its own (a step takes
  // its lock first). Cut once: the step again finds no GSO frame left.
  if (Segment(a, batch)) return;
  if (handover_due_ > 0) {
    cpu_.Work(a, std::exchange(handover_due_, 0));
    return;
  }
  if (!cpu_.Acquire(a, tx_)) return;
  if (meta_offset_ >= 0) MarkHandover(batch.frames(), a.t, meta_offset_);
  if (pool_ != nullptr) pool_->Written(batch.frames());
  const uint64_t calls = driver_.counters().xmit_calls.Get();
  const Handed handled = Handled();
  clock_.now = a.t;
  const XmitResult x = dev_.Xmit(batch.frames(), run_.handover(), /*from_qdisc=*/true, clock_.now);
  accepted_ = x.accepted;
  cpu_.RunTo(a, clock_.now);
  if (x.offered)
    cpu_.Work(a, cpu_.c.xmit_call * (driver_.counters().xmit_calls.Get() - calls) +
                     cpu_.c.xmit_frame * batch.size());
  HandoverStep::Count(batch.frames(), x, /*from_qdisc=*/true, qc_);
  if (x.stopped_now) Kick(a, false);  // as SendBatch's: in the TX path's cycles
  qc_.tx_cycles.Add(a.t - run_t0_);
  HandOn(a, handled);
  if (accepted_ < batch.size()) {
    a.step = SimStep::kRequeue;  // the refused go back under the root lock
    handed_over_ = true;         // the accepted are the driver's now
    return;
  }
  Settle(a);
}

void SimQueue::Requeue(SimActor& a) {
  if (config_.shape.nolock) return Settle(a);  // the requeue slot is the flag holder's
  if (!cpu_.Acquire(a, root_)) return;
  Settle(a);
  cpu_.Release(a, root_);
}

void SimQueue::Settle(SimActor& a) {
  handed_over_ = false;
  switch (run_.Settle(*qdisc_, accepted_, qc_, [this] { return dev_.Stopped(); })) {
    case RunNext::kDequeue:
      a.step = SimStep::kDequeue;
      return;
    case RunNext::kReschedule:
      // __netif_schedule; a lock-free qdisc leaves MISSED, read as its flag goes (EndRun).
      if (config_.shape.nolock)
        notes_.missed.store(true);
      else
        Kick(a, true);
      return EndRun(a);
    case RunNext::kEnd:
      // A requeue into a stopped queue leaves DRAINING (NolockTxQueue::Run).
      if (config_.shape.nolock && dev_.Stopped())
        notes_.QueueStopped([this] { return dev_.Stopped(); });
      return EndRun(a);
  }
}

Tsc SimQueue::Line(const SimActor& a, const SimActor*& last) {
  const bool moved = last != nullptr && last != &a && SimCpu::Remote(*last, a);
  last = &a;
  return moved ? cpu_.c.lock_contended : 0;
}

void SimQueue::EndRun(SimActor& a) {
  if (config_.shape.nolock) cpu_.Work(a, Line(a, flag_last_));  // qdisc_run_end clears the flag
  resched_pending_ = false;
  running_ = false;
  a.step = a.home;
  if (a.role == SimRole::kRunner && !qdisc_->empty()) first_enqueued_ = a.t;  // a new wait
  // qdisc_run_end: a note left for the run reschedules it through the txirq.
  if (config_.shape.nolock && notes_.missed.load()) Kick(a, true);
}

void SimQueue::WakeRunner(SimActor* from, Tsc at) {
  if (runner_ == nullptr || runner_->step != SimStep::kPoll) return;
  if (from == nullptr) return SimCpu::Wake(*runner_, at);
  SimActor& r = *runner_;
  const bool on_way = r.signalled != kNever && at >= r.signalled;
  // NolockTxQueue::WakeRunner takes runner_mu_ around every notify (while runner_idle_).
  if (config_.shape.nolock && (on_way || SimCpu::Asleep(r, at))) cpu_.Work(*from, cpu_.c.lock);
  if (on_way) {
    cpu_.Work(*from, Line(*from, runner_cv_last_) + cpu_.c.lock);
    return;
  }
  if (SimCpu::Asleep(r, at)) runner_cv_last_ = from;  // the futex call's writes are its cost
  cpu_.WakeFrom(*from, r, at);
}

void SimQueue::Poll(SimActor& r, bool draining) {
  // The real queues' turn (TxQueue::RunnerTurns), as one step.
  const RunnerTurn turn = RunnerLook(policy_, qdisc_->backlog(), dev_.Stopped(), draining,
                                     first_enqueued_, r.t);
  if (turn.why == FlushTrigger::kNone) {
    // Asleep until an enqueue, a restart, the drain or the buffer's timer; as the real loop's
    // wait_for, kIrqIdlePoll at most while frames may still come.
    // The wait writes the condition variable (its line) before it sleeps; a buffer's deadline
    // passed meanwhile: no sleep, it looks again at once.
    cpu_.Work(r, Line(r, runner_cv_last_));
    if (turn.wake_by <= r.t) return;
    Tsc wake = turn.wake_by;
    if (!draining) wake = std::min(wake, r.t + idle_poll_);
    r.t = r.timer = wake;
    return;
  }
  qc_.flush_triggers[static_cast<size_t>(turn.why)].Add();
  BeginRun(r, false);  // counted as a run
}

std::optional<Tsc> SimQueue::NextCompletion(SimActor& irq) {
  if (!cpu_.Acquire(irq, tx_)) return std::nullopt;
  clock_.now = irq.t;
  const Tsc deadline = driver_.NextCompletion();
  cpu_.Release(irq, tx_);
  return deadline;
}

void SimQueue::Kick(SimActor& from, bool resched) {
  irq_kicked_ = true;
  irq_resched_ |= resched;
  if (irq_ != nullptr && irq_->step == SimStep::kIrq) cpu_.WakeFrom(from, *irq_, from.t);
}

void SimQueue::Restart(SimActor& irq, bool resched) {
  const bool nolock = config_.shape.nolock;
  const bool empty = nolock ? notes_.NothingToRestart(qdisc_->empty(), resched) : qdisc_->empty();
  const RestartAction action = OnRestart(config_.shape.dedicated, running_, empty);
  // The lock-free run flag is tried (NolockTxQueue::TryRun): `lock`, won or lost.
  if (nolock && (action == RestartAction::kPending || action == RestartAction::kRun))
    cpu_.Work(irq, Line(irq, flag_last_) + cpu_.c.lock);
  switch (action) {
    case RestartAction::kWakeRunner:
      return WakeRunner(&irq, irq.t);  // netif_wake_queue: the runner goes on
    case RestartAction::kPending:
      // The run in progress sees it: once more under the root lock, or, lock-free, through the
      // MISSED note the txirq leaves when its qdisc_run_begin loses the flag.
      if (nolock) {
        qc_.missed.Add();
        notes_.missed.store(true);
      } else {
        resched_pending_ = true;
      }
      return;
    case RestartAction::kRun:
      return BeginRun(irq, true);
    case RestartAction::kNothing:
      return;
  }
}

bool SimQueue::TakeKicks() {
  const bool resched = irq_resched_;
  irq_kicked_ = irq_resched_ = false;
  return resched;
}

bool SimQueue::Complete(SimActor& irq, bool resched) {
  if (!cpu_.Acquire(irq, tx_)) return false;
  clock_.now = irq.t;
  unsigned reclaimed = 0;
  const Handed handled = Handled();
  // The emulated NIC's TSO cuts each GSO frame it reclaims into MSS frames (SegmentGso, as the
  // stack's GSO does): `gso_segment` a slice (until 2026-12-04 a 64 KiB frame's reclaim cost one
  // frame's `completion_frame`; until 2026-12-04, night, a frame lost to a link down, freed
  // uncut, was charged its cut too).
  const uint64_t slices = driver_.counters().tso_slices.Get();
  const bool woke = dev_.Complete(irq.t, &reclaimed);
  const Tsc t0 = irq.t;
  cpu_.Work(irq, cpu_.c.completion + cpu_.c.completion_frame * reclaimed +
                     cpu_.c.gso_segment * (driver_.counters().tso_slices.Get() - slices));
  if (reclaimed > 0) {
    qc_.completions.Add();
    qc_.completion_frames.Add(reclaimed);
    qc_.completion_cycles.Add(irq.t - t0);
  }
  HandOn(irq, handled);
  if (woke || resched) Restart(irq, resched);
  return true;
}

bool SimQueue::Drained() const {
  return qdisc_->empty() && !running_ && driver_.InFlight() == 0 && waiters_.empty();
}

unsigned SimQueue::Purge() {
  unsigned n = qdisc_->Purge() + driver_.Purge();
  // The bulk in hand: all of it before the driver call, only the refused after it (the
  // accepted went with the driver's Purge).
  Batch& batch = run_.batch();
  const auto mine = batch.frames().subspan(handed_over_ ? accepted_ : 0);
  if (!mine.empty()) rte_pktmbuf_free_bulk(mine.data(), mine.size());
  n += mine.size();
  batch.Clear();
  handed_over_ = false;
  return n;
}

}  // namespace txbatch
