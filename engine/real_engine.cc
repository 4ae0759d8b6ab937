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

}  // namespace

Result<CellResult> RunCell(const CellConfig& cfg, rte_mempool* pool, double tsc_hz,
                           const std::vector<int>& cpus, const std::atomic<bool>& stop,
                           std::vector<uint64_t>* flow_seq) {
  RunWindow window;
  const unsigned flows = Flows(cfg);  // the producers' flows, the probe's the last where there is one
  const unsigned nprod = Producers(cfg);
  const std::vector<uint64_t> first_seq = FirstSeqs(cfg, flow_seq);
  // One TX queue each (--queues): a sink (its txirq delivers to it alone), a driver and the
  // queue; on emu their rings share one wire.
  const unsigned nq = std::max(1u, cfg.queues);
  std::vector<std::unique_ptr<RxSink>> sinks;
  std::vector<RxSink*> sink_ptrs;
  for (unsigned q = 0; q < nq; ++q) {
    sinks.push_back(MakeCellSink(cfg, window, tsc_hz, first_seq));
    sink_ptrs.push_back(sinks.back().get());
  }
  // The drivers deliver into a hand-off each: the sink runs after the TX lock, booked apart.
  std::vector<std::unique_ptr<DeferredReceiver>> handoffs;
  std::vector<FrameReceiver*> receivers;
  for (RxSink* s : sink_ptrs) {
    handoffs.push_back(
        std::make_unique<DeferredReceiver>(*s, /*inherit=*/TxLockInherits(cfg, cpus.size())));
    receivers.push_back(handoffs.back().get());
  }
  std::optional<TsqLedger> tsq;  // TCP Small Queues: outlives the drivers that release into it
  auto created = CreateDrivers(cfg.driver_spec, pool, cfg.mtu, receivers, window, tsc_hz,
                               cfg.link ? &*cfg.link : nullptr);
  if (!created) return created.error();
  std::vector<std::unique_ptr<TxDriver>> drivers = std::move(*created);
  TxDriver& driver = *drivers.front();
  auto policy = MakeFlushPolicy(cfg.policy, tsc_hz);
  TxQueueConfig qcfg = QueueConfigFor(cfg, tsc_hz, cpus);
  // Stage timestamps cost ~4 ns a frame: only where a sink will read them.
  qcfg.track_stages = cfg.timing && driver.counted_at() != CountedAt::kDriver;
  std::vector<std::unique_ptr<TxQueue>> queues;
  for (unsigned q = 0; q < nq; ++q) {
    TxQueueConfig own = qcfg;
    own.receiver = handoffs[q].get();
    own.index = q;
    queues.push_back(MakeTxQueue(*drivers[q], *policy, own, window));
  }

  const WireSpec wire = driver.Wire().value_or(WireSpec{});
  ProducerConfig pcfg;
  pcfg.proto = cfg.proto;
  pcfg.size = cfg.size;
  pcfg.mtu = cfg.mtu;
  pcfg.procs = cfg.procs;
  pcfg.flows = cfg.flows;
  pcfg.tsc_hz = tsc_hz;
  pcfg.cpus = cpus;
  if (cfg.shape.noqueue) pcfg.own_batches = policy.get();
  pcfg.track_stages = qcfg.track_stages;
  pcfg.stamp = cfg.timing;
  pcfg.first_seq = first_seq;
  pcfg.gso_frames = cfg.offload != Offload::kNone;
  if (TsqActive(cfg)) {
    tsq.emplace(LoadFlows(cfg), TsqModelFor(cfg, tsc_hz));
    for (auto& d : drivers) d->set_tsq(&*tsq);
    for (auto& q : queues) q->set_tsq(&*tsq);
    pcfg.tsq = &*tsq;
  }
  pcfg.pps_per_producer = PpsPerProducer(cfg, wire);

  std::atomic<bool> stop_producers{false};
  std::atomic<unsigned> producers_done{0};
  std::vector<ProducerStats> stats(flows);
  // The probe (--probe): small UDP datagrams at its own rate, no TSQ (the last flow).
  ProducerConfig probe_cfg = pcfg;
  probe_cfg.flows = 1;
  probe_cfg.proto = Proto::kUdp;
  probe_cfg.size = kProbePayload;
  probe_cfg.pps_per_producer = ProbePps(cfg, wire);
  probe_cfg.gso_frames = false;
  probe_cfg.tsq = nullptr;
  std::vector<std::thread> producers;

  const Tsc run_start = Now();
  for (auto& q : queues) q->StartIrq();
  producers.reserve(nprod);
  for (unsigned i = 0; i < nprod; ++i)
    producers.emplace_back([&, i] {
      // XPS: producer i sends on queue i mod queues.
      const FlowRange own = ProducerFlows(cfg, i);
      RunProducer(i < cfg.procs ? pcfg : probe_cfg, i, own.first, pool, *queues[i % nq],
                  stop_producers, std::span(stats).subspan(own.first, own.count));
      producers_done.fetch_add(1);
    });

  const auto snapshot = [&] {
    double cpu_ns = 0;
    DriverCounters dc;
    TxQueueCounters qc;
    for (unsigned q = 0; q < nq; ++q) {
      for (const auto t : queues[q]->service_threads()) cpu_ns += ThreadCpuNs(t);
      AddInto(dc, queues[q]->DriverCountsNow());  // one cut a queue (a post and its doorbell)
      AddInto(qc, queues[q]->counters());
    }
    for (auto& t : producers) cpu_ns += ThreadCpuNs(t.native_handle());
    return TakeSnapshot(dc, qc, cpu_ns, ProcessCtxsw());
  };
  // Sleeps for `seconds` unless a signal asks to stop; returns false if it did. With `sampler`,
  // samples TCP Small Queues every kTsqSampleS meanwhile.
  const auto sleep_for = [&](double seconds, TsqSampler* sampler) {
    const Tsc until = Now() + static_cast<Tsc>(seconds * tsc_hz);
    const double slice_ns = sampler != nullptr ? kTsqSampleS * 1e9 : 10e6;
    while (Now() < until) {
      if (stop.load()) return false;
      SleepNs(std::min(slice_ns, static_cast<double>(until - Now()) * 1e9 / tsc_hz));
      if (sampler != nullptr) sampler->TakeUntil(*tsq, Now());
    }
    return true;
  };
  const auto idle = [&] {
    for (auto& q : queues)
      if (!q->Idle()) return false;
    return true;
  };

  bool completed = sleep_for(cfg.warmup_s, nullptr);
  const CounterSnapshot a = snapshot();
  window.start.store(Now());
  window.end.store(kNever);
  TsqSampler tsq_sampler(window.start.load(), static_cast<Tsc>(kTsqSampleS * tsc_hz));
  if (completed) completed = sleep_for(cfg.duration_s, tsq ? &tsq_sampler : nullptr);
  const Tsc window_end = Now();
  window.end.store(window_end);
  const CounterSnapshot b = snapshot();
  std::optional<TsqSummary> tsq_summary;
  if (tsq) tsq_summary = tsq_sampler.Summarise(*tsq);

  // Drain: generation stops; producers finish the frame in hand; qdisc, ring and wire empty
  // out at the wire's pace. All of it under one deadline, so a wedged queue cannot hang the run.
  stop_producers.store(true);
  const Tsc stopped_at = Now();
  for (auto& q : queues) q->Drain();
  const double drain_budget_s = DrainBudgetS(cfg, wire);
  const Tsc drain_deadline = stopped_at + static_cast<Tsc>(drain_budget_s * tsc_hz);
  while ((producers_done.load() < nprod || !idle()) && Now() < drain_deadline) SleepNs(20000);
  const Tsc drained_at = Now();
  const bool drained = producers_done.load() == nprod && idle();
  if (!drained)
    for (auto& q : queues) q->Abort();  // blocked producers drop (counted "aborted") and return
  if (!drained && tsq) tsq->Abort();    // throttled ones return too
  for (auto& t : producers) t.join();
  for (auto& q : queues) q->StopIrq();
  if (!drained) {
    // A driver still refusing frames is the device (or its peer) not taking them; anything
    // else left over is txbatch's own fault.
    std::optional<std::string> refused;
    for (unsigned q = 0; q < nq && !refused; ++q) refused = queues[q]->StoppedBecause();
    unsigned purged = 0;
    for (unsigned q = 0; q < nq; ++q) purged += queues[q]->Purge() + drivers[q]->Purge();
    if (refused)
      return MakeError(EIO, fmt::format("the drain did not finish within {:.1f} s: {} refused "
                                        "frames to the end ({}); the {} frames still queued or "
                                        "in the ring were freed",
                                        drain_budget_s, driver.Describe(), *refused, purged));
    return MakeError(EIO, fmt::format("the drain did not finish within {:.1f} s ({} frames still "
                                      "queued or in the ring were freed); this is a txbatch bug",
                                      drain_budget_s, purged));
  }

  QueueTotals totals;
  for (unsigned q = 0; q < nq; ++q)
    totals.Add(*drivers[q], queues[q]->counters(), queues[q]->backlog(), queues[q]->bql_limit());
  CloseSinks(cfg, sink_ptrs, stats);
  CellRun run{cfg, driver, totals, *sinks.front(), stats, a, b};
  run.tsc_hz = tsc_hz;
  run.run_start = run_start;
  run.window_start = window.start.load();
  run.window_end = window_end;
  run.stopped_at = stopped_at;
  run.drained_at = drained_at;
  CellResult r = ResultOf(run, flow_seq);
  r.interrupted = !completed;
  r.tsq = tsq_summary;
  r.txirq_realtime = queues.front()->irq_realtime();
  // Ports give back what their PMD still holds (lazily freed TX mbufs, a pre-filled RX ring)
  // when they are stopped: count the pool after the drivers are gone.
  queues.clear();
  drivers.clear();
  CloseBooks(r.books, pool);
  return r;
}

}  // namespace txbatch
