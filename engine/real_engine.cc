#include "engine/real_engine.h"

#include <fmt/format.h>
#include <pthread.h>
#include <sys/resource.h>

#include <algorithm>
#include <thread>

#include "base/thread_clock.h"
#include "dataplane/make_queue.h"
#include "dataplane/mempool.h"
#include "dataplane/producer.h"
#include "dataplane/run_window.h"
#include "dataplane/rx_sink.h"
#include "dataplane/tsq.h"
#include "dataplane/tx_queue.h"

namespace txbatch {
namespace {

ContextSwitches ProcessCtxsw() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return {static_cast<uint64_t>(ru.ru_nvcsw), static_cast<uint64_t>(ru.ru_nivcsw)};
}

// One cell on threads and the TSC, in the order of its life: Build (sinks, hand-offs, drivers,
// queues, TCP Small Queues, the producers' configurations), Start (the txirqs and runners, the
// producers), Measure (warm-up, the window's snapshots, TSQ's samples), Drain (generation stops;
// everything empties under one deadline) and Conclude (totals, books, the result).
class RealCell {
 public:
  RealCell(const CellConfig& cfg, rte_mempool* pool, double tsc_hz, const std::vector<int>& cpus,
           const std::atomic<bool>& stop, std::vector<uint64_t>* flow_seq)
      : cfg_(cfg),
        pool_(pool),
        tsc_hz_(tsc_hz),
        cpus_(cpus),
        stop_(stop),
        flow_seq_(flow_seq),
        nq_(std::max(1u, cfg.queues)),
        nprod_(Producers(cfg)),
        stats_(Flows(cfg)) {}

  Result<CellResult> Run() {
    if (Status st = Build(); !st) return st.error();
    Start();
    Measure();
    if (Status st = Drain(); !st) return st.error();
    return Conclude();
  }

 private:
  Status Build();
  void Start();
  void Measure();
  Status Drain();
  CellResult Conclude();
  CounterSnapshot Snapshot();
  // Sleeps for `seconds` unless a signal asks to stop; returns false if it did. With `sampler`,
  // samples TCP Small Queues every kTsqSampleS meanwhile.
  bool SleepFor(double seconds, TsqSampler* sampler);
  bool Idle() const {
    for (const auto& q : queues_)
      if (!q->Idle()) return false;
    return true;
  }

