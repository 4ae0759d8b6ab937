#pragma once
// The simulation engine's inside (sim_engine.h): the simulated CPUs, a queue's lane and the
// Simulation that steps a cell's actors, shared by sim_engine.cc (the scheduler, the txirq and
// the cell) and sim_producers.cc (the producers' steps). Nothing outside the engine's two files
// includes it.

#include <rte_mempool.h>

#include <chrono>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "base/error.h"
#include "base/tsc.h"
#include "batching/flush_policy.h"
#include "dataplane/producer.h"
#include "dataplane/run_window.h"
#include "dataplane/rx_sink.h"
#include "dataplane/tsq.h"
#include "dataplane/tx_driver.h"
#include "dataplane/workload.h"
#include "engine/cell.h"
#include "engine/sim_queue.h"

namespace txbatch::sim_detail {

// A producer that found the pool empty sleeps this long before trying again (RunProducer's).
inline constexpr double kAllocBackoffS = 20e-6;
// The shortest tick_interval a cost model may give (ticks more often would make a cell's steps
// mostly ticks).
inline constexpr long long kMinTickInterval = 1000;

// The virtual TSC at the cell's start: any origin but 0 (the NIC reads 0 as "never sent").
inline constexpr double kOriginS = 1.0;

// A simulated CPU: the CFS thread on it and those waiting their turn (a SCHED_FIFO thread
// runs whenever it is runnable, ahead of them).
struct SimCore {
  SimActor* cur = nullptr;         // the CFS thread it runs (asleep or not), or nobody yet
  Tsc slice_end = 0;               // cur's turn ends here when others wait
  std::deque<SimActor*> runnable;  // waiting for it, in the order they became runnable
  // The SCHED_FIFO thread's last preemption: of whom, by whom, and up to where that thread had
  // been pushed back; `fifo_on`: the FIFO thread went straight on from it (no sleep since), so
  // its next step is the same preemption (as is one after a sleep that ends before the thread
  // had its CPU back: AfterStep).
  SimActor* preempted = nullptr;
  const SimActor* fifo = nullptr;
  Tsc fifo_until = 0;
  bool fifo_on = false;
  Tsc next_tick = kNever;  // its next tick (CostModel::tick)
};

// The TX queue's sink and driver; the queue (sim_queue.h) refers to both.
struct Lane {
  std::unique_ptr<RxSink> sink;
  std::unique_ptr<SimDelivery> delivery;  // the driver's receiver: the sink, CPUs noted
  std::unique_ptr<TxDriver> driver;
  std::unique_ptr<SimQueue> q;
};

class Simulation {
 public:
  Simulation(const CellConfig& cfg, rte_mempool* pool)
      : cfg_(cfg),
        c_(cfg.cost),
        cpu_{c_, window_, &idle_, &actors_, &switches_.voluntary},
        tsc_hz_(cfg.cost.tsc_hz),
        pool_(pool),
        stats_(Flows(cfg)),
        policy_(MakeFlushPolicy(cfg.policy, tsc_hz_)),
        idle_poll_(
            static_cast<Tsc>(std::chrono::duration<double>(kIrqIdlePoll).count() * tsc_hz_)) {}

  Result<CellResult> Run(std::vector<uint64_t>* flow_seq);

 private:
  // A cell's life, in Run's order. The lanes (a queue's sink, hand-off, driver and queue) and
  // TCP Small Queues; the actors (producers, runners, txirqs) on their CPUs, the flows' builders
  // and the CPUs' ticks; every step until the drain's deadline; the books and the result.
  struct Stepped {
    CounterSnapshot a{}, b{};          // at the window's start and end
    Tsc last = 0;                      // the last step's start
    std::optional<TsqSummary> tsq;     // TCP Small Queues over the window, where active
  };
  void BuildLanes(const std::vector<uint64_t>& first_seq);
  void PlaceActors(Tsc origin, const std::vector<uint64_t>& first_seq);
  Stepped StepAll(Tsc origin, Tsc window_start, Tsc window_end, Tsc deadline);
  Result<CellResult> Conclude(const Stepped& stepped, double budget_s, Tsc origin,
                              std::vector<uint64_t>* flow_seq);

