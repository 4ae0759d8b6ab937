#pragma once
// One TX queue of the simulation (--engine sim): its qdisc, its device side (NetdevQueue over the
// driver) and the state of its root lock, TX lock and txirq, stepped by the simulation's actors
// on a virtual clock. The qdisc run is QdiscRun's (dataplane/qdisc_run.h), the code the real
// queues run; here each phase is one actor step — the dequeue under the root lock, the driver
// call under the TX lock, the requeue under the root lock again — charged the cost model's
// cycles. The root and TX locks are futex mutexes (SimLock): an actor that finds one held
// sleeps and tries its step again when woken. With --sync nolock there is no root lock: producers
// enqueue into per-band bands and the run holds a flag (NolockTxQueue's MISSED and DRAINING notes,
// a note left when the flag goes rescheduling through the txirq); the flag costs `lock` to take or
// to lose. The queue's shared cache lines (the bands', the run flag's, the runner's condition
// variable's) move between CPUs (Line).
//
// Not thread-safe: the simulation has no threads. Public so that scripted tests can play a queue
// the way tests/unit/policy_run_test.cc plays the real ones.

#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "base/tsc.h"
#include "batching/batch.h"
#include "batching/flush_policy.h"
#include "dataplane/enqueue_step.h"
#include "dataplane/frame.h"
#include "dataplane/netdev_queue.h"
#include "dataplane/qdisc.h"
#include "dataplane/qdisc_run.h"
#include "dataplane/run_window.h"
#include "dataplane/rx_sink.h"
#include "dataplane/tx_driver.h"
#include "dataplane/tx_queue.h"
#include "engine/cost_model.h"

namespace txbatch {

// The cost model in whole cycles (rounded once, at setup: the virtual clock is an integer TSC).
struct SimCycles {
  SimCycles() = default;
  explicit SimCycles(const CostModel& c);
  static Tsc Round(double x) { return static_cast<Tsc>(std::llround(std::max(0.0, x))); }
  Tsc write = 0, frame = 0, lock = 0, lock_contended = 0, enqueue = 0, dequeue = 0,
      dequeue_frame = 0, run_xmit = 0, bypass = 0, xmit_call = 0, xmit_frame = 0, completion = 0,
      completion_frame = 0, deliver = 0, gso_segment = 0, futex = 0, context_switch = 0, wakeup = 0,
      remote_wake = 0, halt_after = 0, remote_wake_halted = 0, wakeup_halted = 0, timer_arm = 0,
      timer_wake = 0, timer_irq = 0, tick = 0, tick_interval = 0, pi_unlock = 0, pi_handover = 0,
      slice = 0, handover = 0, handover_bulk = 0, recycle = 0, deliver_remote = 0;
};

// The pool's recycling across CPUs, without the mbufs' identities (which mbuf the pool hands
// out depends on its caches' state before the cell: results must not): each frame the sink
// frees leaves a token naming the CPU whose cache holds its lines, and each mbuf a producer
// allocates takes the newest token — one from another CPU costs the producer `recycle` (the
// pool's shared stack, the mbuf's lines written again where another CPU has them). A frame's
// lines are one CPU's when the CPU that freed it is the only one that wrote it: its builder's,
// and the thread's that handed it to the driver (MarkHandover writes its TxMeta, in the mbuf's
// second line, which the next allocation's reset writes too: a dedicated runner on another CPU
// than the producers and their txirq makes every frame's lines move). Frames freed elsewhere (a
// drop, a purge, the link's losses) leave none; an allocation that finds none (the cell's first
// frames) costs nothing more. Off (nothing kept) when the model has no `recycle`.
class SimPoolCpus {
 public:
  explicit SimPoolCpus(bool on);
  // Off, or on with the mbuf's field it keeps the CPU in (none left: the simulation refuses the
  // cell rather than charge no `recycle`).
  bool ready() const { return !on_ || offset_ >= 0; }
  // The CPU of the step now running; -1 between steps (nothing is noted).
  void set_cpu(int cpu) { cpu_ = cpu; }
  int cpu() const { return cpu_; }
  // Each segment of a frame built by the step now running: written on its CPU alone.
  void Built(rte_mbuf* m);
  // A frame's first segment, written again by the step now running (its TxMeta, as it is
  // handed to the driver).
  void Written(rte_mbuf* m);
  void Written(std::span<rte_mbuf* const> frames) {
    for (rte_mbuf* m : frames) Written(m);
  }
  // A frame (each of its segments) freed by the step now running.
  void Freed(const rte_mbuf* m);
  // How many of `n` mbufs allocated now on `cpu` have their lines on another CPU.
  unsigned Reused(unsigned n, int cpu);

