#include "dataplane/experiment.h"

#include <fmt/format.h>
#include <pthread.h>
#include <rte_lcore.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <thread>

#include "dataplane/mempool.h"
#include "dataplane/qdisc.h"
#include "dataplane/run_window.h"
#include "dataplane/rx_sink.h"
#include "dataplane/tx_queue.h"
#include "dataplane/workload.h"

namespace txbatch {
namespace {

// Every producer sends best-effort traffic (TC_PRIO_BESTEFFORT -> band 1), as bw_tcp does.
constexpr int kProducerBand = 1;
// A drain that takes longer than the wire needs plus this is a bug, reported as such.
constexpr double kDrainSlackS = 5.0;

double ThreadCpuNs(pthread_t t) {
  clockid_t cid;
  if (pthread_getcpuclockid(t, &cid) != 0) return 0;
  timespec ts{};
  clock_gettime(cid, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

uint64_t InvoluntaryCtxsw() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<uint64_t>(ru.ru_nivcsw);
}

void SleepNs(double ns) {
  if (ns <= 0) return;
  timespec ts{static_cast<time_t>(ns / 1e9), static_cast<long>(std::fmod(ns, 1e9))};
  nanosleep(&ts, nullptr);
}

// Mean wire bytes per frame of `cfg`'s frame mix (to turn bit/s into frames/s).
double MeanWireBytes(const CellConfig& cfg, const WireSpec& wire) {
  Segmenter seg(cfg.proto, cfg.size, cfg.mtu);
  double bytes = 0, frames = 0;
  for (int i = 0; i < 64; ++i)
    seg.Write([&](unsigned payload) {
      bytes += wire.WireBytes(FrameBytes(cfg.proto, payload));
      frames += 1;
    });
  return frames > 0 ? bytes / frames : wire.WireBytes(FrameBytes(cfg.proto, cfg.size));
}

struct ProducerShared {
  const CellConfig& cfg;
  rte_mempool* pool;
  TxQueue& queue;
  const std::vector<int>& cpus;
  double tsc_hz;
  double pps_per_producer;  // 0 = as fast as possible
  std::atomic<bool> stop{false};
};

struct ProducerStats {
  Counter generated;
  Counter alloc_failures;
};

void ProducerLoop(ProducerShared& sh, unsigned index, ProducerStats& stats) {
  if (!sh.cpus.empty()) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(sh.cpus[index % sh.cpus.size()], &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
  }
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  const bool registered = rte_thread_register() == 0;
  FrameBuilder builder(sh.cfg.proto, static_cast<uint16_t>(index));
  Segmenter segmenter(sh.cfg.proto, sh.cfg.size, sh.cfg.mtu);
  const double interval =
      sh.pps_per_producer > 0 ? sh.tsc_hz / sh.pps_per_producer : 0;  // TSC per frame
  double next = static_cast<double>(Now()) + interval * index / std::max(1u, sh.cfg.procs);

  const auto send = [&](unsigned payload) {
    if (interval > 0) {
      const Tsc now = Now();
      if (next > static_cast<double>(now))
        SleepNs((next - static_cast<double>(now)) * 1e9 / sh.tsc_hz);
      next += interval;
    }
    rte_mbuf* m = rte_pktmbuf_alloc(sh.pool);
    if (m == nullptr) {
      // Not generated, so not in the books; counted, and the producer backs off briefly.
      stats.alloc_failures.Add();
      SleepNs(20000);
      return;
    }
    builder.Build(m, payload, Now());
    stats.generated.Add();
    if (!sh.queue.Send(m, kProducerBand)) builder.Unbuild(payload);
  };
  while (!sh.stop.load(std::memory_order_relaxed)) segmenter.Write(send);
  segmenter.Flush(send);
  if (registered) rte_thread_unregister();
}

struct Snapshot {
  uint64_t xmit_calls, offered, accepted, doorbells, tx_cycles, requeues, reschedules, ctxsw;
  std::array<uint64_t, kMaxBatch + 1> hist;
  double cpu_ns;
};

}  // namespace

std::string RateSpec::ToString() const {
  switch (unit) {
    case Unit::kMax: return "max";
    case Unit::kPps: return fmt::format("{:g}pps", value);
    case Unit::kBps: return fmt::format("{:g}bps", value);
  }
  return "max";
}

Result<RateSpec> ParseRate(std::string_view text) {
  const auto bad = [&] {
    return MakeError(EINVAL, fmt::format("rate '{}' is not valid; valid: max, or a positive number "
                                         "with a unit: pps, kpps, mpps (frames/s) or bps, kbit, "
                                         "mbit, gbit (wire bits/s), e.g. 40kpps or 500mbit",
                                         text));
  };
  if (text == "max") return RateSpec{};
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || !(v > 0) || !std::isfinite(v)) return bad();
  const std::string_view unit(ptr, text.data() + text.size() - ptr);
  struct U {
    std::string_view name;
    RateSpec::Unit unit;
    double mult;
  };
  static constexpr U kUnits[] = {
      {"pps", RateSpec::Unit::kPps, 1},      {"kpps", RateSpec::Unit::kPps, 1e3},
      {"mpps", RateSpec::Unit::kPps, 1e6},   {"bps", RateSpec::Unit::kBps, 1},
      {"kbit", RateSpec::Unit::kBps, 1e3},   {"mbit", RateSpec::Unit::kBps, 1e6},
      {"gbit", RateSpec::Unit::kBps, 1e9},
  };
  for (const U& u : kUnits)
    if (unit == u.name) return RateSpec{u.unit, v * u.mult};
  return bad();
}

std::string DescribePinning(unsigned procs, const std::vector<int>& cpus) {
  std::string s;
  for (unsigned i = 0; i < procs; ++i)
    s += fmt::format("{}proc{}->cpu{}", i ? " " : "", i, cpus.empty() ? -1 : cpus[i % cpus.size()]);
  s += "; txirq unpinned, SCHED_FIFO 1 where permitted";
  if (procs > cpus.size())
    s += fmt::format(" ({} producers on {} CPUs: involuntary context switches are reported)",
                     procs, cpus.size());
  return s;
}

unsigned PoolSizeFor(const CellConfig& cfg, unsigned lcores) {
  // Three bands of txqueuelen, the requeue slot, the ring, one frame per producer in hand and
  // the per-lcore caches (each may hold up to 1.5x its size).
  const uint64_t n = 3ull * cfg.txqueuelen + kMaxBatch + cfg.emu.ring + cfg.procs +
                     (lcores + cfg.procs + 2) * (kPoolCache * 3 / 2) + 1024;
  return static_cast<unsigned>(std::min<uint64_t>(n, 1u << 22));
}

Result<CellResult> RunCell(const CellConfig& cfg, rte_mempool* pool, double tsc_hz,
                           const std::vector<int>& cpus, const std::atomic<bool>& stop) {
  RunWindow window;
  RxSink sink(window, tsc_hz, cfg.procs);
  auto driver = emu::CreateEmuDriver(cfg.emu, sink, window, tsc_hz);
  auto policy = MakeFlushPolicy(cfg.policy);
  TxQueueConfig qcfg;
  qcfg.txqueuelen = cfg.txqueuelen;
  qcfg.block_when_full = cfg.stream;
  qcfg.tsc_hz = tsc_hz;
  TxQueue queue(*driver, *policy, qcfg, window);

  double pps = 0;
  const WireSpec wire = driver->Wire().value_or(WireSpec{});
  if (cfg.rate.unit == RateSpec::Unit::kPps) pps = cfg.rate.value;
  if (cfg.rate.unit == RateSpec::Unit::kBps) pps = cfg.rate.value / 8 / MeanWireBytes(cfg, wire);

  ProducerShared shared{cfg, pool, queue, cpus, tsc_hz, pps / cfg.procs};
  std::vector<ProducerStats> stats(cfg.procs);
  std::vector<std::thread> producers;

  const Tsc run_start = Now();
  queue.StartIrq();
  producers.reserve(cfg.procs);
  for (unsigned i = 0; i < cfg.procs; ++i)
    producers.emplace_back([&, i] { ProducerLoop(shared, i, stats[i]); });

  const auto snapshot = [&] {
    Snapshot s{};
    const auto& d = driver->counters();
    const auto& q = queue.counters();
    s.xmit_calls = d.xmit_calls.Get();
    s.offered = d.offered.Get();
    s.accepted = d.accepted.Get();
    s.doorbells = d.doorbells.Get();
    s.tx_cycles = q.tx_cycles.Get();
    s.requeues = q.requeues.Get();
    s.reschedules = q.reschedules.Get();
    s.ctxsw = InvoluntaryCtxsw();
    for (size_t i = 0; i < s.hist.size(); ++i) s.hist[i] = q.batch_hist[i].Get();
    s.cpu_ns = ThreadCpuNs(queue.irq_thread());
    for (auto& t : producers) s.cpu_ns += ThreadCpuNs(t.native_handle());
    return s;
  };
  // Sleeps for `seconds` unless a signal asks to stop; returns false if it did.
  const auto sleep_for = [&](double seconds) {
    const Tsc until = Now() + static_cast<Tsc>(seconds * tsc_hz);
    while (Now() < until) {
      if (stop.load()) return false;
      SleepNs(std::min(10e6, static_cast<double>(until - Now()) * 1e9 / tsc_hz));
    }
    return true;
  };

  CellResult r;
  bool completed = sleep_for(cfg.warmup_s);
  const Snapshot a = snapshot();
  window.start.store(Now());
  window.end.store(kNever);
  if (completed) completed = sleep_for(cfg.duration_s);
  const Tsc window_end = Now();
  window.end.store(window_end);
  const Snapshot b = snapshot();
  r.interrupted = !completed;
  r.txirq_realtime = queue.irq_realtime();

  shared.stop.store(true);
  const Tsc stopped_at = Now();
  for (auto& t : producers) t.join();
  // Drain: generation stopped; qdisc, ring and link empty out at the wire's pace.
  const double drain_budget_s =
      kDrainSlackS + (wire.bits_per_s > 0 ? (3.0 * cfg.txqueuelen + cfg.emu.ring) *
                                                wire.WireBytes(cfg.mtu + 14) * 8 / wire.bits_per_s
                                          : 0);
  const Tsc drain_deadline = Now() + static_cast<Tsc>(drain_budget_s * tsc_hz);
  while (!queue.Idle() && Now() < drain_deadline) SleepNs(20000);
  const Tsc drained_at = Now();
  const bool drained = queue.Idle();
  queue.StopIrq();
  if (!drained) {
    const unsigned purged = queue.Purge();
    return MakeError(EIO, fmt::format("the drain did not finish within {:.1f} s ({} frames still "
                                      "queued, purged); this is a txbatch bug",
                                      drain_budget_s, purged));
  }

  // Window rates.
  const auto& dc = driver->counters();
  const auto& qc = queue.counters();
  const SinkCounts sc = sink.counts();
  const double ws = static_cast<double>(window_end - window.start.load()) / tsc_hz;
  r.window_s = ws;
  r.counted_at = CountedAtName(driver->counted_at());
  r.packets = dc.window_frames.Get();
  r.mpps = static_cast<double>(r.packets) / ws / 1e6;
  r.mb_per_s = static_cast<double>(dc.window_payload_bytes.Get()) / ws / 1e6;
  r.wire_gbps = static_cast<double>(dc.window_wire_bytes.Get()) * 8 / ws / 1e9;
  const uint64_t calls = b.xmit_calls - a.xmit_calls;
  const uint64_t offered = b.offered - a.offered;
  const uint64_t accepted = b.accepted - a.accepted;
  r.avg_batch = calls ? static_cast<double>(offered) / static_cast<double>(calls) : 0;
  for (size_t i = 1; i < a.hist.size(); ++i) {
    const uint64_t n = b.hist[i] - a.hist[i];
    if (n) r.batch_hist[std::bit_floor(static_cast<unsigned>(i))] += n;
  }
  if (accepted > 0) {
    r.xmit_calls_per_pkt = static_cast<double>(calls) / static_cast<double>(accepted);
    if (driver->owns_doorbell())
      r.doorbells_per_pkt =
          static_cast<double>(b.doorbells - a.doorbells) / static_cast<double>(accepted);
    r.cycles_per_pkt =
        static_cast<double>(b.tx_cycles - a.tx_cycles) / static_cast<double>(accepted);
  }
  if (r.packets > 0) r.cpu_ns_per_pkt = (b.cpu_ns - a.cpu_ns) / static_cast<double>(r.packets);
  r.requeues = b.requeues - a.requeues;
  r.reschedules = b.reschedules - a.reschedules;
  r.involuntary_ctxsw = b.ctxsw - a.ctxsw;
  r.latency = sink.latency().Summary();
  r.arrival_before_tx = sc.arrival_before_tx;
  r.irq_max_late_us = static_cast<double>(qc.irq_max_late_tsc.Get()) * 1e6 / tsc_hz;
  r.wire_max_idle_us = static_cast<double>(dc.window_max_idle_tsc.Get()) * 1e6 / tsc_hz;
  r.foreign = sc.foreign;

  // Ceiling for the frame mix actually sent.
  if (const auto w = driver->Wire(); w && r.packets > 0) {
    const double wire_bytes = static_cast<double>(dc.window_wire_bytes.Get()) / r.packets;
    const double payload = static_cast<double>(dc.window_payload_bytes.Get()) / r.packets;
    r.ceiling_mpps = w->bits_per_s / 8 / wire_bytes / 1e6;
    r.ceiling_mb_per_s = *r.ceiling_mpps * payload;
    r.link_bound = r.mb_per_s >= 0.97 * *r.ceiling_mb_per_s;
    r.link_utilisation = static_cast<double>(dc.window_busy_tsc.Get()) / (ws * tsc_hz);
  }
  r.last_departure_s =
      static_cast<double>(std::max(dc.last_departure.Get(), run_start) - run_start) / tsc_hz;
  r.drained_at_s = static_cast<double>(drained_at - run_start) / tsc_hz;
  r.stopped_at_s = static_cast<double>(stopped_at - run_start) / tsc_hz;

  // The books, over the whole run.
  Books& k = r.books;
  for (const auto& s : stats) k.generated += s.generated.Get();
  for (const auto& s : stats) r.alloc_failures += s.alloc_failures.Get();
  r.drops["qdisc_full"] = qc.dropped_qdisc_full.Get();
  k.dropped = qc.dropped_qdisc_full.Get();
  r.drops_total = k.dropped;
  k.sent = dc.accepted.Get();
  k.queued = queue.backlog();
  k.received = sc.received;
  k.lost = sc.lost;
  k.duplicated = sc.duplicated;
  {
    k.in_flight = driver->InFlight();  // all threads are stopped: no lock needed
  }
  k.mbufs_in_use = rte_mempool_in_use_count(pool);
  k.balanced = k.generated == k.sent + k.dropped + k.queued &&
               k.sent + k.duplicated == k.received + k.lost + k.in_flight && k.mbufs_in_use == 0;
  return r;
}

}  // namespace txbatch