  // Scheduling.
  SimActor* Earliest();
  void StepActor(SimActor& a);
  // Whether `a` may step now on its CPU: false when it waits for it (queued) or was moved in
  // time (a switch onto its CPU): pick again.
  bool Dispatch(SimActor& a);
  // After `a`'s step that began at `start`: a FIFO step delays what it preempted; a CFS thread
  // that sleeps or spent its turn gives its CPU to the next that waits.
  void AfterStep(SimActor& a, Tsc start);
  // `core` runs the next thread that waits for it, from `at` (a context switch).
  void Switch(SimCore& core, Tsc at);
  // CPU `cpu` was busy from `start` to `end` outside a step (a switch onto it): not idle.
  void Busy(int cpu, Tsc start, Tsc end) {
    if (cpu < 0 || idle_.empty()) return;
    SimIdle& idle = idle_[static_cast<size_t>(cpu)];
    idle.Begin(start, c_.halt_after);
    idle.End(end);
  }
  // The interrupt of `a`'s timer, fired at `at`, on its CPU: the thread running there loses
  // timer_irq; returns whether one was (an idle CPU loses nothing).
  bool TimerInterrupt(const SimActor& a, Tsc at);
  // An interrupt on `core` at `at` that costs the CFS thread running there (not `except`)
  // `cycles`: its step ends that much later. Returns whether one was running.
  bool Interrupt(SimCore& core, const SimActor* except, Tsc at, Tsc cycles);
  // The earliest CPU tick due at or before `t` (the CPU's own timer and what else interrupts a
  // busy CPU: `tick` every `tick_interval`), or nullptr.
  SimCore* TickDue(Tsc t);

  // Producers.
  void Build(SimActor& p);
  void Enqueue(SimActor& p);
  void Finish(SimActor& p);
  void FlushOwn(SimActor& p, FlushTrigger why);
  // The txirq: reclaims, and sleeps until the driver's next completion or a kick.
  void Irq(SimActor& irq);
  void IrqSleep(SimActor& irq);
  bool Generating() const { return producers_left_ > 0; }
  CounterSnapshot Snapshot() const;

  const CellConfig& cfg_;
  const SimCycles c_;
  RunWindow window_;
  // Its actors' context switches: a step after which the actor sleeps (voluntary), a turn spent
  // or a preemption by the txirq (involuntary). Before cpu_, which counts into it.
  ContextSwitches switches_;
  const SimCpu cpu_;
  const double tsc_hz_;
  rte_mempool* pool_;
  VirtualClock clock_;
  std::vector<ProducerStats> stats_;
  std::vector<FrameBuilder> builders_;
  std::vector<Segmenter> segmenters_;
  std::unique_ptr<FlushPolicy> policy_;
  std::optional<TsqLedger> tsq_;  // TCP Small Queues (TsqActive): outlives the drivers
  std::vector<Lane> lanes_;
  const Tsc idle_poll_;
  // Producers, then each queue's dedicated runner (if any), then each queue's txirq.
  std::vector<SimActor> actors_;
  std::vector<SimCore> cores_;    // empty: every actor on a CPU of its own (cost.cpus 0)
  std::vector<SimIdle> idle_;     // each CPU's idle, for the host's halt (as cores_)
  std::vector<SimCore*> ticking_;  // the CPUs a thread runs on, where the model has ticks
  SimActor* stepping_ = nullptr;  // the actor whose step runs
  SimPoolCpus pool_cpus_{c_.recycle > 0};  // which CPU has the lines of the mbufs freed
  bool draining_ = false;
  unsigned producers_left_ = 0;
  double interval_ = 0;  // --rate: TSC between a producer's frames
  double probe_interval_ = 0;  // --probe: TSC between the probe's frames
  Tsc stop_at_ = kNever;
  // The probe (--probe), the last producer: UDP datagrams at its own pace, never throttled.
  bool IsProbe(const SimActor& p) const { return p.index >= cfg_.procs; }
  // Picks the flow of `p`'s next write (RunProducer's turn: the next one TSQ does not hold
  // back); finishing, the next flow with a corked remainder. Returns false when none is left.
  bool NextWrite(SimActor& p);
  double Interval(const SimActor& p) const { return IsProbe(p) ? probe_interval_ : interval_; }
};

}  // namespace txbatch::sim_detail