 private:
  static constexpr int16_t kSeveral = -2;  // written on more than one CPU: another's for anybody
  const bool on_;
  int offset_ = -1;  // the mbuf's dynamic field naming the CPU that wrote it (-1: none kept)
  int cpu_ = -1;
  std::vector<int> freed_on_;  // a stack: the newest last
};

// A lane's receiver as its driver sees it (the driver delivers here, inside a step): leaves on
// `pool` a token for each mbuf freed, counts the frames handed over on another CPU than their
// flow's producer's (`deliver_remote` each, charged in SimQueue::HandOn), and hands them to the
// sink.
class SimDelivery final : public FrameReceiver {
 public:
  // `count_remote`: the model charges `deliver_remote` (else nothing is counted).
  SimDelivery(FrameReceiver& sink, SimPoolCpus& pool, bool count_remote)
      : sink_(sink), pool_(pool), count_remote_(count_remote) {}
  // The CPU each flow's frames are built on (producer i's for flow i).
  void set_flow_cpus(std::vector<int> cpus) { flow_cpus_ = std::move(cpus); }
  void Receive(std::span<rte_mbuf* const> frames, std::span<const Tsc> arrival) override;
  uint64_t remote() const { return remote_; }

 private:
  FrameReceiver& sink_;
  SimPoolCpus& pool_;
  const bool count_remote_;
  std::vector<int> flow_cpus_;
  uint64_t remote_ = 0;
};

enum class SimRole : uint8_t { kProducer, kRunner, kIrq };

// What an actor does at its next step.
enum class SimStep : uint8_t {
  kBuild,    // producer: build the next frame (starting a write when the last one is done)
  kEnqueue,  // producer: put the frame built into the qdisc (or its own batch)
  kBlocked,  // producer: its band was full; woken when the runner frees room
  kDequeue,  // runner (any role): a bulk dequeue under the root lock
  kXmit,     // runner: hand the bulk to the driver under the TX lock
  kRequeue,  // runner: put what the driver refused back at the head
  kPoll,     // dedicated runner: is there something to send?
  kIrq,      // txirq: reclaim completions
  kIrqWait,  // txirq: read the next completion under the TX lock, then sleep until it
  kFlush,    // producer (--qdisc none): hand its own batch to the driver (the TX lock was held)
  kDone,
};

class SimQueue;

// A simulated thread, on one of the simulated CPUs (sim_engine.h, "CPUs and the scheduler").
struct SimActor {
  SimRole role = SimRole::kProducer;
  SimQueue* q = nullptr;  // the TX queue it sends on (producer i: queue i mod queues)
  unsigned index = 0;     // producer index; ties in time go to the lower actor number
  SimStep step = SimStep::kBuild;
  Tsc t = kNever;                  // when its next step happens (kNever: asleep until woken)
  Tsc busy = 0;                    // cycles of CPU it used inside the window
  SimStep home = SimStep::kBuild;  // where it goes back to when a qdisc run ends
  // The scheduler's.
  int cpu = -1;            // the CPU it runs on (-1: a CPU of its own, shared with nobody)
  bool fifo = false;       // SCHED_FIFO (the txirq): preempts whatever runs on its CPU
  bool queued = false;     // runnable, waiting for its CPU (t is kNever meanwhile; `want` holds it)
  bool lock_wait = false;  // asleep in a lock's futex: only the lock's release wakes it
  // When a notify woke it from a futex sleep (on its way: a later notify finds no waiter);
  // kNever since its last step.
  Tsc signalled = kNever;
  Tsc want = 0;    // queued: when it became runnable
  Tsc ran_to = 0;  // where its last step's CPU time ended (t beyond it: asleep between)
  // Asleep with a timer set for this time (kNever: none; a lock or a condition variable's wait
  // with no timeout): woken by it, the sleeper pays `timer_wake`; woken before, `timer_arm`.
  Tsc timer = kNever;
  Tsc timer_cost = 0;  // that cost, decided as its sleep ended, spent once it has its CPU
  FlushTrigger flush_why = FlushTrigger::kNone;  // kFlush: why its own batch goes
  Tsc send_t0 = kNever;  // kFlush: when its first try began (tx_cycles counts the retries)
  // Producer.
  unsigned flow = 0;   // the flow (its id) the current write goes to
  unsigned turn = 0;   // of its flows (0 ..), whose turn the next write is; finishing: to flush
  std::vector<unsigned> write;  // payloads of the current write's frames
  size_t next_frame = 0;
  bool finishing = false;  // generation stopped: these are the corked remainder
  rte_mbuf* held = nullptr;
  unsigned held_payload = 0;
  bool held_waited = false;
  bool tsq_throttled = false;  // asleep until TCP Small Queues let it send (tsq.h)
  double next_pace = 0;
  LatencySampler sampler;  // which of its frames carry a stamp (--latency-sample)
  Batch own;  // --qdisc none: its own batch
  Tsc own_first = 0;
};

// A mutex of the simulated queue, as the real queues' are futex mutexes: free from `free_at`,
// last let go by `holder`. A thread that finds it held enters the kernel (futex_wait) and sleeps;
// the holder, letting go, enters it too to wake one sleeper, which runs after the wake-up's
// latency. A plain mutex (the root lock, std::mutex) is free meanwhile: whoever comes first takes
// it and the woken thread may find it held again and sleep again (glibc's lll_lock_wait /
// lll_unlock_wake). A priority-inheriting one (the TX lock, PiMutex) is handed to the woken
// thread by the kernel (FUTEX_UNLOCK_PI): nobody else takes it until that thread has run.
struct SimLock {
  explicit SimLock(bool handoff = false) : handoff(handoff) {}
  bool handoff;
  // Free from free_at, let go there by holder: the last release stepped, the latest (a take is
  // never before it).
  Tsc free_at = 0;
  SimActor* holder = nullptr;
  // The sleeper a release woke, on its way; `handed`: the lock is kept for it (a handoff lock).
  SimActor* woken = nullptr;
  bool handed = false;
  std::vector<SimActor*> sleepers;  // asleep for a later release, in the order they slept
  // The check that nobody takes it while another holds it (a guard: every take is at or after
  // the last release, and every hold is let go in the step that took it; until 2026-12-04 a
  // take could come before a hold already stepped): who holds it now, and how many takes found
  // it held — by a hold not let go, or one let go after the take's time.
  const SimActor* holding = nullptr;
  uint64_t overlaps = 0;
};

// A simulated CPU's idle, for the host's halt (CostModel::halt_after): where the CPU time of the
// last step on it ended, whether a step runs on it now, and whether its last idle stretch lasted
// longer than halt_after — the host stops polling for a vCPU that halted that long (KVM's
// halt_poll_ns shrinks to 0), so its next stretch is halted however short (seen on this
// project's guest: after a 300 us or 1 ms idle, the wake that ends the next 10 us one costs 29
// thousand cycles, the one after 9-10).
struct SimIdle {
  Tsc busy_to = 0;
  bool stepping = false;
  bool after_long = false;
  // A step on it begins at `start` / ends its CPU time at `ran_to`.
  void Begin(Tsc start, Tsc halt_after) {
    if (start > busy_to) after_long = start - busy_to > halt_after;
    stepping = true;
  }
  void End(Tsc ran_to) {
    busy_to = std::max(busy_to, ran_to);
    stepping = false;
  }
  // Whether a wake at `at` finds it halted, its threads' CPU time having ended at `since` (at
  // least busy_to: a call or an interrupt added to a step after it ended, Lengthen, is past it).
  // `step_ends`: the step running on it ends at `since` (a thread woken from the futex call that
  // ended its step).
  bool Halted(Tsc at, Tsc halt_after, Tsc since, bool step_ends = false) const {
    since = std::max(since, busy_to);
    return (!stepping || step_ends) && at > since && (at - since > halt_after || after_long);
  }
};

// The CPU time every actor step is charged: the cost model and the measurement window.
struct SimCpu {
  const SimCycles& c;
  const RunWindow& window;
  // Each CPU's idle (the simulation's, kept as its steps begin and end; none: no CPU halts), and
  // every actor (none: a CPU's record alone says whether it idles).
  std::vector<SimIdle>* idle = nullptr;
  const std::vector<SimActor>* actors = nullptr;
  // The simulation's count of voluntary switches (none: not counted), which a step that ends
  // asleep adds to: a wait whose notify catches it in its call takes that one back.
  uint64_t* voluntary = nullptr;
  // `a` uses `cycles` of CPU from `at`: busy where the window holds `at`.
  void Charge(SimActor& a, Tsc at, Tsc cycles) const {
    if (window.Contains(at)) a.busy += cycles;
  }
  void Work(SimActor& a, Tsc cycles) const {
    Charge(a, a.t, cycles);
    a.t += cycles;
    a.ran_to = a.t;
  }
  // `a` runs on to `t`: a driver call's device work (the emulated doorbell's and descriptors'
  // busy-waits, CPU time on the real engine too).
  void RunTo(SimActor& a, Tsc t) const {
    if (t > a.t) Work(a, t - a.t);
  }
  // Whether a wake by `from` reaches `to` across CPUs (the wake-up's latency then).
  // `a`'s last step takes `cycles` more from `from` (a call added to it, an interrupt or a
  // preemption inside it): its CPU time ends later, and so does its next step where it went
  // straight on; asleep without a timer after it, its wake respects ran_to.
  static void Lengthen(SimActor& a, Tsc from, Tsc cycles) {
    const bool straight_on = a.t == a.ran_to;
    a.ran_to = std::max(a.ran_to, from) + cycles;
    if (a.t != kNever) a.t = straight_on ? a.ran_to : std::max(a.t, a.ran_to);
  }
  static bool Remote(const SimActor& from, const SimActor& to) {
    return from.cpu < 0 || to.cpu < 0 || from.cpu != to.cpu;
  }
  // Whether `to`, asleep, is on a CPU halted at `at` (CostModel::halt_after, SimIdle): no step
  // runs there, no thread there is due by `at` or waits for it (steps are stepped one at a time:
  // one due may not have been stepped yet), and their CPU time ended long enough before. Never on
  // a CPU of its own (cost.cpus 0: no scheduler). `to_stepping`: `to` runs the step now, which
  // ends (asleep) at to.ran_to, before `at`.
  bool Halted(const SimActor& to, Tsc at, bool to_stepping = false) const;
  // What the futex call that wakes a sleeper costs its waker: `remote_wake` more across CPUs
  // (`remote_wake_halted` where the sleeper's CPU is halted).
  Tsc WakeCall(bool remote, bool halted = false) const {
    return c.futex + (remote ? (halted ? c.remote_wake_halted : c.remote_wake) : 0);
  }
  // The wake-up's latency after that call: across CPUs `wakeup` (`wakeup_halted`).
  Tsc WakeLatency(bool remote, bool halted) const {
    return remote ? (halted ? c.wakeup_halted : c.wakeup) : 0;
  }
  // `a` takes `l` at a.t: true when it holds it (paying the acquisition, and the line's move
  // from the last holder's core when it had to wait; a spinner has it at the hand-over,
  // nothing more). False when it is held: `a` has gone to sleep (its t the wake-up, or kNever
  // until a release wakes it), or — a plain mutex let go during its futex call — is back from
  // the call (EAGAIN, its t the call's end), and tries its step again then, so a step takes its
  // lock before anything else it does.
  bool Acquire(SimActor& a, SimLock& l) const;
  // `a`, holding `l`, lets go of it at a.t, waking its first sleeper (a futex call of its own).
  void Release(SimActor& a, SimLock& l) const;
  // A spin lock free from `free_at` (the receiver's): `a` spins until then (CPU time).
  void Spin(SimActor& a, Tsc free_at) const {
    if (free_at > a.t) Work(a, free_at - a.t + c.lock_contended);
    Work(a, c.lock);
  }
  // Wakes a sleeping `a` at `at`, or where its last step ended if that is later (a step is
  // stepped whole: a wake from another actor's earlier time finds it past it). A runnable one
  // keeps its time; one waiting for its CPU keeps its place, runnable from `at` at the latest.
  static void Wake(SimActor& a, Tsc at) {
    if (a.lock_wait) return;
    if (a.queued) {
      a.want = std::min(a.want, at);
      return;
    }
    const Tsc when = std::max(at, a.ran_to);  // not before its own last step ended
    if (a.t == kNever || a.t > when) a.t = when;
  }
  // Whether `a` sleeps where a condition variable's notify would wake it: not runnable, not
  // waiting for its CPU, not asleep in a lock's futex (which only the lock's release wakes).
  static bool Asleep(const SimActor& a, Tsc at) {
    return !a.queued && !a.lock_wait && (a.t == kNever || a.t > std::max(at, a.ran_to));
  }
  // Whether no other thread has run on `a`'s CPU since `a`'s last step ended (a waiter still in
  // its futex call has its CPU; one the scheduler switched from is asleep). Without the actors,
  // true.
  bool CpuKeptSince(const SimActor& a) const {
    if (actors == nullptr || a.cpu < 0) return true;
    for (const SimActor& x : *actors)
      if (&x != &a && x.cpu == a.cpu && x.ran_to > a.ran_to) return false;
    return true;
  }
  // `from` wakes `a` at `at` (from.t or before) through a futex: a condition variable's
  // notify_one (a blocked producer, the dedicated runner, the txirq's kick, a TCP Small Queues
  // release). As WakeAllFrom with `a` alone.
  void WakeFrom(SimActor& from, SimActor& a, Tsc at) const {
    SimActor* const one[] = {&a};
    WakeAllFrom(from, one, at);
  }
  // `from` wakes each of `all` at `at` with one futex call (notify_all). Where one sleeps,
  // `from` pays the call — with the IPI (`remote_wake`) where one is on another CPU — and each
  // sleeper runs after the call and, across CPUs, the wake-up's latency. One already woken by a
  // notify at or before `at` is on its way: nothing (glibc finds no waiter). One woken by a
  // later notify (steps are stepped whole: an earlier notify can be stepped after a later one)
  // is woken by this one instead, sooner; the later waker's call is not taken back. One awake
  // needs no call. One whose wait began less than a `futex` call before `at`, its CPU not given
  // to another thread since, is still in that call: it finds the signal before it sleeps (glibc
  // reads __g_signals, the kernel the futex word) and returns at the call's end — no sleep, no
  // wake-up's latency, no timer armed — and the notify's futex call finds nobody to wake (no IPI).
  // (Until 2026-12-04 it slept: a dedicated runner on the real engine went to sleep after ~1 run in
  // 5 where the simulation's slept after each, each sleep a timer armed and a wake across CPUs.)
  void WakeAllFrom(SimActor& from, std::span<SimActor* const> all, Tsc at) const {
    const auto in_call = [&](const SimActor& a) {
      return a.signalled == kNever && Asleep(a, at) && at < a.ran_to + c.futex && CpuKeptSince(a);
    };
    const auto sleeping = [&](const SimActor& a) {
      return a.signalled != kNever ? at < a.signalled : Asleep(a, at) && !in_call(a);
    };
    bool any = false, caught = false, remote = false, halted = false;
    for (const SimActor* a : all) {
      caught |= in_call(*a);
      if (sleeping(*a)) {
        any = true;
        remote |= Remote(from, *a);
        halted |= Remote(from, *a) && Halted(*a, at);
      }
    }
    // Nobody asleep: no call (a waker asleep itself, the txirq giving back a kick it took as
    // it went to sleep in the TX lock, must not be moved to its wake-up).
    const Tsc call = any ? WakeCall(remote, halted) : caught ? c.futex : 0;
    if (call > 0) Work(from, call);
    for (SimActor* a : all) {
      if (a->signalled != kNever && at >= a->signalled) continue;
      if (in_call(*a)) {
        // Its step's switch is taken back where both are on one side of the window's edges
        // (a snapshot between them would count it once and its take-back again).
        const auto side = [this](Tsc t) { return (t >= window.start) + (t >= window.end); };
        if (voluntary != nullptr && *voluntary > 0 && side(a->ran_to) == side(at)) --*voluntary;
        a->signalled = at;
        a->timer = kNever;
        Charge(*a, a->ran_to, c.futex);
        a->ran_to += c.futex;
        a->t = a->ran_to;
        continue;
      }
      const bool woken = sleeping(*a);
      if (woken) a->signalled = at;
      // Read before it is woken (a thread due by `at` there is not halted).
      const bool remote_a = Remote(from, *a);
      Wake(*a, at + (woken ? call : 0) + WakeLatency(remote_a, remote_a && Halted(*a, at)));
    }
  }
};

class SimQueue {
 public:
  // `config`: QueueConfigFor's — its shape, txqueuelen, bql, bypass, block_when_full,
  // segment_gso, track_stages, tx_lock_inherits and tsc_hz are read. `sink`
  // (may be null) is where the driver delivers: what it handles in a step costs `deliver` each.
  // `clock` is the driver's clock, set to the stepping actor's time before each driver call.
  SimQueue(TxDriver& driver, RxSink* sink, const FlushPolicy& policy, const TxQueueConfig& config,
           const SimCpu& cpu, VirtualClock& clock);

