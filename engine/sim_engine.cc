#include "engine/sim_engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "batching/batch.h"
#include "dataplane/frame.h"
#include "dataplane/netdev_queue.h"
#include "dataplane/producer.h"
#include "dataplane/qdisc.h"
#include "dataplane/run_window.h"
#include "dataplane/rx_sink.h"
#include "dataplane/tx_meta.h"
#include "dataplane/tx_queue.h"
#include "dataplane/workload.h"
#include "drivers/emu/emu.h"

namespace txbatch {
namespace {

// A producer that found the pool empty sleeps this long before trying again (RunProducer's).
constexpr double kAllocBackoffS = 20e-6;
// The virtual TSC at the cell's start: any origin but 0 (the NIC reads 0 as "never sent").
constexpr double kOriginS = 1.0;

// The cost model in whole cycles (rounded once, at setup: the virtual clock is an integer TSC).
struct Cycles {
  explicit Cycles(const CostModel& c)
      : write(Round(c.write)),
        frame(Round(c.frame)),
        lock(Round(c.lock)),
        lock_contended(Round(c.lock_contended)),
        enqueue(Round(c.enqueue)),
        dequeue(Round(c.dequeue)),
        dequeue_frame(Round(c.dequeue_frame)),
        xmit_call(Round(c.xmit_call)),
        xmit_frame(Round(c.xmit_frame)),
        completion(Round(c.completion)),
        completion_frame(Round(c.completion_frame)),
        deliver(Round(c.deliver)) {}
  static Tsc Round(double x) { return static_cast<Tsc>(std::llround(std::max(0.0, x))); }
  Tsc write, frame, lock, lock_contended, enqueue, dequeue, dequeue_frame, xmit_call, xmit_frame,
      completion, completion_frame, deliver;
};

enum class Role : uint8_t { kProducer, kRunner, kIrq };

// What an actor does at its next step.
enum class Step : uint8_t {
  kBuild,    // producer: build the next frame (starting a write when the last one is done)
  kEnqueue,  // producer: put the frame built into the qdisc (or its own batch)
  kBlocked,  // producer: its band was full; woken when the runner frees room
  kDequeue,  // runner (any role): a bulk dequeue under the root lock
  kXmit,     // runner: hand the bulk to the driver under the TX lock
  kRequeue,  // runner: put what the driver refused back at the head
  kPoll,     // dedicated runner: is there something to send?
  kIrq,      // txirq: reclaim completions
  kDone,
};

struct SimQueue;

struct Actor {
  Role role;
  SimQueue* q = nullptr;  // the TX queue it sends on (producer i: queue i mod queues)
  unsigned index;         // producer index (flow); ties in time go to the lower actor number
  Step step;
  Tsc t = kNever;  // when its next step happens (kNever: asleep until woken)
  Tsc busy = 0;    // cycles of CPU it used inside the window
  Step home;       // where it goes back to when a qdisc run ends
  // Producer.
  std::vector<unsigned> write;  // payloads of the current write's frames
  size_t next_frame = 0;
  bool finishing = false;  // generation stopped: these are the corked remainder
  rte_mbuf* held = nullptr;
  unsigned held_payload = 0;
  bool held_waited = false;
  double next_pace = 0;
  Batch own;  // --qdisc none: its own batch
  Tsc own_first = 0;
  // A qdisc run.
  int quota = 0;
  Batch batch;
  Tsc run_t0 = 0;
  Handover handover = Handover::kBurst;
  uint16_t accepted = 0;
};

// One TX queue (--queues): its sink, driver, device side and qdisc, and the state of its locks,
// its run and its txirq.
struct SimQueue {
  SimQueue(unsigned txqueuelen, bool pfifo) : qdisc(txqueuelen, pfifo ? 1 : kPfifoBands) {}
  std::unique_ptr<RxSink> sink;
  std::unique_ptr<TxDriver> driver;
  TxQueueCounters qc;
  std::unique_ptr<NetdevQueue> dev;
  PfifoFast qdisc;
  Actor* irq = nullptr;
  Actor* runner = nullptr;         // --runner dedicated
  std::vector<Actor*> waiters;     // blocked producers, in the order they blocked
  Tsc root_free = 0, tx_free = 0;  // when its root lock and TX lock are next free
  Tsc first_enqueued = 0;
  bool running = false, resched_pending = false;
  bool irq_kicked = false, irq_resched = false;
};

class Simulation {
 public:
  Simulation(const CellConfig& cfg, rte_mempool* pool)
      : cfg_(cfg),
        c_(cfg.cost),
        tsc_hz_(cfg.cost.tsc_hz),
        pool_(pool),
        stats_(cfg.procs),
        policy_(MakeFlushPolicy(cfg.policy, tsc_hz_)),
        wake_level_(cfg.txqueuelen - std::max(1u, cfg.txqueuelen / 4)),
        meta_offset_(TxMetaOffset()),
        idle_poll_(
            static_cast<Tsc>(std::chrono::duration<double>(kIrqIdlePoll).count() * tsc_hz_)) {}

