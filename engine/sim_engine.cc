#include "engine/sim_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <memory>
#include <optional>
#include <utility>

#include "batching/batch.h"
#include "dataplane/frame.h"
#include "dataplane/gso.h"
#include "dataplane/netdev_queue.h"
#include "dataplane/producer.h"
#include "dataplane/qdisc.h"
#include "dataplane/run_window.h"
#include "dataplane/rx_sink.h"
#include "dataplane/tsq.h"
#include "dataplane/tx_meta.h"
#include "dataplane/tx_queue.h"
#include "dataplane/workload.h"
#include "drivers/emu/emu.h"
#include "engine/sim_queue.h"
#include "engine/simulation.h"

namespace txbatch {
namespace sim_detail {

SimActor* Simulation::Earliest() {
  SimActor* best = nullptr;
  for (SimActor& a : actors_)
    if (a.t != kNever && (best == nullptr || a.t < best->t)) best = &a;
  return best;
}

void Simulation::StepActor(SimActor& a) {
  switch (a.step) {
    case SimStep::kBuild:
      return Build(a);
    case SimStep::kEnqueue:
    case SimStep::kBlocked:
      return Enqueue(a);
    case SimStep::kFlush:
      return FlushOwn(a, a.flush_why);
    case SimStep::kDequeue:
    case SimStep::kXmit:
    case SimStep::kRequeue:
      a.q->StepRun(a);
      if (a.step == SimStep::kIrq) IrqSleep(a);  // the txirq's run ended
      return;
    case SimStep::kPoll:
      return a.q->Poll(a, draining_);
    case SimStep::kIrq:
      return Irq(a);
    case SimStep::kIrqWait:
      return IrqSleep(a);
    case SimStep::kDone:
      a.t = kNever;
      return;
  }
}

bool Simulation::Dispatch(SimActor& a) {
  if (cores_.empty() || a.fifo) return true;
  SimCore& core = cores_[static_cast<size_t>(a.cpu)];
  if (core.cur == &a) return true;
  SimActor* cur = core.cur;
  // The CPU is taken while its thread is runnable (it steps again where its last step ended);
  // one asleep leaves it free from where its last step's CPU time ended.
  if (cur != nullptr && cur->t != kNever && cur->t <= cur->ran_to) {
    a.queued = true;
    a.want = a.t;
    a.t = kNever;
    core.runnable.push_back(&a);
    return false;
  }
  // Free (its thread asleep, or none): a switch onto it once the last step's CPU time ended.
  const Tsc from = std::max(a.t, cur != nullptr ? cur->ran_to : a.t);
  core.cur = &a;
  a.t = from;
  if (cur != nullptr) {
    cpu_.Work(a, c_.context_switch);
    Busy(a.cpu, from, a.t);
  }
  core.slice_end = a.t + c_.slice;
  return false;
}

void Simulation::Switch(SimCore& core, Tsc at) {
  SimActor& next = *core.runnable.front();
  core.runnable.pop_front();
  next.queued = false;
  next.t = std::max(next.want, at);
  const Tsc from = next.t;
  cpu_.Work(next, c_.context_switch);
  Busy(next.cpu, from, next.t);
  core.cur = &next;
  core.slice_end = next.t + c_.slice;
}

bool Simulation::Interrupt(SimCore& core, const SimActor* except, Tsc at, Tsc cycles) {
  SimActor* cur = core.cur;
  if (cur == nullptr || cur == except || cur->queued) return false;
  // Running at `at`: inside its last step's CPU time (whatever it sleeps on after), or due to
  // step now (steps go in time order: it is not due before `at`; one waking at `at` itself
  // counts, and two interrupts at one instant each cost it: ties, rare). A thread still
  // finishing its CPU time as another was given the CPU is not `cur`: the one given it, which
  // starts after that time, pays.
  if (!(cur->ran_to > at || (cur->t != kNever && cur->t <= at))) return false;
  if (cycles == 0) return true;
  cpu_.Charge(*cur, at, cycles);
  SimCpu::Lengthen(*cur, at, cycles);
  return true;
}

bool Simulation::TimerInterrupt(const SimActor& a, Tsc at) {
  if (cores_.empty() || c_.timer_irq == 0) return false;
  // A SCHED_FIFO sleeper's is charged to its own step, which preempts the thread; a CFS
  // sleeper's to the running thread's step.
  return Interrupt(cores_[static_cast<size_t>(a.cpu)], &a, at, a.fifo ? 0 : c_.timer_irq);
}

SimCore* Simulation::TickDue(Tsc t) {
  SimCore* due = nullptr;
  for (SimCore* core : ticking_)
    if (core->next_tick <= t && (due == nullptr || core->next_tick < due->next_tick)) due = core;
  return due;
}

void Simulation::AfterStep(SimActor& a, Tsc start) {
  if (cores_.empty()) return;
  SimCore& core = cores_[static_cast<size_t>(a.cpu)];
  if (a.fifo) {
    // It preempted the CFS thread of its CPU: what that thread had to do in [start, ran_to)
    // happens after, with a switch each way.
    SimActor* cur = core.cur;
    // Straight on from a step that preempted the same thread (a qdisc run, a step a phase), or
    // back from a sleep before that thread had its CPU again (the switches out and back in take
    // two context switches: a txirq that wakes more often starves it, and it is not preempted
    // again each time): one preemption, whose switches in and out are already counted. What the
    // FIFO thread ran since that step's push delays the thread as much: this step, a lock's
    // unlock or wake call added to the last one when a thread stepped after it found the lock
    // held (holder_calls), and the sleep between. (Until 2026-12-05 each wake was a preemption
    // of its own: a txirq waking every 1.7 thousand cycles charged 12 thousand of switches each
    // time, 1.4 CPUs of time on one.)
    const bool same = core.fifo == &a && core.preempted == cur &&
                      (core.fifo_on || start < core.fifo_until + 2 * c_.context_switch);
    const Tsc from = same ? core.fifo_until : start;
    const bool goes_on = a.t == a.ran_to;
    core.fifo_on = false;
    if (cur == nullptr || cur->t == kNever || cur->queued || a.ran_to <= from) {
      core.fifo_on = same && goes_on;  // nothing more to push back
      return;
    }
    const Tsc end = a.ran_to + (same ? 0 : 2 * c_.context_switch);
    const bool running = cur->ran_to > from;  // its last step was running at `from`
    if (!running && cur->t >= end) return;    // asleep throughout: nothing was preempted
    core.preempted = cur;
    core.fifo = &a;
    core.fifo_until = a.ran_to;
    core.fifo_on = goes_on;
    if (!same) {
      cpu_.Charge(a, start, 2 * c_.context_switch);                  // the switches in and out
      ++switches_.involuntary;                                       // preempted
    }
    if (running) {
      // The rest of its step runs after.
      SimCpu::Lengthen(*cur, cur->ran_to, end - from);
    } else {
      cur->t = cur->ran_to = end;  // runnable: it runs once the txirq is done
    }
    Busy(a.cpu, start, cur->ran_to);  // the switches, and what it had left
    return;
  }
  if (core.cur != &a || core.runnable.empty()) return;
  const bool asleep = a.t == kNever || a.t > a.ran_to;
  if (asleep) return Switch(core, a.ran_to);
  if (a.t < core.slice_end) return;
  // Its turn is spent: to the back of the queue, the next thread runs.
  ++switches_.involuntary;
  a.queued = true;
  a.want = a.t;
  a.t = kNever;
  core.runnable.push_back(&a);
  Switch(core, a.ran_to);
}

void Simulation::Irq(SimActor& irq) {
  SimQueue& q = *irq.q;
  const bool resched = q.TakeKicks();
  if (!q.Complete(irq, resched)) {
    // The TX lock was held: again when Acquire says; what it was told waits for it (a kick
    // does not wake a thread asleep in a lock).
    if (resched) q.Kick(irq, true);
    return;
  }
  if (irq.step == SimStep::kIrq) IrqSleep(irq);  // else it runs the qdisc first
}

void Simulation::IrqSleep(SimActor& irq) {
  SimQueue& q = *irq.q;
  // As IrqLoop: the next completion read under the TX lock (asleep in it if held), then a
  // sleep unless it was told something meanwhile.
  const std::optional<Tsc> next = q.NextCompletion(irq);
  if (!next) {
    irq.step = SimStep::kIrqWait;
    return;
  }
  irq.step = SimStep::kIrq;
  if (q.kicked()) return;  // told while it ran: go again at once
  clock_.now = irq.t;
  const Tsc now = irq.t;
  const Tsc deadline = *next;
  if (deadline != kNever) {
    irq.t = std::max(deadline, irq.t);
  } else if ((q.driver().IdlePolling() || q.dev().has_bql()) &&
             (Generating() || q.driver().InFlight() > 0 || !q.qdisc().empty() || q.running())) {
    irq.t += idle_poll_;  // the idle ring's coalescing bound (kIrqIdlePoll)
  } else {
    irq.t = kNever;  // nothing needs it until a kick (or ever again)
  }
  if (irq.t != kNever && irq.t > now) irq.timer = irq.t;  // wait_until, wait_for
}

CounterSnapshot Simulation::Snapshot() const {
  Tsc busy = 0;
  for (const SimActor& a : actors_) busy += a.busy;
  DriverCounters dc;
  TxQueueCounters qc;
  for (const Lane& l : lanes_) {
    AddInto(dc, l.driver->counters());
    AddInto(qc, l.q->counters());
  }
  return TakeSnapshot(dc, qc, static_cast<double>(busy) * 1e9 / tsc_hz_, switches_);
}

Result<CellResult> Simulation::Run(std::vector<uint64_t>* flow_seq) {
  const Tsc origin = static_cast<Tsc>(kOriginS * tsc_hz_);
  const Tsc window_start = origin + static_cast<Tsc>(cfg_.warmup_s * tsc_hz_);
  const Tsc window_end = window_start + static_cast<Tsc>(cfg_.duration_s * tsc_hz_);
  window_.start = window_start;
  window_.end = window_end;
  stop_at_ = window_end;
  clock_.now = origin;

  if (!pool_cpus_.ready())
    return MakeError(ENOSPC,
                     "the cost model's recycle needs 2 bytes of the mbuf's dynamic fields and "
                     "none are left; valid: a cost model with recycle 0");
  const std::vector<uint64_t> first_seq = FirstSeqs(cfg_, flow_seq);
  BuildLanes(first_seq);
  const WireSpec wire = lanes_.front().driver->Wire().value_or(WireSpec{});
  const double pps = PpsPerProducer(cfg_, wire);
  interval_ = pps > 0 ? tsc_hz_ / pps : 0;
  const double probe_pps = ProbePps(cfg_, wire);
  probe_interval_ = probe_pps > 0 ? tsc_hz_ / probe_pps : 0;
  PlaceActors(origin, first_seq);

  const double budget_s = DrainBudgetS(cfg_, wire);
  const Stepped stepped =
      StepAll(origin, window_start, window_end, window_end + static_cast<Tsc>(budget_s * tsc_hz_));
  return Conclude(stepped, budget_s, origin, flow_seq);
}

void Simulation::BuildLanes(const std::vector<uint64_t>& first_seq) {
  const auto& emu_options = std::get<emu::EmuOptions>(cfg_.driver_spec.options);
  const unsigned nq = std::max(1u, cfg_.queues);
  // The real queue's shape; frames are always stamped at the handover (they come back).
  TxQueueConfig qcfg = QueueConfigFor(cfg_, tsc_hz_, {});
  qcfg.track_stages = true;
  // On the simulated machine's CPUs; with none (a CPU per thread, the built-in model's) the TX
  // lock stays the handoff lock it always was there.
  qcfg.tx_lock_inherits = cfg_.cost.cpus == 0 || TxLockInherits(cfg_, cfg_.cost.cpus);
  // --queues: the rings' one wire.
  const auto shared_wire = nq > 1 ? std::make_shared<emu::SharedWire>() : nullptr;
  for (unsigned i = 0; i < nq; ++i) {
    Lane& l = lanes_.emplace_back();
    l.sink = MakeCellSink(cfg_, window_, tsc_hz_, first_seq);
    l.delivery = std::make_unique<SimDelivery>(*l.sink, pool_cpus_, c_.deliver_remote > 0);
    l.driver = emu::CreateEmuDriver(emu_options, *l.delivery, window_, tsc_hz_,
                                    cfg_.link ? &*cfg_.link : nullptr, &clock_, shared_wire);
    l.q = std::make_unique<SimQueue>(*l.driver, l.sink.get(), *policy_, qcfg, cpu_, clock_);
  }
  if (TsqActive(cfg_)) {
    tsq_.emplace(LoadFlows(cfg_), TsqModelFor(cfg_, tsc_hz_));
    for (Lane& l : lanes_) {
      l.driver->set_tsq(&*tsq_);
      l.q->qdisc().set_tsq(&*tsq_);
    }
    // A release wakes its flow's throttled producer, at the releasing step's time (the
    // kernel's TSQ tasklet runs on the completing CPU); it looks again.
    tsq_->set_on_release([this](unsigned flow) {
      SimActor& p = actors_[ProducerOfFlow(cfg_, flow)];
      if (!p.tsq_throttled || p.flow != flow) return;
      if (stepping_ != nullptr) {
        // Inside the stepping actor's driver call, at the driver's clock: the call ran to here,
        // the wake's futex call comes after.
        cpu_.RunTo(*stepping_, clock_.now);
        cpu_.WakeFrom(*stepping_, p, stepping_->t);
      } else
        SimCpu::Wake(p, clock_.now);
    });
  }
}

void Simulation::PlaceActors(Tsc origin, const std::vector<uint64_t>& first_seq) {
  const unsigned flows = Flows(cfg_);  // the producers' flows, the probe's the last where there is one
  const unsigned nprod = Producers(cfg_);
  const unsigned nq = std::max(1u, cfg_.queues);
  actors_.reserve(nprod + 2 * nq);  // never reallocated: queues point into it
  // The CPUs, and each actor on one as the real engine places them (PlaceThreads).
  cores_.resize(cfg_.cost.cpus);
  idle_.assign(cfg_.cost.cpus, SimIdle{.busy_to = origin});  // busy setting the cell up
  // The CPUs' ticks, spread evenly over one interval (armed below on the CPUs a thread runs on).
  std::vector<Tsc> tick_at(cores_.size());
  for (size_t i = 0; i < cores_.size(); ++i)
    tick_at[i] = origin + c_.tick_interval * (i + 1) / cores_.size();
  const SimPlacement placed = PlaceThreads(nprod, nq, cfg_.shape.dedicated, cfg_.cost.cpus);
  for (unsigned f = 0; f < flows; ++f) {
    const bool probe = f == ProbeFlow(cfg_) && cfg_.probe;
    builders_.emplace_back(probe ? Proto::kUdp : cfg_.proto, static_cast<uint16_t>(f),
                           /*track_stages=*/true, first_seq[f]);
    if (probe)
      segmenters_.emplace_back(Proto::kUdp, kProbePayload, cfg_.mtu, false,
                               /*defer=*/probe_interval_ == 0);
    else
      segmenters_.emplace_back(cfg_.proto, cfg_.size, cfg_.mtu, cfg_.offload != Offload::kNone,
                               /*defer=*/interval_ == 0);
    stats_[f].registered = true;
    stats_[f].next_seq.store(first_seq[f]);
  }
  std::vector<int> flow_cpus(flows, -1);  // each flow's producer's CPU
  for (unsigned i = 0; i < nprod; ++i) {
    const bool probe = i >= cfg_.procs;
    SimActor& p = actors_.emplace_back();
    p.role = SimRole::kProducer;
    p.q = lanes_[i % nq].q.get();  // XPS: producer i sends on queue i mod queues
    p.index = i;
    p.step = p.home = SimStep::kBuild;
    p.sampler = LatencySampler(probe ? 1 : cfg_.latency_sample);  // the probe timed whole
    // Paced producers start evenly staggered within one interval.
    // The probe's first frame an interval of its own in (RunProducer's stagger for index procs).
    p.next_pace =
        static_cast<double>(origin) + (probe ? probe_interval_ : interval_ * i / cfg_.procs);
    p.t = origin;
    p.cpu = placed.producers[i];
    const FlowRange own = ProducerFlows(cfg_, i);
    p.flow = own.first;
    for (unsigned f = own.first; f < own.first + own.count; ++f) flow_cpus[f] = p.cpu;
  }
  producers_left_ = nprod;
  std::vector<SimActor*> runners(nq, nullptr);
  if (cfg_.shape.dedicated)
    for (unsigned i = 0; i < nq; ++i) {
      SimActor& r = actors_.emplace_back();
      r.role = SimRole::kRunner;
      r.q = lanes_[i].q.get();
      r.step = r.home = SimStep::kPoll;
      r.t = kNever;
      r.cpu = placed.runners[i];
      runners[i] = &r;
    }
  for (unsigned i = 0; i < nq; ++i) {
    SimActor& irq = actors_.emplace_back();
    irq.role = SimRole::kIrq;
    irq.q = lanes_[i].q.get();
    irq.step = irq.home = SimStep::kIrq;
    irq.t = origin + idle_poll_;
    irq.fifo = true;
    irq.cpu = placed.txirqs[i];
    lanes_[i].delivery->set_flow_cpus(flow_cpus);
    // The handover writes a frame's TxMeta only where stages are timed (as the real queue's
    // track_stages on every emulated NIC: not with --no-timing).
    lanes_[i].q->Attach(&irq, runners[i], flow_cpus, lanes_[i].delivery.get(),
                        cfg_.timing ? &pool_cpus_ : nullptr);
  }
  if (c_.tick > 0 && c_.tick_interval > 0)
    for (const SimActor& x : actors_) {
      SimCore& core = cores_[static_cast<size_t>(x.cpu)];
      if (core.next_tick == kNever) {
        core.next_tick = tick_at[static_cast<size_t>(x.cpu)];
        ticking_.push_back(&core);
      }
    }
}

Simulation::Stepped Simulation::StepAll(Tsc origin, Tsc window_start, Tsc window_end,
                                        Tsc deadline) {
  Stepped out;
  bool in_window = false, ended = false;
  out.last = origin;
  // TCP Small Queues sampled every kTsqSampleS of the window: nothing changes between steps, so
  // the samples due before a step see the state the steps before it left.
  TsqSampler tsq_sampler(window_start, static_cast<Tsc>(kTsqSampleS * tsc_hz_));
  while (SimActor* next = Earliest()) {
    if (SimCore* core = TickDue(next->t)) {
      // A tick before the next step: the thread running on that CPU loses it (the next step may
      // be that thread's, now later).
      Interrupt(*core, nullptr, core->next_tick, c_.tick);
      core->next_tick += c_.tick_interval;
      continue;
    }
    if (!in_window && next->t >= window_start) {
      out.a = Snapshot();
      in_window = true;
    }
    if (tsq_) tsq_sampler.TakeUntil(*tsq_, std::min(next->t, window_end));
    if (!ended && next->t >= window_end) {
      if (tsq_) out.tsq = tsq_sampler.Summarise(*tsq_);
      out.b = Snapshot();
      ended = true;
      draining_ = true;  // generation stops; a dedicated runner sends what buffer:N holds
      for (Lane& l : lanes_) l.q->WakeRunner(nullptr, window_end);
    }
    if (next->t > deadline) break;
    if (next->timer != kNever) {
      // Its timed sleep ends now, before any wait for its CPU: by the timer, or by another
      // thread's wake first (the timer armed and cancelled). It spends that CPU time once it runs.
      const bool fired = next->t >= next->timer;
      next->timer_cost = fired ? c_.timer_wake : c_.timer_arm;
      next->timer = kNever;
      // A SCHED_FIFO sleeper's interrupt is its preemption's first part (AfterStep pushes the
      // preempted thread by the whole step).
      if (fired && TimerInterrupt(*next, next->t) && next->fifo) next->timer_cost += c_.timer_irq;
    }
    if (!Dispatch(*next)) continue;
    out.last = next->t;
    const Tsc start = next->t;
    next->ran_to = start;
    next->lock_wait = false;
    next->signalled = kNever;
    SimIdle* const idle =
        next->cpu >= 0 && !idle_.empty() ? &idle_[static_cast<size_t>(next->cpu)] : nullptr;
    if (idle != nullptr) idle->Begin(start, c_.halt_after);
    if (next->timer_cost > 0) {
      // Spent first, as a step of its own (a step takes its lock at its start; the txirq's
      // preempts its CPU's thread, and its steps after are the same preemption).
      cpu_.Work(*next, std::exchange(next->timer_cost, 0));
      if (idle != nullptr) idle->End(next->ran_to);
      AfterStep(*next, start);
      continue;
    }
    stepping_ = next;
    pool_cpus_.set_cpu(next->cpu);
    StepActor(*next);
    pool_cpus_.set_cpu(-1);
    stepping_ = nullptr;
    if (next->timer != kNever && next->timer - next->ran_to < c_.timer_arm) {
      // A timed wait shorter than setting its timer takes has expired before the thread could
      // switch out: it keeps its CPU, busy for the timer's whole cost, and goes on (no switch).
      next->timer = kNever;
      next->t = next->ran_to;
      cpu_.Work(*next, c_.timer_wake);
    }
    // Asleep after it (a lock, a condition variable, a timer): a voluntary switch.
    if (next->t == kNever || next->t > next->ran_to) ++switches_.voluntary;
    if (idle != nullptr) idle->End(next->ran_to);
    AfterStep(*next, start);
  }
  if (!in_window) out.a = Snapshot();
  if (!ended) out.b = Snapshot();
  if (tsq_ && !out.tsq) out.tsq = tsq_sampler.Summarise(*tsq_);
  return out;
}

Result<CellResult> Simulation::Conclude(const Stepped& stepped, double budget_s, Tsc origin,
                                        std::vector<uint64_t>* flow_seq) {
  const Tsc window_start = window_.start.load(), window_end = window_.end.load();
  uint64_t overlaps = 0;
  for (const Lane& l : lanes_) overlaps += l.q->lock_overlaps();
  bool drained = producers_left_ == 0;
  for (const Lane& l : lanes_) drained &= l.q->Drained();
  if (!drained || overlaps > 0) {
    unsigned purged = 0;
    for (Lane& l : lanes_) purged += l.q->Purge();
    for (SimActor& x : actors_) {
      if (x.held != nullptr) rte_pktmbuf_free(x.held), ++purged;
      if (!x.own.empty()) rte_pktmbuf_free_bulk(x.own.frames().data(), x.own.size());
    }
    if (overlaps > 0)
      return MakeError(EIO, fmt::format("two simulated threads held one lock at once ({} times); "
                                        "this is a txbatch bug",
                                        overlaps));
    return MakeError(EIO, fmt::format("the simulated drain did not finish within {:.1f} s of "
                                      "virtual time ({} frames freed); this is a txbatch bug",
                                      budget_s, purged));
  }

  QueueTotals totals;
  std::vector<RxSink*> sinks;
  for (Lane& l : lanes_) {
    totals.Add(*l.driver, l.q->counters(), l.q->qdisc().backlog(), l.q->dev().bql_limit());
    sinks.push_back(l.sink.get());
  }
  CloseSinks(cfg_, sinks, stats_);
  const Lane& first = lanes_.front();
  CellRun run{cfg_, *first.driver, totals, *first.sink, stats_, stepped.a, stepped.b};
  run.tsc_hz = tsc_hz_;
  run.run_start = origin;
  run.window_start = window_start;
  run.window_end = window_end;
  run.stopped_at = window_end;
  run.drained_at = stepped.last;
  CellResult r = ResultOf(run, flow_seq);
  r.tsq = stepped.tsq;
  for (Lane& l : lanes_) {
    l.q.reset();
    l.driver.reset();
  }
  CloseBooks(r.books, pool_);
  return r;
}

}  // namespace sim_detail

using sim_detail::kMinTickInterval;
using sim_detail::Simulation;

std::optional<std::string> SimUnsupported(const CellConfig& cfg) {
  if (!cfg.driver_spec.emulated())
    return fmt::format(
        "--engine sim runs the emulated NIC only, not '{}'; valid: an emu: driver "
        "(emu:e1000, emu:ixgbe, emu:null, emu:ipoib-*), or --engine real",
        cfg.driver);
  if (!(cfg.cost.tsc_hz > 0)) return std::string("the cost model's tsc_hz must be positive");
  if (std::llround(cfg.cost.frame) < 1)
    return std::string(
        "the cost model's frame cost must be at least 1 cycle (a producer that "
        "takes no time would never let the clock move)");
  const long long tick = std::llround(cfg.cost.tick), every = std::llround(cfg.cost.tick_interval);
  if (tick > 0 && every > 0 && (2 * tick > every || every < kMinTickInterval))
    return fmt::format(
        "the cost model's tick ({} cycles every {}) would take more than half a CPU or come more "
        "often than every {} cycles; valid: tick 0 or tick_interval 0 (no ticks), or tick at most "
        "half of tick_interval and tick_interval at least {}",
        tick, every, kMinTickInterval, kMinTickInterval);
  return std::nullopt;
}

SimPlacement PlaceThreads(unsigned procs, unsigned queues, bool dedicated, unsigned cpus) {
  SimPlacement p;
  if (cpus == 0) {  // a CPU each, in actor order
    int next = 0;
    for (unsigned i = 0; i < procs; ++i) p.producers.push_back(next++);
    for (unsigned i = 0; dedicated && i < queues; ++i) p.runners.push_back(next++);
    for (unsigned i = 0; i < queues; ++i) p.txirqs.push_back(next++);
    return p;
  }
  std::vector<unsigned> cfs(cpus, 0), fifo(cpus, 0);
  for (unsigned i = 0; i < procs; ++i) {
    p.producers.push_back(static_cast<int>(i % cpus));
    ++cfs[i % cpus];
  }
  for (unsigned q = 0; q < queues; ++q) {
    p.txirqs.push_back(static_cast<int>(q % cpus));
    ++fifo[q % cpus];
  }
  for (unsigned q = 0; dedicated && q < queues; ++q) {
    unsigned best = cpus - 1 - q % cpus;
    for (unsigned i = cpus; i-- > 0;)
      if (std::pair{cfs[i], fifo[i]} < std::pair{cfs[best], fifo[best]}) best = i;
    p.runners.push_back(static_cast<int>(best));
    ++cfs[best];
  }
  return p;
}

Result<CellResult> SimulateCell(const CellConfig& cfg, rte_mempool* pool,
                                std::vector<uint64_t>* flow_seq) {
  if (auto why = SimUnsupported(cfg)) return MakeError(EINVAL, *why);
  Simulation sim(cfg, pool);
  return sim.Run(flow_seq);
}

}  // namespace txbatch