  // The actors that play this queue's txirq and (--runner dedicated) its runner, the CPU each
  // flow's frames are built on (a frame dequeued on another CPU costs `handover`), and what its
  // driver delivers through (null: no frame costs `deliver_remote`).
  void Attach(SimActor* irq, SimActor* runner, std::vector<int> flow_cpus = {},
              const SimDelivery* delivery = nullptr, SimPoolCpus* pool = nullptr) {
    irq_ = irq;
    runner_ = runner;
    flow_cpus_ = std::move(flow_cpus);
    delivery_ = delivery;
    pool_ = pool;
  }

  // Producer `p`, at p.t, puts `m` (ownership moves on kDone) into `band` under the root lock,
  // EnqueueStep's phases as the real queues take them. `waited`: it was blocked, so the frame is
  // restamped. A full band: kWait (a stream's producer: to Block; m stays the caller's) or
  // kDropped (counted; the caller frees m). Then, as Send, dropped or not: wakes the dedicated
  // runner, or starts a run by `p` (p.step becomes kDequeue) when nobody runs.
  // kRetry: the root lock was held; `p` steps again when Acquire says (m stays the caller's).
  enum class Put : uint8_t { kDone, kWait, kDropped, kRetry };
  Put Enqueue(SimActor& p, rte_mbuf* m, int band, bool waited);
  // `p` sleeps until a run frees room (p.t becomes kNever).
  void Block(SimActor& p);

