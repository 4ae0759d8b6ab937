#include "engine/cell.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>

#include "dataplane/link_model.h"
#include "dataplane/mempool.h"
#include "dataplane/producer.h"
#include "dataplane/rx_sink.h"
#include "dataplane/tx_queue.h"

namespace txbatch {
namespace {

// A drain that takes this much longer than the wire and the modelled device costs need is a
// bug, reported as such (and the run is aborted cleanly).
constexpr double kDrainSlackS = 5.0;

}  // namespace

std::string_view EngineName(Engine e) { return e == Engine::kSim ? "sim" : "real"; }

bool Balanced(const Books& k) {
  return k.generated == k.sent + k.dropped + k.queued && k.dropped_queued <= k.dropped &&
         (!k.rx_side ||
          k.sent + k.duplicated + k.dropped_queued == k.received + k.lost + k.in_flight) &&
         (!k.link_lost || *k.link_lost + k.dropped_queued == k.lost) && k.mbufs_in_use == 0;
}

namespace {

// Frames a queue's requeue slot may hold beyond its bands: one bulk's refusals, and a bulk
// comes out of the bands.
unsigned RequeueBound(const CellConfig& cfg) {
  return std::min<unsigned>(kMaxBatch, cfg.txqueuelen * kPfifoBands);
}

}  // namespace

unsigned QdiscHolds(const CellConfig& cfg) {
  if (!cfg.shape.fq_codel) return cfg.txqueuelen;
  // fq_codel keeps at most `limit` frames, and at most memory_limit bytes of truesize (one frame
  // more, the one whose enqueue went over): frames of the cell's size, GSO frames whole.
  const FqCodelParams& p = *cfg.shape.fq_codel;
  const uint64_t truesize =
      uint64_t{SlicesPerFrame(cfg)} * (cfg.mtu + kEthHeaderBytes) + kSkbTruesizeOverhead;
  return static_cast<unsigned>(std::min<uint64_t>(p.limit, p.memory_limit / truesize + 1));
}

double DrainBudgetS(const CellConfig& cfg, const WireSpec& wire) {
  const double frames =
      (static_cast<double>(QdiscHolds(cfg)) + RequeueBound(cfg) + cfg.driver_spec.ring()) *
          cfg.queues * SlicesPerFrame(cfg) +
      // What generation's end leaves: each flow's corked remainder (a GSO frame at most) and
      // each producer's frame in hand.
      static_cast<double>(Flows(cfg) + Producers(cfg)) * SlicesPerFrame(cfg);
  double s = kDrainSlackS + frames * cfg.driver_spec.modelled_cost_ns() * 1e-9;
  if (wire.bits_per_s > 0)
    s += frames * wire.WireBytes(cfg.mtu + kEthHeaderBytes) * 8 / wire.bits_per_s;
  // What the link holds leaves it at its own pace: a 6 s delay is 6 s of drain, not a wedge.
  if (cfg.link) s += cfg.link->MaxHoldS(cfg.mtu + kEthHeaderBytes);
  return s;
}

double ProbePps(const CellConfig& cfg, const WireSpec& wire) {
  if (!cfg.probe) return 0;
  if (cfg.probe->unit == RateSpec::Unit::kBits)
    return cfg.probe->value / 8 / MeanWireBytes(Proto::kUdp, kProbePayload, cfg.mtu, wire);
  return cfg.probe->value;
}

double PpsPerProducer(const CellConfig& cfg, const WireSpec& wire) {
  if (cfg.rate.unit == RateSpec::Unit::kPps) return cfg.rate.value / cfg.procs;
  if (cfg.rate.unit == RateSpec::Unit::kBits)
    return cfg.rate.value / 8 / MeanWireBytes(cfg.proto, cfg.size, cfg.mtu, wire) / cfg.procs;
  return 0;
}

bool TxLockInherits(const CellConfig& cfg, size_t cpus) {
  if (cfg.shape.noqueue) return false;
  if (cfg.shape.dedicated) return true;
  return cpus == 0 || Producers(cfg) > cpus;
}

TxQueueConfig QueueConfigFor(const CellConfig& cfg, double tsc_hz, const std::vector<int>& cpus) {
  TxQueueConfig q;
  q.tx_lock_inherits = TxLockInherits(cfg, cpus.size());
  q.txqueuelen = cfg.txqueuelen;
  q.block_when_full = cfg.stream;  // a stream's producers block on a full band, datagrams drop
  q.psched_mtu = cfg.mtu + kEthHeaderBytes;
  q.tsc_hz = tsc_hz;
  q.irq_cpus = cpus;
  q.shape = cfg.shape;
  q.bypass = cfg.bypass;
  q.bql = cfg.bql;
  q.segment_gso = cfg.offload == Offload::kGso && cfg.proto == Proto::kTcp;
  return q;
}

std::string EraMix(const CellConfig& cfg) {
  const PolicySpec& policy = cfg.policy;
  const QueueShape& shape = cfg.shape;
  if (shape.fq_codel && policy.kind == PolicyKind::kBlist2007)
    return "blist-2007 names Linux 2.6 (2007), which had no fq_codel (3.5, 2012 on); fq_codel "
           "runs as 6.x has it";
  if (shape.fq_codel && policy.kind == PolicyKind::kLinux2014)
    return "linux-2014 names Linux 3.18, whose fq_codel dropped one frame on overflow and had no "
           "memory_limit (both 4.7); fq_codel runs as 6.x has it";
  if (cfg.sync_auto || shape.noqueue || shape.pfifo || shape.fq_codel) return {};
  if (policy.kind == PolicyKind::kLinux2025 && !shape.nolock)
    return "linux-2025 names a 6.x kernel, whose pfifo_fast is lock-free (4.16 on); --sync "
           "rootlock runs it on the root-locked pfifo_fast of before 4.16";
  if ((policy.kind == PolicyKind::kLinux2014 || policy.kind == PolicyKind::kBlist2007) &&
      shape.nolock)
    return fmt::format(
        "{} names Linux {}, whose pfifo_fast took a root lock; --sync nolock runs "
        "it on the lock-free pfifo_fast of 4.16 on",
        policy.ToString(), policy.kind == PolicyKind::kLinux2014 ? "3.18" : "2.6 (2007)");
  return {};
}

bool TsqActive(const CellConfig& cfg) {
  return cfg.tsq > 0 && cfg.proto == Proto::kTcp && cfg.stream && cfg.driver_spec.emulated();
}

TsqModel TsqModelFor(const CellConfig& cfg, double tsc_hz) {
  TsqModel m;
  m.cap = cfg.tsq;
  m.tsc_hz = tsc_hz;
  m.segments_are_skbs = cfg.offload == Offload::kGso;
  m.pacing_ratio = EraPacingRatio(cfg.policy);
  return m;
}

unsigned SlicesPerFrame(const CellConfig& cfg) {
  if (cfg.offload == Offload::kNone || cfg.proto != Proto::kTcp) return 1;
  const unsigned mss = MaxPayload(cfg.proto, cfg.mtu);
  return GsoSizeGoal(mss) / mss;
}

unsigned PoolSizeFor(const CellConfig& cfg, unsigned lcores) {
  // The band producers use (kProducerBand), the requeue slot, the ring, each producer's stash
  // of fresh mbufs and the per-lcore caches (each may hold up to 1.5x its size): queueing alone can
  // never exhaust the pool.
  // A GSO frame holds an mbuf per slice wherever a frame would be (gso.h). TCP Small Queues
  // bound what is below every socket (qdisc and ring) at its limit and one frame more, the frame
  // in hand included (it is charged before it is handed over).
  const uint64_t slices = SlicesPerFrame(cfg);
  uint64_t below = (uint64_t{QdiscHolds(cfg)} + RequeueBound(cfg) + cfg.driver_spec.ring()) *
                   std::max(1u, cfg.queues) * slices;
  if (TsqActive(cfg)) {
    const uint64_t mss = MaxPayload(cfg.proto, cfg.mtu);
    below = std::min(below, uint64_t{LoadFlows(cfg)} * ((cfg.tsq + mss - 1) / mss + 2 * slices));
    // The probe is not held by TSQ: what its queue holds may be its frames (one slice each).
    if (cfg.probe) below += uint64_t{QdiscHolds(cfg)} + RequeueBound(cfg) + cfg.driver_spec.ring();
  }
  const uint64_t n = below + uint64_t{Producers(cfg)} * (kProducerStash + slices) +
                     (cfg.link ? cfg.link->limit : 0) +
                     (lcores + Producers(cfg) + 2) * (kPoolCache * 3 / 2) + 1024;
  return static_cast<unsigned>(std::min<uint64_t>(n, 1u << 22));
}

double JainIndex(std::span<const uint64_t> received) {
  double sum = 0, squares = 0;
  for (const uint64_t x : received) {
    sum += static_cast<double>(x);
    squares += static_cast<double>(x) * static_cast<double>(x);
  }
  if (squares == 0) return 1;
  return sum * sum / (static_cast<double>(received.size()) * squares);
}

std::optional<CellResult::Machine> MachineOf(const CpuTimes& a, const CpuTimes& b, double own_cpu_s,
                                             size_t cpus) {
  const double time = (b.at_s - a.at_s) * static_cast<double>(cpus);
  if (!(time > 0)) return std::nullopt;
  const double steal = std::max(0.0, b.steal_s - a.steal_s);
  const double idle = std::max(0.0, b.idle_s - a.idle_s);
  return CellResult::Machine{steal / time, std::max(0.0, time - idle - steal - own_cpu_s) / time,
                             static_cast<unsigned>(cpus)};
}

CounterSnapshot TakeSnapshot(const DriverCounters& d, const TxQueueCounters& q, double cpu_ns,
                             ContextSwitches ctxsw) {
  CounterSnapshot s{};
  ReadInto(s.d, d);
  ReadInto(s.q, q);
  s.ctxsw = ctxsw;
  s.cpu_ns = cpu_ns;
  return s;
}

std::vector<uint64_t> FirstSeqs(const CellConfig& cfg, const std::vector<uint64_t>* flow_seq) {
  std::vector<uint64_t> first(Flows(cfg), 0);
  if (flow_seq != nullptr)
    for (size_t f = 0; f < std::min(first.size(), flow_seq->size()); ++f) first[f] = (*flow_seq)[f];
  return first;
}

std::unique_ptr<RxSink> MakeCellSink(const CellConfig& cfg, const RunWindow& window,
                                     double tsc_hz, std::span<const uint64_t> first_seq) {
  auto sink = std::make_unique<RxSink>(
      window, tsc_hz, Flows(cfg), cfg.link ? uint64_t{4} * cfg.link->limit : 0,
      /*verify_headers=*/cfg.link && cfg.link->corrupt > 0, cfg.timing,
      /*flow_latency=*/(cfg.per_flow || cfg.probe) && cfg.timing);
  sink->StartFlows(first_seq);
  return sink;
}

void CloseBooks(Books& books, rte_mempool* pool) {
  books.mbufs_in_use = static_cast<uint64_t>(rte_mempool_in_use_count(pool));
  books.balanced = Balanced(books);
}

void CloseSinks(const CellConfig& cfg, std::span<RxSink* const> sinks,
                const std::vector<ProducerStats>& stats) {
  for (size_t q = 0; q < sinks.size(); ++q) {
    // Frames lost at the very end of a flow show no gap: tell each queue's sink where its flows
    // (producer i's on queue i mod queues) ended; the others' stay where they started.
    std::vector<uint64_t> next_seq(stats.size(), 0);
    for (unsigned f = 0; f < stats.size(); ++f)
      if (ProducerOfFlow(cfg, f) % sinks.size() == q) next_seq[f] = stats[f].next_seq.load();
    sinks[q]->CloseFlows(next_seq);
    if (q > 0) sinks[0]->Absorb(*sinks[q]);
  }
}

void QueueTotals::Add(const TxDriver& driver, const TxQueueCounters& q, unsigned queued,
                      std::optional<uint32_t> bql) {
  AddInto(dc, driver.counters());
  AddInto(qc, q);
  QdiscChildResult& c = children.emplace_back();
  c.queue = static_cast<unsigned>(children.size() - 1);
  c.sent = driver.counters().accepted.Get();
  c.dropped = q.dropped_qdisc_full.Get() + q.qdisc.dropped_queued();
  c.requeues = q.requeued_frames.Get();
  c.backlog = queued;
  c.queue_stops = driver.counters().stops.Get();
  c.queue_wakes = driver.counters().wakes.Get();
  ReadInto(c.fq_codel.emplace(), q.qdisc);
  backlog += queued;
  in_flight += driver.InFlight();
  if (bql) bql_limit = std::max(bql_limit.value_or(0), *bql);
}

namespace {

// The measured window: rates, the batches formed, what each frame cost the TX path, the
// receiver and the completion role, and the queue's and driver's events in it.
void WindowOf(const CellRun& run, CellResult& r) {
  const TxDriver& driver = run.driver;
  const TxQueueCounters& qc = run.totals.qc;
  const DriverCounters& dc = run.totals.dc;
  const CounterSnapshot& a = run.a;
  const CounterSnapshot& b = run.b;
  const double tsc_hz = run.tsc_hz;
  const double ws = static_cast<double>(run.window_end - run.window_start) / tsc_hz;
  r.window_s = ws;
  r.counted_at = CountedAtName(driver.counted_at());
  r.link_layer = driver.link_layer();
  r.packets = dc.window_frames.Get();
  r.mpps = static_cast<double>(r.packets) / ws / 1e6;
  r.mb_per_s = static_cast<double>(dc.window_payload_bytes.Get()) / ws / 1e6;
  r.wire_gbps = static_cast<double>(dc.window_wire_bytes.Get()) * 8 / ws / 1e9;
  // What happened in the window.
  const DriverCounts wd = Difference(b.d, a.d);
  const TxQueueCounts wq = Difference(b.q, a.q);
  // Frames per handover (the queue's view: with xmit_more the driver sees one frame per call,
  // but the bulk is what shares a doorbell).
  uint64_t handovers = 0, handed = 0;
  for (size_t i = 1; i < wq.batch_hist.size(); ++i) {
    const uint64_t n = wq.batch_hist[i];
    handovers += n;
    handed += n * i;
    if (n) r.batch_hist[std::bit_floor(static_cast<unsigned>(i))] += n;
  }
  r.avg_batch = handovers ? static_cast<double>(handed) / static_cast<double>(handovers) : 0;
  for (size_t i = 1; i < wq.dequeue_hist.size(); ++i)
    if (wq.dequeue_hist[i]) r.dequeue_sizes[static_cast<unsigned>(i)] = wq.dequeue_hist[i];
  if (wd.accepted > 0) {
    const auto accepted = static_cast<double>(wd.accepted);
    r.xmit_calls_per_pkt = static_cast<double>(wd.xmit_calls) / accepted;
    if (driver.owns_doorbell()) r.doorbells_per_pkt = static_cast<double>(wd.doorbells) / accepted;
    r.cycles_per_pkt = static_cast<double>(wq.tx_cycles) / accepted;
  }
  // The receiver ran on these threads after the TX path's and the completion role's calls:
  // its time is its own (results.receiver), not the TX path's CPU.
  const double rx_ns = static_cast<double>(wq.rx_cycles) * 1e9 / tsc_hz;
  if (r.packets > 0)
    r.cpu_ns_per_pkt = std::max(0.0, b.cpu_ns - a.cpu_ns - rx_ns) / static_cast<double>(r.packets);
  if (wq.rx_frames > 0) {
    const auto frames = static_cast<double>(wq.rx_frames);
    r.receiver = ReceiverResult{static_cast<double>(wq.rx_cycles) / frames, rx_ns / frames};
  }
  if (wq.completions > 0) {
    const auto reclaims = static_cast<double>(wq.completions);
    r.completion_frames_per_call = static_cast<double>(wq.completion_frames) / reclaims;
    r.completion_cycles_per_call = static_cast<double>(wq.completion_cycles) / reclaims;
  }
  r.requeues = wq.requeues;
  r.requeued_frames = wq.requeued_frames;
  r.qdisc_missed = wq.missed;
  r.bypassed = wq.bypassed;
  r.queue_stops = wd.stops;
  r.queue_wakes = wd.wakes;
  r.producer_waits = wq.waits;
  if (const auto limit = run.totals.bql_limit)
    r.bql = BqlResult{*limit, qc.bql_limit_max.Get(), wq.bql_stops};
  r.reschedules = wq.reschedules;
  r.driver_counters = driver.ExtraCounters();  // over the whole cell (warm-up and drain too)
  r.voluntary_ctxsw = b.ctxsw.voluntary - a.ctxsw.voluntary;
  r.involuntary_ctxsw = b.ctxsw.involuntary - a.ctxsw.involuntary;
}

// Where frames came back: latency over the window, its histogram, by stage and by position in
// the driver call.
void LatencyOf(const RxSink& sink, const CellConfig& cfg, CellResult& r) {
  r.latency = sink.latency().Summary();
  r.latency_hist = sink.latency().Bins();
  r.lat_before_driver = sink.before_driver().Summary();
  r.lat_driver_ring = sink.driver_ring().Summary();
  r.lat_wire = sink.wire().Summary();
  r.before_driver_is_batch_fill = cfg.shape.noqueue;
  for (size_t b = 0; b < RxSink::kPositionBuckets; ++b)
    if (const auto s = sink.by_position()[b].Summary()) {
      const unsigned lo = b == 0 ? 0 : 1u << (b - 1), hi = b == 0 ? 0 : (1u << b) - 1;
      r.lat_by_position.emplace_back(lo == hi ? std::to_string(lo) : fmt::format("{}-{}", lo, hi),
                                     *s);
    }
}

// Where frames come back to a sink: each flow (--per-flow), how evenly the load's flows were
// served, and the probe's flow.
void FlowsOf(const CellRun& run, CellResult& r) {
  const CellConfig& cfg = run.cfg;
  const RxSink& sink = run.sink;
  const auto& stats = run.stats;
  {
    const std::vector<FlowCounts> flows = sink.flow_counts();
    const auto generated = [&](unsigned f) {
      return f < stats.size() ? stats[f].generated.Get() : uint64_t{0};
    };
    if (cfg.per_flow)
      for (unsigned f = 0; f < flows.size(); ++f)
        r.flows.push_back({f, flows[f], sink.flow_latency(f), generated(f)});
    if (LoadFlows(cfg) > 1 && LoadFlows(cfg) <= flows.size()) {
      std::vector<uint64_t> got;
      for (unsigned f = 0; f < LoadFlows(cfg); ++f) got.push_back(flows[f].received);
      const auto [lo, hi] = std::minmax_element(got.begin(), got.end());
      r.fairness = CellResult::Fairness{LoadFlows(cfg), JainIndex(got), *lo, *hi};
    }
    const unsigned probe = ProbeFlow(cfg);
    if (cfg.probe && probe < flows.size())
      r.probe = CellResult::Flow{probe, flows[probe], sink.flow_latency(probe), generated(probe)};
  }
}

// The model's checks against the real clock, and the wire's ceiling for the frame mix sent.
void ChecksOf(const CellRun& run, CellResult& r) {
  const TxDriver& driver = run.driver;
  const TxQueueCounters& qc = run.totals.qc;
  const DriverCounters& dc = run.totals.dc;
  const double tsc_hz = run.tsc_hz;
  const double ws = r.window_s;
  r.irq_max_late_us = static_cast<double>(qc.irq_max_late_tsc.Get()) * 1e6 / tsc_hz;
  r.wire_max_idle_us = static_cast<double>(dc.window_max_idle_tsc.Get()) * 1e6 / tsc_hz;
  r.wire_stalled_us = static_cast<double>(dc.window_stalled_tsc.Get()) * 1e6 / tsc_hz;

  // Ceiling for the frame mix actually sent.
  if (const auto w = driver.Wire(); w && r.packets > 0) {
    const double wire_bytes = static_cast<double>(dc.window_wire_bytes.Get()) / r.packets;
    const double payload = static_cast<double>(dc.window_payload_bytes.Get()) / r.packets;
    r.ceiling_mpps = w->bits_per_s / 8 / wire_bytes / 1e6;
    r.ceiling_mb_per_s = *r.ceiling_mpps * payload;
    r.link_bound = r.mb_per_s >= 0.97 * *r.ceiling_mb_per_s;
    if (driver.counted_at() == CountedAt::kWire)
      r.link_utilisation = static_cast<double>(dc.window_busy_tsc.Get()) / (ws * tsc_hz);
  }
  r.last_departure_s =
      static_cast<double>(std::max(dc.last_departure.Get(), run.run_start) - run.run_start) /
      tsc_hz;
  r.drained_at_s = static_cast<double>(run.drained_at - run.run_start) / tsc_hz;
  r.stopped_at_s = static_cast<double>(run.stopped_at - run.run_start) / tsc_hz;
}

// The emulator's self-check (real cells: the engine counted its producers): each producer's pace
// against what it made in the window, and the wire's host stalls.
void EmulatorOf(const CellRun& run, CellResult& r) {
  if (run.a.producers.empty() || run.a.producers.size() != run.b.producers.size()) return;
  EmulatorCheckInput in;
  in.window_s = r.window_s;
  const WireSpec wire = run.driver.Wire().value_or(WireSpec{});
  for (unsigned i = 0; i < run.a.producers.size(); ++i) {
    in.offered_pps.push_back(i < run.cfg.procs ? PpsPerProducer(run.cfg, wire)
                                               : ProbePps(run.cfg, wire));
    in.producers.push_back({run.b.producers[i].generated - run.a.producers[i].generated,
                            run.b.producers[i].held - run.a.producers[i].held});
  }
  // Producer i sends on queue i mod queues (XPS): what each queue is offered, all told.
  const size_t nq = std::max(1u, run.cfg.queues);
  for (size_t i = 0; i < in.offered_pps.size(); ++i) {
    double on_queue = 0;
    for (size_t j = i % nq; j < in.offered_pps.size(); j += nq) on_queue += in.offered_pps[j];
    in.queue_offered_pps.push_back(on_queue);
  }
  in.queue_waits = r.producer_waits;
  const DriverCounts wd = Difference(run.b.d, run.a.d);
  if (wd.accepted > 0)
    in.modelled_ns_per_frame = static_cast<double>(wd.modelled_tsc) * 1e9 / run.tsc_hz /
                               static_cast<double>(wd.accepted);
  in.wire_stalled_us = r.wire_stalled_us;
  in.wire_max_idle_us = r.wire_max_idle_us;
  in.irq_max_late_us = r.irq_max_late_us;
  const EmulatorCheck c = CheckEmulator(in);
  r.emulator_bound = c.bound;
  r.emulator_bound_why = c.why;
  r.producer_rate_share = c.least_rate_share;
}

// The books, over the whole run, and what they are made of: the producers' counts, the drops
// by reason, the qdisc's (fq_codel's, an mq root's children's) and the link's.
void BooksOf(const CellRun& run, CellResult& r) {
  const CellConfig& cfg = run.cfg;
  const TxDriver& driver = run.driver;
  const TxQueueCounters& qc = run.totals.qc;
  const DriverCounters& dc = run.totals.dc;
  const auto& stats = run.stats;
  const SinkCounts sc = run.sink.counts();
  Books& k = r.books;
  for (const auto& s : stats) k.generated += s.generated.Get();
  for (const auto& s : stats) r.alloc_failures += s.alloc_failures.Get();
  for (const auto& s : stats) r.tsq_waits += s.tsq_waits.Get();
  for (size_t t = 0; t < kFlushTriggers; ++t) {
    r.flush_triggers[t] = qc.flush_triggers[t].Get();
    for (const auto& s : stats) r.flush_triggers[t] += s.flush_triggers[t].Get();
  }
  for (unsigned i = 0; i < Producers(cfg); ++i)  // a thread's own counters: its first flow's
    r.unregistered_threads += stats[ProducerFlows(cfg, i).first].registered ? 0 : 1;
  r.drops["qdisc_full"] = qc.dropped_qdisc_full.Get();
  if (cfg.shape.noqueue) r.drops["noqueue"] = qc.dropped_noqueue.Get();
  k.dropped_queued = qc.qdisc.dropped_queued();
  if (cfg.shape.fq_codel) {
    r.drops["codel"] = qc.qdisc.dropped_codel.Get();
    r.drops["overlimit"] = qc.qdisc.drop_overlimit.Get();
    ReadInto(r.fq_codel.emplace(), qc.qdisc);
  }
  if (cfg.queues > 1 && !cfg.shape.noqueue) {  // noqueue: no root qdisc at all
    r.mq = run.totals.children;
    if (!cfg.shape.fq_codel)
      for (QdiscChildResult& c : r.mq) c.fq_codel.reset();
  }
  k.dropped = qc.dropped_qdisc_full.Get() + qc.dropped_noqueue.Get() + k.dropped_queued;
  r.drops_total = k.dropped;
  k.sent = dc.accepted.Get();
  k.queued = run.totals.backlog;
  k.received = sc.received;
  k.lost = sc.lost;
  k.duplicated = sc.duplicated;
  k.in_flight = run.totals.in_flight;
  if (const LinkCounters* lc = driver.link_counters()) {
    LinkResult& l = r.link.emplace();
    l.offered = lc->offered.Get();
    l.lost = lc->lost.Get();
    l.dropped_limit = lc->dropped_limit.Get();
    l.duplicated = lc->duplicated.Get();
    l.corrupted = lc->corrupted.Get();
    l.reordered = lc->reordered.Get();
    l.dup_failed = lc->dup_failed.Get();
    l.frames_lost = lc->frames_lost.Get();
    l.sink_reordered = sc.reordered;
    // On the emulated wire every frame is txbatch's: whatever the receiver rejects was corrupted.
    l.sink_corrupt = sc.foreign;
    k.link_lost = l.frames_lost;
  }
}

}  // namespace

CellResult ResultOf(const CellRun& run, std::vector<uint64_t>* flow_seq) {
  CellResult r;
  // Frames lost at the very end of a flow show no gap: tell the sink where each flow ended.
  std::vector<uint64_t> next_seq;
  for (const auto& s : run.stats) next_seq.push_back(s.next_seq.load());
  if (flow_seq != nullptr) {
    if (flow_seq->size() < next_seq.size()) flow_seq->resize(next_seq.size(), 0);
    std::copy(next_seq.begin(), next_seq.end(), flow_seq->begin());
  }
  WindowOf(run, r);
  LatencyOf(run.sink, run.cfg, r);
  const SinkCounts sc = run.sink.counts();
  r.arrival_before_tx = sc.arrival_before_tx;
  r.foreign = sc.foreign;
  if (run.driver.counted_at() != CountedAt::kDriver) FlowsOf(run, r);
  ChecksOf(run, r);
  EmulatorOf(run, r);
  BooksOf(run, r);
  r.books.rx_side = run.driver.counted_at() != CountedAt::kDriver;
  return r;
}

}  // namespace txbatch