  const CellConfig& cfg_;
  rte_mempool* const pool_;
  const double tsc_hz_;
  const std::vector<int>& cpus_;
  const std::atomic<bool>& stop_;
  std::vector<uint64_t>* const flow_seq_;
  const unsigned nq_, nprod_;
  RunWindow window_;
  std::vector<std::unique_ptr<RxSink>> sinks_;
  std::vector<RxSink*> sink_ptrs_;
  std::vector<std::unique_ptr<DeferredReceiver>> handoffs_;
  std::optional<TsqLedger> tsq_;  // TCP Small Queues: outlives the drivers that release into it
  std::vector<std::unique_ptr<TxDriver>> drivers_;
  std::unique_ptr<FlushPolicy> policy_;
  std::vector<std::unique_ptr<TxQueue>> queues_;
  WireSpec wire_;
  ProducerConfig pcfg_, probe_cfg_;
  std::vector<ProducerStats> stats_;
  std::atomic<bool> stop_producers_{false};
  std::atomic<unsigned> producers_done_{0};
  std::vector<std::thread> producers_;
  // The life's moments, and what was measured.
  Tsc run_start_ = 0, window_end_ = 0, stopped_at_ = 0, drained_at_ = 0;
  bool completed_ = false;
  CounterSnapshot a_{}, b_{};
  std::optional<TsqSummary> tsq_summary_;
  std::optional<CellResult::Machine> machine_;  // what the machine did to the window
};

Status RealCell::Build() {
  const std::vector<uint64_t> first_seq = FirstSeqs(cfg_, flow_seq_);
  // One TX queue each (--queues): a sink (its txirq delivers to it alone), a driver and the
  // queue; on emu their rings share one wire.
  for (unsigned q = 0; q < nq_; ++q) {
    sinks_.push_back(MakeCellSink(cfg_, window_, tsc_hz_, first_seq));
    sink_ptrs_.push_back(sinks_.back().get());
  }
  // The drivers deliver into a hand-off each: the sink runs after the TX lock, booked apart.
  std::vector<FrameReceiver*> receivers;
  for (RxSink* s : sink_ptrs_) {
    handoffs_.push_back(
        std::make_unique<DeferredReceiver>(*s, /*inherit=*/TxLockInherits(cfg_, cpus_.size())));
    receivers.push_back(handoffs_.back().get());
  }
  auto created = CreateDrivers(cfg_.driver_spec, pool_, cfg_.mtu, receivers, window_, tsc_hz_,
                               cfg_.link ? &*cfg_.link : nullptr);
  if (!created) return created.error();
  drivers_ = std::move(*created);
  const TxDriver& driver = *drivers_.front();
  policy_ = MakeFlushPolicy(cfg_.policy, tsc_hz_);
  TxQueueConfig qcfg = QueueConfigFor(cfg_, tsc_hz_, cpus_);
  // Stage timestamps cost ~4 ns a frame: only where a sink will read them.
  qcfg.track_stages = cfg_.timing && driver.counted_at() != CountedAt::kDriver;
  for (unsigned q = 0; q < nq_; ++q) {
    TxQueueConfig own = qcfg;
    own.receiver = handoffs_[q].get();
    own.index = q;
    queues_.push_back(MakeTxQueue(*drivers_[q], *policy_, own, window_));
  }

  wire_ = driver.Wire().value_or(WireSpec{});
  ProducerConfig& pcfg = pcfg_;
  pcfg.proto = cfg_.proto;
  pcfg.size = cfg_.size;
  pcfg.mtu = cfg_.mtu;
  pcfg.procs = cfg_.procs;
  pcfg.flows = cfg_.flows;
  pcfg.tsc_hz = tsc_hz_;
  pcfg.cpus = cpus_;
  if (cfg_.shape.noqueue) pcfg.own_batches = policy_.get();
  pcfg.track_stages = qcfg.track_stages;
  pcfg.stamp = cfg_.timing;
  pcfg.latency_sample = cfg_.latency_sample;
  pcfg.first_seq = first_seq;
  pcfg.gso_frames = cfg_.offload != Offload::kNone;
  if (TsqActive(cfg_)) {
    tsq_.emplace(LoadFlows(cfg_), TsqModelFor(cfg_, tsc_hz_));
    for (auto& d : drivers_) d->set_tsq(&*tsq_);
    for (auto& q : queues_) q->set_tsq(&*tsq_);
    pcfg.tsq = &*tsq_;
  }
  pcfg.pps_per_producer = PpsPerProducer(cfg_, wire_);
  // The probe (--probe): small UDP datagrams at its own rate, no TSQ (the last flow).
  probe_cfg_ = pcfg;
  probe_cfg_.flows = 1;
  probe_cfg_.latency_sample = 1;  // the latency stream: every frame timed
  probe_cfg_.proto = Proto::kUdp;
  probe_cfg_.size = kProbePayload;
  probe_cfg_.pps_per_producer = ProbePps(cfg_, wire_);
  probe_cfg_.gso_frames = false;
  probe_cfg_.tsq = nullptr;
  return {};
}

void RealCell::Start() {
  run_start_ = Now();
  for (auto& q : queues_) q->StartIrq();
  producers_.reserve(nprod_);
  for (unsigned i = 0; i < nprod_; ++i)
    producers_.emplace_back([this, i] {
      // XPS: producer i sends on queue i mod queues.
      const FlowRange own = ProducerFlows(cfg_, i);
      RunProducer(i < cfg_.procs ? pcfg_ : probe_cfg_, i, own.first, pool_, *queues_[i % nq_],
                  stop_producers_, std::span(stats_).subspan(own.first, own.count));
      producers_done_.fetch_add(1);
    });
}

CounterSnapshot RealCell::Snapshot() {
  double cpu_ns = 0;
  DriverCounters dc;
  TxQueueCounters qc;
  for (unsigned q = 0; q < nq_; ++q) {
    for (const auto t : queues_[q]->service_threads()) cpu_ns += ThreadCpuNs(t);
    AddInto(dc, queues_[q]->DriverCountsNow());  // one cut a queue (a post and its doorbell)
    AddInto(qc, queues_[q]->counters());
  }
  for (auto& t : producers_) cpu_ns += ThreadCpuNs(t.native_handle());
  CounterSnapshot s = TakeSnapshot(dc, qc, cpu_ns, ProcessCtxsw());
  // Each producer's frames and what held it back, for the emulator's self-check.
  for (unsigned i = 0; i < nprod_; ++i) {
    const FlowRange own = ProducerFlows(cfg_, i);
    ProducerWindow& p = s.producers.emplace_back();
    for (unsigned f = own.first; f < own.first + own.count; ++f)
      p.generated += stats_[f].generated.Get(), p.held += stats_[f].tsq_waits.Get();
    p.held += stats_[own.first].alloc_failures.Get();  // the thread's own: its first flow's
  }
  return s;
}

bool RealCell::SleepFor(double seconds, TsqSampler* sampler) {
  const Tsc until = Now() + static_cast<Tsc>(seconds * tsc_hz_);
  const double slice_ns = sampler != nullptr ? kTsqSampleS * 1e9 : 10e6;
  while (Now() < until) {
    if (stop_.load()) return false;
    SleepNs(std::min(slice_ns, static_cast<double>(until - Now()) * 1e9 / tsc_hz_));
    if (sampler != nullptr) sampler->TakeUntil(*tsq_, Now());
  }
  return true;
}

void RealCell::Measure() {
  completed_ = SleepFor(cfg_.warmup_s, nullptr);
  const Result<CpuTimes> times_a = ReadCpuTimes(cpus_);
  a_ = Snapshot();
  window_.start.store(Now());
  window_.end.store(kNever);
  TsqSampler tsq_sampler(window_.start.load(), static_cast<Tsc>(kTsqSampleS * tsc_hz_));
  if (completed_) completed_ = SleepFor(cfg_.duration_s, tsq_ ? &tsq_sampler : nullptr);
  window_end_ = Now();
  window_.end.store(window_end_);
  b_ = Snapshot();
  if (const Result<CpuTimes> times_b = ReadCpuTimes(cpus_); times_a && times_b)
    machine_ = MachineOf(*times_a, *times_b, (b_.cpu_ns - a_.cpu_ns) * 1e-9, cpus_.size());
  if (tsq_) tsq_summary_ = tsq_sampler.Summarise(*tsq_);
}

Status RealCell::Drain() {
  // Generation stops; producers finish the frame in hand; qdisc, ring and wire empty out at the
  // wire's pace. All of it under one deadline, so a wedged queue cannot hang the run.
  stop_producers_.store(true);
  stopped_at_ = Now();
  for (auto& q : queues_) q->Drain();
  const double drain_budget_s = DrainBudgetS(cfg_, wire_);
  const Tsc drain_deadline = stopped_at_ + static_cast<Tsc>(drain_budget_s * tsc_hz_);
  while ((producers_done_.load() < nprod_ || !Idle()) && Now() < drain_deadline) SleepNs(20000);
  drained_at_ = Now();
  const bool drained = producers_done_.load() == nprod_ && Idle();
  if (!drained)
    for (auto& q : queues_) q->Abort();  // blocked producers drop (counted "aborted") and return
  if (!drained && tsq_) tsq_->Abort();    // throttled ones return too
  for (auto& t : producers_) t.join();
  for (auto& q : queues_) q->StopIrq();
  if (drained) return {};
  // A driver still refusing frames is the device (or its peer) not taking them; anything else
  // left over is txbatch's own fault.
  std::optional<std::string> refused;
  for (unsigned q = 0; q < nq_ && !refused; ++q) refused = queues_[q]->StoppedBecause();
  unsigned purged = 0;
  for (unsigned q = 0; q < nq_; ++q) purged += queues_[q]->Purge() + drivers_[q]->Purge();
  if (refused)
    return MakeError(EIO, fmt::format("the drain did not finish within {:.1f} s: {} refused "
                                      "frames to the end ({}); the {} frames still queued or "
                                      "in the ring were freed",
                                      drain_budget_s, drivers_.front()->Describe(), *refused,
                                      purged));
  return MakeError(EIO, fmt::format("the drain did not finish within {:.1f} s ({} frames still "
                                    "queued or in the ring were freed); this is a txbatch bug",
                                    drain_budget_s, purged));
}

CellResult RealCell::Conclude() {
  QueueTotals totals;
  for (unsigned q = 0; q < nq_; ++q)
    totals.Add(*drivers_[q], queues_[q]->counters(), queues_[q]->backlog(),
               queues_[q]->bql_limit());
  CloseSinks(cfg_, sink_ptrs_, stats_);
  CellRun run{cfg_, *drivers_.front(), totals, *sinks_.front(), stats_, a_, b_};
  run.tsc_hz = tsc_hz_;
  run.run_start = run_start_;
  run.window_start = window_.start.load();
  run.window_end = window_end_;
  run.stopped_at = stopped_at_;
  run.drained_at = drained_at_;
  CellResult r = ResultOf(run, flow_seq_);
  r.interrupted = !completed_;
  r.tsq = tsq_summary_;
  r.txirq_realtime = queues_.front()->irq_realtime();
  r.machine = machine_;
  // Ports give back what their PMD still holds (lazily freed TX mbufs, a pre-filled RX ring)
  // when they are stopped: count the pool after the drivers are gone.
  queues_.clear();
  drivers_.clear();
  CloseBooks(r.books, pool_);
  return r;
}

}  // namespace

Result<CellResult> RunCell(const CellConfig& cfg, rte_mempool* pool, double tsc_hz,
                           const std::vector<int>& cpus, const std::atomic<bool>& stop,
                           std::vector<uint64_t>* flow_seq) {
  return RealCell(cfg, pool, tsc_hz, cpus, stop, flow_seq).Run();
}

}  // namespace txbatch