  // --qdisc none: `p` hands `own` to the driver under the TX lock (TxQueue::SendBatch); the
  // accepted leave `own`, the refused stay for the caller to drop. Nothing when `p` steps again
  // first: it cut own's GSO frames into segments (a step of its own), or the TX lock was held
  // (`p` sleeps and tries again; nothing else changed).
  std::optional<uint16_t> SendBatch(SimActor& p, Batch& own);

  // A qdisc run by `a`, begun (counted as a run or, `resched`, a reschedule) or stepped: one of
  // its phases per call while a.step is kDequeue, kXmit or kRequeue. When it ends a.step is
  // a.home again.
  void BeginRun(SimActor& a, bool resched);
  void StepRun(SimActor& a);

  // The txirq's reclaim at irq.t (TxQueue::Completion): may begin a run by `irq`, when the
  // reclaim restarted a stopped queue or `resched` (a run spent its quota) asks for one. False
  // when the TX lock was held: `irq` sleeps and tries again (nothing done).
  bool Complete(SimActor& irq, bool resched);
  // The driver's next completion, read by `irq` at irq.t under the TX lock, as IrqLoop reads
  // it before each sleep. Nothing when the lock was held: `irq` sleeps and tries again.
  std::optional<Tsc> NextCompletion(SimActor& irq);
  // `from` tells the txirq: the queue stopped, or (`resched`) a run spent its quota.
  void Kick(SimActor& from, bool resched);
  bool kicked() const { return irq_kicked_ || irq_resched_; }
  // The txirq wakes: what it was told since it last woke (whether a reschedule was asked for),
  // forgotten now.
  bool TakeKicks();