  Result<CellResult> Run(std::vector<uint64_t>* flow_seq);

 private:
  // Scheduling.
  Actor* Earliest();
  void StepActor(Actor& a);
  // Spin lock free from `free_at`: `a` spins until then (CPU time), pays the acquisition, and
  // more when it had to wait (the lock's line comes from the last holder's core).
  void Acquire(Actor& a, Tsc free_at) {
    if (free_at > a.t) Work(a, free_at - a.t + c_.lock_contended);
    Work(a, c_.lock);
  }
  void Work(Actor& a, Tsc cycles) {
    if (window_.Contains(a.t)) a.busy += cycles;
    a.t += cycles;
  }
  void Wake(Actor& a, Tsc at) {
    if (a.t == kNever || a.t > at) a.t = at;
  }

  // Producers.
  void Build(Actor& p);
  void Enqueue(Actor& p);
  void Finish(Actor& p);
  void FlushOwn(Actor& p, FlushTrigger why);
  // The qdisc run (RootlockTxQueue::Run, one bulk per step).
  void BeginRun(Actor& a, bool resched);
  void Dequeue(Actor& a);
  void Xmit(Actor& a);
  void Requeue(Actor& a);
  void AfterXmit(Actor& a);
  void EndRun(Actor& a);
  // The dedicated runner and the txirq.
  void Poll(Actor& r);
  void Irq(Actor& q);
  void IrqSleep(Actor& q);
  void Kick(SimQueue& q, Tsc at, bool resched);
  void Restart(SimQueue& q, Tsc at, Actor& irq);
  bool Generating() const { return producers_left_ > 0; }
  CounterSnapshot Snapshot() const;