  // A dedicated runner's poll at r.t (`draining`: generation ended): begins a run, or sets r.t
  // to when it looks again (kNever: when woken).
  void Poll(SimActor& r, bool draining);
  // By `from` (the wake-up's latency across CPUs), or by the engine (null: at `at`).
  // A runner woken and on its way has not yet confirmed its wake-up (glibc's __wrefs), so a
  // notify meanwhile still takes the condition variable's internal lock and finds no one to
  // wake (pthread_cond_signal): `lock` and its line; an asleep one costs the futex call
  // (SimCpu::WakeFrom). The lock-free queue's notifier takes runner_mu_ around either (`lock`).
  void WakeRunner(SimActor* from, Tsc at);

  // Nothing queued, nobody running or blocked, nothing in the driver.
  bool Drained() const;
  // A qdisc run is in progress (a bulk may be in its runner's hand, on its way to the driver).
  bool running() const { return running_; }
  // Holds of one of its locks that overlapped another's: a bug of the simulation (sim_engine.cc
  // refuses the cell's result).
  uint64_t lock_overlaps() const { return root_.overlaps + tx_.overlaps; }
  // Frees what an abandoned run left (qdisc, the bulk in hand, the driver); returns how many.
  unsigned Purge();

  TxDriver& driver() { return driver_; }
  const TxDriver& driver() const { return driver_; }
  NetdevQueue& dev() { return dev_; }
  Qdisc& qdisc() { return *qdisc_; }
  const Qdisc& qdisc() const { return *qdisc_; }
  TxQueueCounters& counters() { return qc_; }
  const TxQueueCounters& counters() const { return qc_; }

 private:
  // The run's bulk dequeue under the root lock: taken here, or (`held`) still held from the
  // enqueue that began the run; let go here either way.
  void Dequeue(SimActor& a, bool held);
  // `handover` for each frame of the bulk in hand that was built on another CPU than `a`'s (a
  // GSO frame once: the CPU reads its head's lines; the NIC reads the slices' data), and
  // `handover_bulk` once if there is one: the qdisc's lines its producers wrote (calibrate fits
  // it from a dedicated runner's dequeue against the producer's own calls), the band's line
  // (`band`, Line) at least. Without one, the band's line alone. Returns what the dequeue pays,
  // under the root lock: the bulk's, and half of each frame's — the dequeue reads each frame's
  // length (BulkLimit::Took), its first line; the other half, the handover's write of its TxMeta
  // (MarkHandover, the second line), is left in handover_due_ for Xmit, before the TX lock. (The
  // real runner's samples split so: DequeueBulk 17 %, MarkHandover 9 %, a store of a few fields;
  // all under the root lock, as until 2026-12-04, held it 4-5 thousand cycles a bulk of 20 and put
  // the producer to sleep in it after most bulks.)
  Tsc Handovers(const SimActor& a, Tsc band);
  // --offload gso: cuts `batch`'s GSO frames into segments (SegmentBatch) on `a`'s CPU; whether
  // it cut any.
  bool Segment(SimActor& a, Batch& batch);
  void Xmit(SimActor& a);
  void Requeue(SimActor& a);
  void Settle(SimActor& a);
  void EndRun(SimActor& a);
  // The queue's shared cache lines: the bands' ring indices, which every enqueue and dequeue
  // writes (either queue), NolockTxQueue's run flag with its notes, which every try and every
  // run's end writes, and the dedicated runner's condition variable, which its wait and a notify
  // to it write. One written last on another CPU moves to `a`'s first: `lock_contended`, as the
  // root lock's line (until 2026-12-04 nothing: two lock-free producers on two CPUs ran 3-4
  // times the real engine's rate). Returns the cost; `a` writes it now.
  Tsc Line(const SimActor& a, const SimActor*& last);
  const SimActor* band_last_ = nullptr;  // the thread that wrote each last (none yet)
  const SimActor* flag_last_ = nullptr;
  const SimActor* runner_cv_last_ = nullptr;  // the dedicated runner's condition variable's
  // `resched`: a run spent its quota (or a note was left) and asked for this one.
  void Restart(SimActor& irq, bool resched);
  // --sync nolock: Enqueue without a root lock (NolockTxQueue::Send).
  Put EnqueueNolock(SimActor& p, rte_mbuf* m, int band, bool waited);
  // After a lock-free enqueue, or a drop (`put`): the runner woken, or the run flag taken (a run
  // begun by `p`) or the note left for its holder.
  Put AfterNolockEnqueue(SimActor& p, Put put);
  // `m` goes to the driver as the first bulk of a run by `p` (the empty-qdisc bypass).
  void Bypass(SimActor& p, rte_mbuf* m);
  // The frames the sink was handed so far, and of them those handed over on another CPU than
  // they were built on.
  struct Handed {
    uint64_t frames = 0, remote = 0;
  };
  Handed Handled() const {
    return {sink_ != nullptr ? sink_->handled() : 0,
            delivery_ != nullptr ? delivery_->remote() : 0};
  }
  // Ends a TX-lock section of `a`'s: lets the TX lock go and hands the sink's frames handled
  // since `before` on after it, as the real queue does (DeferredReceiver): `deliver` each on
  // `a`, and `deliver_remote` more each built on another CPU, under the receiver's lock (waited
  // for once the TX lock is let go), booked as rx_cycles (the lock included) and rx_frames.
  void HandOn(SimActor& a, Handed before);