  const CellConfig& cfg_;
  const Cycles c_;
  const double tsc_hz_;
  rte_mempool* pool_;
  VirtualClock clock_;
  RunWindow window_;
  std::vector<ProducerStats> stats_;
  std::vector<FrameBuilder> builders_;
  std::vector<Segmenter> segmenters_;
  std::unique_ptr<FlushPolicy> policy_;
  std::vector<std::unique_ptr<SimQueue>> queues_;
  const unsigned wake_level_;
  const int meta_offset_;
  const Tsc idle_poll_;
  // Producers, then each queue's dedicated runner (if any), then each queue's txirq.
  std::vector<Actor> actors_;
  bool draining_ = false;
  unsigned producers_left_ = 0;
  double interval_ = 0;  // --rate: TSC between a producer's frames
  Tsc stop_at_ = kNever;
};

Actor* Simulation::Earliest() {
  Actor* best = nullptr;
  for (Actor& a : actors_)
    if (a.t != kNever && (best == nullptr || a.t < best->t)) best = &a;
  return best;
}

void Simulation::StepActor(Actor& a) {
  switch (a.step) {
    case Step::kBuild:
      return Build(a);
    case Step::kEnqueue:
    case Step::kBlocked:
      return Enqueue(a);
    case Step::kDequeue:
      return Dequeue(a);
    case Step::kXmit:
      return Xmit(a);
    case Step::kRequeue:
      return Requeue(a);
    case Step::kPoll:
      return Poll(a);
    case Step::kIrq:
      return Irq(a);
    case Step::kDone:
      a.t = kNever;
      return;
  }
}

void Simulation::Build(Actor& p) {
  if (p.next_frame == p.write.size()) {
    if (p.finishing) return Finish(p);
    p.write.clear();
    p.next_frame = 0;
    if (p.t >= stop_at_) {
      // As RunProducer: the corked TCP remainder goes, then the producer ends.
      p.finishing = true;
      segmenters_[p.index].Flush([&](unsigned payload) { p.write.push_back(payload); });
      if (p.write.empty()) return Finish(p);
    } else {
      Work(p, c_.write);
      segmenters_[p.index].Write([&](unsigned payload) { p.write.push_back(payload); });
      if (p.write.empty()) return;  // corked: the next write completes a segment
    }
  }
  if (interval_ > 0 && !p.finishing) {
    // Paced: sleep to the next frame's time, or to the own batch's drain timer if sooner.
    const Tsc next = static_cast<Tsc>(p.next_pace);
    const Tsc by = p.own.empty() ? kNever : policy_->FlushBy(p.own_first);
    if (by <= p.t) return FlushOwn(p, FlushTrigger::kTimer);
    if (next > p.t) {
      p.t = std::min(next, by);
      return;
    }
    p.next_pace += interval_;
  }
  rte_mbuf* m = rte_pktmbuf_alloc(pool_);
  const unsigned payload = p.write[p.next_frame++];
  if (m == nullptr) {
    // The pool is empty (--pool-size): back off as the real producer does, asleep.
    stats_[p.index].alloc_failures.Add();
    p.t += static_cast<Tsc>(kAllocBackoffS * tsc_hz_);
    return;
  }
  Work(p, c_.frame);
  builders_[p.index].Build(m, payload, p.t);
  stats_[p.index].generated.Add();
  p.held = m;
  p.held_payload = payload;
  p.held_waited = false;
  p.step = Step::kEnqueue;
}

void Simulation::Enqueue(Actor& p) {
  SimQueue& q = *p.q;
  rte_mbuf* m = p.held;
  const bool write_done = p.next_frame == p.write.size();
  if (cfg_.noqueue) {
    p.held = nullptr;
    p.step = Step::kBuild;
    if (p.own.empty()) p.own_first = p.t;
    p.own.Push(m);
    const FlushTrigger why = policy_->Trigger(p.own.size(), p.own_first, p.t, write_done);
    if (why != FlushTrigger::kNone) FlushOwn(p, why);
    return;
  }
  Acquire(p, q.root_free);
  if (q.qdisc.band_full(kProducerBand)) {
    if (!cfg_.stream) {
      q.qc.dropped_qdisc_full.Add();
      rte_pktmbuf_free(m);
      builders_[p.index].Unbuild(p.held_payload);
      p.held = nullptr;
      p.step = Step::kBuild;
    } else {
      q.qc.waits.Add();
      p.held_waited = true;
      p.step = Step::kBlocked;
      q.waiters.push_back(&p);
    }
    q.root_free = p.t;
    if (p.step == Step::kBlocked) p.t = kNever;
    return;
  }
  // A frame that waited enters the stack now (RootlockTxQueue::Send).
  if (p.held_waited) RestampTx(m, p.t);
  if (q.qdisc.empty()) q.first_enqueued = p.t;
  Work(p, c_.enqueue);
  (void)q.qdisc.Enqueue(m, kProducerBand);  // cannot fail: the band has room
  q.root_free = p.t;
  p.held = nullptr;
  p.step = Step::kBuild;
  if (cfg_.dedicated) {
    if (q.runner->step == Step::kPoll) Wake(*q.runner, p.t);
  } else if (!q.running) {
    BeginRun(p, false);
  }
}

void Simulation::Finish(Actor& p) {
  if (!p.own.empty()) FlushOwn(p, FlushTrigger::kEnd);
  stats_[p.index].next_seq.store(builders_[p.index].next_seq());
  p.step = Step::kDone;
  p.t = kNever;
  --producers_left_;
}

void Simulation::FlushOwn(Actor& p, FlushTrigger why) {
  SimQueue& q = *p.q;
  stats_[p.index].flush_triggers[static_cast<size_t>(why)].Add();
  const Tsc t0 = p.t;
  const auto n = p.own.size();
  Acquire(p, q.tx_free);
  clock_.now = p.t;
  if (meta_offset_ >= 0) MarkHandover(p.own.frames(), p.t, meta_offset_);
  bool stopped_now = false;
  const uint64_t handled = q.sink->handled();
  const uint16_t accepted = q.dev->Xmit(p.own.frames(), Handover::kBurst, &stopped_now);
  p.t = std::max(p.t, clock_.now);
  Work(p, c_.xmit_call + c_.xmit_frame * n + c_.deliver * (q.sink->handled() - handled));
  q.tx_free = p.t;
  q.qc.batch_hist[n].Add();
  q.qc.dropped_noqueue.Add(n - accepted);
  q.qc.tx_cycles.Add(p.t - t0);
  if (stopped_now) Kick(q, p.t, false);
  p.own.ConsumeFront(accepted);
  // Refused (Linux drops what a device without a queue refuses): their numbers go back.
  for (auto it = p.own.frames().rbegin(); it != p.own.frames().rend(); ++it)
    builders_[p.index].Unbuild(PayloadBytes(*it));
  if (!p.own.empty()) rte_pktmbuf_free_bulk(p.own.frames().data(), p.own.size());
  p.own.Clear();
}

void Simulation::BeginRun(Actor& a, bool resched) {
  SimQueue& q = *a.q;
  q.running = true;
  (resched ? q.qc.reschedules : q.qc.runs).Add();
  a.quota = kDevTxWeight;
  a.step = Step::kDequeue;
}

void Simulation::Dequeue(Actor& a) {
  SimQueue& q = *a.q;
  if (q.dev->Stopped()) {
    // The txirq restarts the queue; if it already did during this run, go on.
    if (!q.resched_pending) return EndRun(a);
    q.resched_pending = false;
  }
  a.run_t0 = a.t;
  Acquire(a, q.root_free);
  DequeueContext ctx;
  ctx.quota_left = a.quota;
  ctx.has_bql = q.dev->has_bql();
  ctx.bql_avail = q.dev->bql_avail();
  ctx.may_bulk = !cfg_.pfifo;
  ctx.requeued = q.qdisc.requeued();
  ctx.free_slots = q.driver->FreeSlots();
  const DequeueBudget budget = policy_->Budget(ctx);
  a.batch.Clear();
  const uint16_t n = q.qdisc.DequeueBulk(a.batch, budget);
  // A dequeue that finds nothing (the one ending every run) costs only its lock.
  if (n > 0) Work(a, c_.dequeue + c_.dequeue_frame * n);
  q.root_free = a.t;
  if (n == 0) return EndRun(a);
  if (!q.waiters.empty() && q.qdisc.backlog() <= wake_level_) {
    for (Actor* w : q.waiters) Wake(*w, a.t);
    q.waiters.clear();
  }
  a.handover = budget.handover;
  a.step = Step::kXmit;
}

void Simulation::Xmit(Actor& a) {
  SimQueue& q = *a.q;
  Acquire(a, q.tx_free);
  if (meta_offset_ >= 0) MarkHandover(a.batch.frames(), a.t, meta_offset_);
  const uint64_t calls = q.driver->counters().xmit_calls.Get();
  const uint64_t handled = q.sink->handled();
  clock_.now = a.t;
  bool stopped_now = false;
  a.accepted = q.dev->Xmit(a.batch.frames(), a.handover, &stopped_now);
  a.t = std::max(a.t, clock_.now);
  Work(a, c_.xmit_call * (q.driver->counters().xmit_calls.Get() - calls) +
              c_.xmit_frame * a.batch.size() + c_.deliver * (q.sink->handled() - handled));
  q.tx_free = a.t;
  q.qc.batch_hist[a.batch.size()].Add();
  q.qc.tx_cycles.Add(a.t - a.run_t0);
  if (stopped_now) Kick(q, a.t, false);
  if (a.accepted < a.batch.size()) {
    a.step = Step::kRequeue;
    return;
  }
  AfterXmit(a);
}

void Simulation::Requeue(Actor& a) {
  SimQueue& q = *a.q;
  Acquire(a, q.root_free);
  q.qdisc.Requeue(a.batch.frames().subspan(a.accepted));
  q.qc.requeues.Add();
  q.qc.requeued_frames.Add(a.batch.size() - a.accepted);
  q.root_free = a.t;
  AfterXmit(a);
}

void Simulation::AfterXmit(Actor& a) {
  SimQueue& q = *a.q;
  a.quota -= a.batch.size();
  a.batch.Clear();
  a.step = Step::kDequeue;
  if (a.quota > 0) return;
  // __netif_schedule: the softirq role continues (a dedicated runner just goes on).
  if (!cfg_.dedicated && !q.qdisc.empty()) Kick(q, a.t, true);
  EndRun(a);
}

void Simulation::EndRun(Actor& a) {
  SimQueue& q = *a.q;
  q.resched_pending = false;
  q.running = false;
  a.step = a.home;
  if (a.role == Role::kRunner && !q.qdisc.empty()) q.first_enqueued = a.t;
  if (a.role == Role::kIrq) IrqSleep(a);
}

void Simulation::Poll(Actor& r) {
  SimQueue& q = *r.q;
  FlushTrigger why = FlushTrigger::kNone;
  if (!q.qdisc.empty() && !q.dev->Stopped()) {
    const auto n = static_cast<uint16_t>(std::min<unsigned>(q.qdisc.backlog(), UINT16_MAX));
    why = draining_ ? FlushTrigger::kEnd : policy_->Trigger(n, q.first_enqueued, r.t, true);
  }
  if (why == FlushTrigger::kNone) {
    // Asleep until an enqueue, a restart, the drain or the buffer's timer.
    const Tsc by =
        q.qdisc.empty() || q.dev->Stopped() ? kNever : policy_->FlushBy(q.first_enqueued);
    r.t = by > r.t ? by : kNever;
    return;
  }
  q.qc.flush_triggers[static_cast<size_t>(why)].Add();
  BeginRun(r, false);
}

void Simulation::Kick(SimQueue& q, Tsc at, bool resched) {
  q.irq_kicked = true;
  q.irq_resched |= resched;
  if (q.irq->step == Step::kIrq) Wake(*q.irq, at);
}

void Simulation::Restart(SimQueue& q, Tsc at, Actor& irq) {
  if (cfg_.dedicated) {
    if (q.runner->step == Step::kPoll) Wake(*q.runner, at);  // netif_wake_queue
  } else if (q.running) {
    q.resched_pending = true;
  } else if (!q.qdisc.empty()) {
    BeginRun(irq, true);
  }
}

void Simulation::Irq(Actor& irq) {
  SimQueue& q = *irq.q;
  Acquire(irq, q.tx_free);
  clock_.now = irq.t;
  unsigned reclaimed = 0;
  const uint64_t handled = q.sink->handled();
  const bool woke = q.dev->Complete(irq.t, &reclaimed);
  const Tsc t0 = irq.t;
  Work(irq, c_.completion + c_.completion_frame * reclaimed +
                c_.deliver * (q.sink->handled() - handled));
  if (reclaimed > 0) {
    q.qc.completions.Add();
    q.qc.completion_frames.Add(reclaimed);
    q.qc.completion_cycles.Add(irq.t - t0);
  }
  q.tx_free = irq.t;
  const bool resched = q.irq_resched;
  q.irq_kicked = q.irq_resched = false;
  if (woke || resched) Restart(q, irq.t, irq);
  if (irq.step == Step::kIrq) IrqSleep(irq);
}

void Simulation::IrqSleep(Actor& irq) {
  SimQueue& q = *irq.q;
  irq.step = Step::kIrq;
  if (q.irq_kicked || q.irq_resched) return;  // told while it ran: go again at once
  clock_.now = irq.t;
  const Tsc deadline = q.driver->NextCompletion();
  if (deadline != kNever) {
    irq.t = std::max(deadline, irq.t);
  } else if (Generating() || q.driver->InFlight() > 0 || !q.qdisc.empty()) {
    irq.t += idle_poll_;  // the idle ring's coalescing bound (kIrqIdlePoll)
  } else {
    irq.t = kNever;  // nothing will ever need it again
  }
}

CounterSnapshot Simulation::Snapshot() const {
  Tsc busy = 0;
  for (const Actor& a : actors_) busy += a.busy;
  DriverCounters dc;
  TxQueueCounters qc;
  for (const auto& q : queues_) {
    SumInto(dc, q->driver->counters());
    SumInto(qc, q->qc);
  }
  return TakeSnapshot(dc, qc, static_cast<double>(busy) * 1e9 / tsc_hz_, 0);
}

Result<CellResult> Simulation::Run(std::vector<uint64_t>* flow_seq) {
  const auto& emu_options = std::get<emu::EmuOptions>(cfg_.driver_spec.options);
  const Tsc origin = static_cast<Tsc>(kOriginS * tsc_hz_);
  const Tsc window_start = origin + static_cast<Tsc>(cfg_.warmup_s * tsc_hz_);
  const Tsc window_end = window_start + static_cast<Tsc>(cfg_.duration_s * tsc_hz_);
  window_.start = window_start;
  window_.end = window_end;
  stop_at_ = window_end;
  clock_.now = origin;

  std::vector<uint64_t> first_seq(cfg_.procs, 0);
  if (flow_seq != nullptr)
    for (size_t f = 0; f < std::min(first_seq.size(), flow_seq->size()); ++f)
      first_seq[f] = (*flow_seq)[f];
  const unsigned nq = std::max(1u, cfg_.queues);
  // --queues: the rings' one wire.
  const auto shared_wire = nq > 1 ? std::make_shared<emu::SharedWire>() : nullptr;
  for (unsigned i = 0; i < nq; ++i) {
    auto& q = queues_.emplace_back(std::make_unique<SimQueue>(cfg_.txqueuelen, cfg_.pfifo));
    q->sink = std::make_unique<RxSink>(window_, tsc_hz_, cfg_.procs,
                                       cfg_.link ? uint64_t{4} * cfg_.link->limit : 0,
                                       /*verify_headers=*/cfg_.link && cfg_.link->corrupt > 0);
    q->sink->StartFlows(first_seq);
    q->driver = emu::CreateEmuDriver(emu_options, *q->sink, window_, tsc_hz_,
                                     cfg_.link ? &*cfg_.link : nullptr, &clock_, shared_wire);
    q->dev = std::make_unique<NetdevQueue>(*q->driver, *policy_, cfg_.bql, tsc_hz_, q->qc);
  }
  const WireSpec wire = queues_.front()->driver->Wire().value_or(WireSpec{});
  const double pps = PpsPerProducer(cfg_, wire);
  interval_ = pps > 0 ? tsc_hz_ / pps : 0;

  actors_.reserve(cfg_.procs + 2 * nq);  // never reallocated: queues point into it
  for (unsigned i = 0; i < cfg_.procs; ++i) {
    builders_.emplace_back(cfg_.proto, static_cast<uint16_t>(i), /*track_stages=*/true,
                           first_seq[i]);
    segmenters_.emplace_back(cfg_.proto, cfg_.size, cfg_.mtu);
    stats_[i].registered = true;
    stats_[i].next_seq.store(first_seq[i]);
    Actor& p = actors_.emplace_back();
    p.role = Role::kProducer;
    p.q = queues_[i % nq].get();  // XPS: producer i sends on queue i mod queues
    p.index = i;
    p.step = p.home = Step::kBuild;
    // Paced producers start evenly staggered within one interval.
    p.next_pace = static_cast<double>(origin) + interval_ * i / cfg_.procs;
    p.t = origin;
  }
  producers_left_ = cfg_.procs;
  if (cfg_.dedicated)
    for (auto& q : queues_) {
      Actor& r = actors_.emplace_back();
      r.role = Role::kRunner;
      r.q = q.get();
      r.step = r.home = Step::kPoll;
      r.t = kNever;
      q->runner = &r;
    }
  for (auto& q : queues_) {
    Actor& irq = actors_.emplace_back();
    irq.role = Role::kIrq;
    irq.q = q.get();
    irq.step = irq.home = Step::kIrq;
    irq.t = origin + idle_poll_;
    q->irq = &irq;
  }

  const double budget_s = DrainBudgetS(cfg_, wire);
  const Tsc deadline = window_end + static_cast<Tsc>(budget_s * tsc_hz_);
  CounterSnapshot a{}, b{};
  bool in_window = false, ended = false;
  Tsc last = origin;
  while (Actor* next = Earliest()) {
    if (!in_window && next->t >= window_start) {
      a = Snapshot();
      in_window = true;
    }
    if (!ended && next->t >= window_end) {
      b = Snapshot();
      ended = true;
      draining_ = true;  // generation stops; a dedicated runner sends what buffer:N holds
      for (auto& q : queues_)
        if (q->runner != nullptr && q->runner->step == Step::kPoll) Wake(*q->runner, window_end);
    }
    if (next->t > deadline) break;
    last = next->t;
    StepActor(*next);
  }
  if (!in_window) a = Snapshot();
  if (!ended) b = Snapshot();
  bool drained = producers_left_ == 0;
  for (const auto& q : queues_)
    drained &= q->qdisc.empty() && !q->running && q->driver->InFlight() == 0 && q->waiters.empty();
  if (!drained) {
    unsigned purged = 0;
    for (auto& q : queues_) purged += q->qdisc.Purge() + q->driver->Purge();
    for (Actor& x : actors_) {
      if (x.held != nullptr) rte_pktmbuf_free(x.held), ++purged;
      if (!x.own.empty()) rte_pktmbuf_free_bulk(x.own.frames().data(), x.own.size());
      if (!x.batch.empty()) rte_pktmbuf_free_bulk(x.batch.frames().data(), x.batch.size());
    }
    return MakeError(EIO, fmt::format("the simulated drain did not finish within {:.1f} s of "
                                      "virtual time ({} frames freed); this is a txbatch bug",
                                      budget_s, purged));
  }

  QueueTotals totals;
  std::vector<RxSink*> sinks;
  for (auto& q : queues_) {
    totals.Add(*q->driver, q->qc, q->qdisc.backlog(), q->dev->bql_limit());
    sinks.push_back(q->sink.get());
  }
  CloseSinks(sinks, stats_);
  const SimQueue& first = *queues_.front();
  CellRun run{cfg_,
              *first.driver,
              totals.dc,
              totals.qc,
              totals.bql_limit,
              totals.backlog,
              totals.in_flight,
              *first.sink,
              stats_,
              a,
              b};
  run.tsc_hz = tsc_hz_;
  run.run_start = origin;
  run.window_start = window_start;
  run.window_end = window_end;
  run.stopped_at = window_end;
  run.drained_at = last;
  CellResult r = ResultOf(run, flow_seq);
  for (auto& q : queues_) {
    q->dev.reset();
    q->driver.reset();
  }
  r.books.mbufs_in_use = static_cast<uint64_t>(rte_mempool_in_use_count(pool_));
  r.books.balanced = Balanced(r.books);
  return r;
}

}  // namespace

std::optional<std::string> SimUnsupported(const CellConfig& cfg) {
  if (!cfg.driver_spec.emulated())
    return fmt::format(
        "--engine sim runs the emulated NIC only, not '{}'; valid: an emu: driver "
        "(emu:e1000, emu:ixgbe, emu:null, emu:ipoib-*), or --engine real",
        cfg.driver);
  if (cfg.nolock)
    return std::string(
        "--engine sim models the root-locked qdisc only; valid: --sync rootlock "
        "with --engine sim, or --engine real for --sync nolock");
  if (!(cfg.cost.tsc_hz > 0)) return std::string("the cost model's tsc_hz must be positive");
  if (std::llround(cfg.cost.frame) < 1)
    return std::string(
        "the cost model's frame cost must be at least 1 cycle (a producer that "
        "takes no time would never let the clock move)");
  return std::nullopt;
}

Result<CellResult> SimulateCell(const CellConfig& cfg, rte_mempool* pool,
                                std::vector<uint64_t>* flow_seq) {
  if (auto why = SimUnsupported(cfg)) return MakeError(EINVAL, *why);
  Simulation sim(cfg, pool);
  return sim.Run(flow_seq);
}

}  // namespace txbatch