  TxDriver& driver_;
  RxSink* sink_;
  const SimDelivery* delivery_ = nullptr;
  SimPoolCpus* pool_ = nullptr;  // where frames handed to the driver were written (null: nowhere)
  const FlushPolicy& policy_;
  const TxQueueConfig config_;
  const SimCpu cpu_;
  VirtualClock& clock_;
  TxQueueCounters qc_;
  NetdevQueue dev_;
  std::unique_ptr<Qdisc> qdisc_;
  const EnqueueStep enqueue_;
  QdiscRun<Qdisc> run_;  // the current run's (one at a time: running_)
  SimActor* irq_ = nullptr;
  SimActor* runner_ = nullptr;
  std::vector<SimActor*> waiters_;  // blocked producers, in the order they blocked
  std::vector<int> flow_cpus_;
  SimLock root_;
  SimLock tx_;  // its TX lock: a handoff one where it inherits priority (tx_lock_inherits)
  Tsc first_enqueued_ = 0;
  Tsc rx_free_ = 0;  // when the receiver's lock is next free
  Tsc run_t0_ = 0;   // the current bulk's start (tx_cycles)
  Tsc handover_due_ = 0;  // the bulk's handover left for its Xmit (Handovers)
  uint16_t accepted_ = 0;
  bool handed_over_ = false;  // between the driver call and Settle: accepted_ are the driver's
  const int meta_offset_;     // TxMetaOffset() with config.track_stages, else -1
  const Tsc idle_poll_;       // kIrqIdlePoll: the longest a dedicated runner sleeps, generating
  bool running_ = false, resched_pending_ = false;
  QdiscNotes<SimFlag> notes_;  // --sync nolock: MISSED and DRAINING
  bool irq_kicked_ = false, irq_resched_ = false;
};

}  // namespace txbatch
