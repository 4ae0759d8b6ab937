#include "results/tables.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <set>
#include <utility>

#include "dataplane/tx_driver.h"
#include "results/latency_text.h"
#include "results/summary.h"
#include "results/verdict.h"
#include "txbatch_config.h"

namespace txbatch {
namespace {

// What a reader must know to trust a row: an interrupted window, txbatch's own threads having
// set the rate (emulator_bound: the footer says why), or an idle wire explained by an
// interrupt the machine served late (a host stall, not the model).
std::string Remarks(const CellResult& r) {
  std::string s;
  if (r.interrupted) s += " (interrupted)";
  if (r.emulator_bound.value_or(false)) s += " (emulator-bound)";
  if (r.wire_max_idle_us >= kHostStallS * 1e6 && r.irq_max_late_us >= r.wire_max_idle_us)
    s += fmt::format(" (wire idle {:.1f} ms: txirq served {:.1f} ms late by the machine)",
                     r.wire_max_idle_us / 1e3, r.irq_max_late_us / 1e3);
  return s;
}

}  // namespace

std::string ShapeName(const CellConfig& c) {
  // The engine is part of the shape: a simulated cell is never compared with a real one.
  // So are the TX queues: cells with different queue counts are different rows.
  const std::string sim = fmt::format("{}{}", c.queues > 1 ? fmt::format(" {}q", c.queues) : "",
                                      c.engine == Engine::kSim ? " sim" : "");
  if (c.shape.noqueue) return fmt::format("qdisc none{}", sim);
  const std::string qdisc =
      c.shape.pfifo      ? "pfifo "
      : c.shape.fq_codel ? fmt::format("fq_codel{} ", FqCodelChanges(*c.shape.fq_codel))
                         : "";
  return fmt::format("{}{} {}{}", qdisc,
                     c.shape.nolock ? "nolock" : "rootlock",
                     c.shape.dedicated ? "dedicated" : "inline", sim);
}

bool ShapesVary(const std::vector<CellConfig>& cells) {
  for (const auto& c : cells)
    if (ShapeName(c) != ShapeName(cells.front())) return true;
  return false;
}

namespace {
// Appends `v` to `list` unless it is there already (the header's lists keep the cells' order).
void AddOnce(std::vector<std::string>& list, std::string v) {
  if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(std::move(v));
}

// The TCP Small Queues caps of the cells that run them (TsqActive): "N bytes" where they share
// one, else each cap with its policies ("1048576 (count:1, count:32), 131072 (linux-2014)
// bytes": EraTsqBytes gives each policy its kernel's); empty where no cell runs them.
std::string TsqCaps(const std::vector<CellConfig>& cells) {
  std::vector<std::pair<uint64_t, std::vector<std::string>>> caps;  // in cell order
  for (const auto& cell : cells) {
    if (!TsqActive(cell)) continue;
    auto it = std::find_if(caps.begin(), caps.end(),
                           [&cell](const auto& p) { return p.first == cell.tsq; });
    if (it == caps.end()) it = caps.insert(caps.end(), {cell.tsq, {}});
    AddOnce(it->second, cell.policy.ToString());
  }
  if (caps.empty()) return "";
  if (caps.size() == 1) return fmt::format("{} bytes", caps.front().first);
  std::vector<std::string> each;
  for (const auto& [cap, policies] : caps)
    each.push_back(fmt::format("{} ({})", cap, fmt::join(policies, ", ")));
  return fmt::format("{} bytes", fmt::join(each, ", "));
}

// The header's words for the qdisc shapes and the producers ("pfifo_fast (3 bands x 1000),
// runner inline, sync rootlock, producers stream (…)").
std::string ShapeSentence(const std::vector<CellConfig>& cells, const std::string& tsq_caps) {
  const CellConfig& c = cells.front();
  const std::string producers =
      !c.stream          ? "datagram (drop on a full qdisc)"
      : tsq_caps.empty() ? "stream (block on a full qdisc; fq_codel's never is)"
                         : fmt::format(
                               "stream (block on a full qdisc, fq_codel's never is, and beyond {} "
                               "below the socket: TCP Small Queues, on emu drivers)",
                               tsq_caps);
  std::string shape;
  if (ShapesVary(cells)) {
    std::vector<std::string> names;
    for (const auto& cell : cells) AddOnce(names, ShapeName(cell));
    shape = fmt::format(
        "qdisc shapes {} (pfifo_fast: 3 bands x {}, pfifo: 1, fq_codel: its own limit; named "
        "on each row), "
        "producers {}",
        fmt::join(names, ", "), c.txqueuelen, producers);
  } else if (c.shape.noqueue) {
    shape = "qdisc none (each producer batches its own frames; refused ones are dropped)";
  } else {
    shape =
        c.shape.fq_codel
            ? fmt::format("fq_codel ({}), runner {}, sync rootlock, producers {}",
                          DescribeFqCodel(*c.shape.fq_codel),
                          c.shape.dedicated ? "dedicated" : "inline", producers)
            : fmt::format("{} ({} x {}), runner {}, sync {}, producers {}",
                          c.shape.pfifo ? "pfifo" : "pfifo_fast",
                          c.shape.pfifo ? "1 band" : "3 bands", c.txqueuelen,
                          c.shape.dedicated ? "dedicated" : "inline",
                          c.shape.nolock ? "nolock" : "rootlock", producers);
  }
  return shape;
}

}  // namespace

void PrintHeader(std::FILE* out, const std::vector<CellConfig>& cells, const RunEnv& env) {
  const CellConfig& c = cells.front();
  const std::string tsq_caps = TsqCaps(cells);
  const std::string shape = ShapeSentence(cells, tsq_caps);
  // GSO frames (gso.h): who cuts them, and how large they are.
  std::string offload;
  if (c.proto == Proto::kTcp && c.offload != Offload::kNone) {
    const unsigned mss = MaxPayload(c.proto, c.mtu);
    offload = fmt::format(" (offload {}: GSO frames of up to {} x {} B, cut by {})",
                          OffloadName(c.offload), GsoSizeGoal(mss) / mss, mss,
                          c.offload == Offload::kTso ? "the NIC" : "the stack before the driver");
  }
  fmt::print(out, "txbatch {} — batched TX, {} framing{}, MTU {}, {}, rate {}\n", TXBATCH_VERSION,
             ProtoName(c.proto), offload, c.mtu, shape, c.rate.ToString());
  // rte_version() says "DPDK 22.11.11" itself; older records may hold the bare number.
  const std::string dpdk =
      env.dpdk_version.starts_with("DPDK") ? env.dpdk_version : "DPDK " + env.dpdk_version;
  fmt::print(out, "{}; EAL {} ({}): {}\n", dpdk, env.eal_mode, env.eal_why,
             fmt::join(env.eal_args, " "));
  fmt::print(out, "CPU {}, TSC {:.3f} GHz; {}\n", env.cpu, env.tsc_hz / 1e9, env.pinning);
  // A kernel policy on another era's qdisc (an explicit --sync): once per sentence.
  std::vector<std::string> mixes;
  for (const auto& cell : cells)
    if (std::string m = EraMix(cell); !m.empty()) AddOnce(mixes, std::move(m));
  for (const auto& m : mixes) fmt::print(out, "note: {}\n", m);
  // TCP Small Queues where some cells run them and others, on drivers whose completions are not
  // seen, cannot (TsqActive): which drivers' cells ran without them.
  std::vector<std::string> without_tsq;
  for (const auto& cell : cells)
    if (!tsq_caps.empty() && !cell.driver_spec.emulated())
      AddOnce(without_tsq, cell.driver_spec.ToString());
  if (!without_tsq.empty())
    fmt::print(out,
               "note: TCP Small Queues ({} below a socket) run on emu drivers only, whose "
               "completions release the bytes: the cells of {} ran without them (config.tsq "
               "null)\n",
               tsq_caps, fmt::join(without_tsq, ", "));
  std::set<std::string> drivers;
  bool emulated = false;
  for (const auto& cell : cells) {
    drivers.insert(cell.driver_spec.ToString());
    emulated |= cell.driver_spec.emulated();
  }
  for (const auto& d : drivers) {
    const auto ll = env.link_layers.find(d);
    fmt::print(out, "driver {}{}\n", d,
               ll == env.link_layers.end() ? std::string()
               : ll->second == "roce_v2"
                   ? " on link layer roce_v2 (RoCE v2: the datagrams in UDP/IP over Ethernet)"
                   : fmt::format(" on link layer {}", ll->second));
  }
  for (const auto& cell : cells)
    if (cell.engine == Engine::kSim) {
      fmt::print(out,
                 "engine sim (rows marked sim): one thread steps producers, runner and txirq on "
                 "a virtual clock of {:.3f} GHz, {}; CPU costs from the cost model ({}); cycles, "
                 "CPU ns and latency are the model's, not measured\n",
                 cell.cost.tsc_hz / 1e9,
                 cell.cost.cpus == 0 ? std::string("each on a CPU of its own (no scheduler)")
                                     : fmt::format("sharing {} CPUs as the real engine places them",
                                                   cell.cost.cpus),
                 cell.cost.source);
      break;
    }
  if (c.link)
    fmt::print(out, "link behind the wire (netem's words, every value explicit): {}\n",
               c.link->ToString());
  if (emulated)
    fmt::print(out,
               "  (emu: an emulated NIC: the doorbell and descriptor costs are injected "
               "busy-waits and the wire is modelled; not measured hardware)\n");
  // XPS as asked: more queues than producers (the probe among them) leaves some idle; say so,
  // once per pair.
  std::set<std::pair<unsigned, unsigned>> idle;
  for (const auto& cell : cells)
    if (cell.queues > Producers(cell)) idle.insert({Producers(cell), cell.queues});
  for (const auto& [procs, queues] : idle)
    fmt::print(out,
               "note: procs {} with --queues {}: {} no producer (producer i sends on queue i mod "
               "queues)\n",
               procs, queues,
               queues - procs == 1 ? fmt::format("queue {} carries", procs)
                                   : fmt::format("queues {}..{} carry", procs, queues - 1));
  fmt::print(out,
             "each cell: {:g} s warm-up, {:g} s measured, then a drain; throughput counted at "
             "the wire (emu), on receive (loopback ports) or where the driver accepts frames{}\n",
             c.warmup_s, c.duration_s,
             c.timing && c.latency_sample > 1
                 ? fmt::format("; latency on a sample, one frame in {} of each producer "
                               "(--latency-sample: the others carry no stamp)",
                               c.latency_sample)
                 : "");
}

namespace {

// Where the latency goes, one row per cell that carried stage timestamps.
void PrintLatencyStages(std::FILE* out, const std::vector<CellSummary>& rows) {
  // One unit a column, over every row that has stages.
  std::vector<std::vector<std::optional<double>>> columns(7);
  for (const CellSummary& c : rows) {
    const std::optional<double> before = c.Find(Metric::kBeforeDriverP50Ns);
    if (!before) continue;
    const bool fill = c.before_driver_is_batch_fill;
    int i = 0;
    for (const std::optional<double>& v :
         {fill ? std::nullopt : before, fill ? before : std::nullopt,
          c.Find(Metric::kDriverRingP50Ns), c.Find(Metric::kWireP50Ns),
          c.Find(Metric::kLatP50Ns), c.first_in_batch_p50_ns, c.last_in_batch_p50_ns})
      columns[i++].push_back(v);
  }
  std::vector<LatencyUnit> units;
  for (const auto& col : columns) units.push_back(ColumnUnit(col));
  bool header = false;
  unsigned row = 0;
  for (const CellSummary& c : rows) {
    const std::optional<double> before = c.Find(Metric::kBeforeDriverP50Ns);
    if (!before) continue;
    if (!header) {
      fmt::print(out,
                 "\nWhere the latency goes (p50 per stage, medians over rounds; qdisc: waiting to "
                 "be dequeued; fill: waiting in a producer's own batch (--qdisc none); driver: "
                 "call and ring up to the wire, or up to receive where no wire is modelled; "
                 "wire: on the wire and through the link (--link); "
                 "first/last: whole latency of the first frame of a driver call and of the "
                 "last positions):\n");
      fmt::print(out, "{:<4}{:>8} {:>6} {:<14} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  {}\n",
                 "#", "Size", "Procs", "policy", "qdisc", "fill", "driver", "wire", "total",
                 "first", "last", "last positions");
      header = true;
    }
    const bool fill = c.before_driver_is_batch_fill;
    fmt::print(out, "{:<4}{:>8} {:>6} {:<14} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  {}\n",
               ++row, c.config.size, c.config.procs, c.config.policy.ToString(),
               fill ? "-" : LatencyText(before, units[0]), fill ? LatencyText(before, units[1]) : "-",
               LatencyText(c.Find(Metric::kDriverRingP50Ns), units[2]),
               LatencyText(c.Find(Metric::kWireP50Ns), units[3]),
               LatencyText(c.Find(Metric::kLatP50Ns), units[4]),
               LatencyText(c.first_in_batch_p50_ns, units[5]),
               LatencyText(c.last_in_batch_p50_ns, units[6]), c.last_positions);
  }
}

}  // namespace

// --per-flow: a row per flow of each cell run that has them (rounds apart: a flow's frames are
// its own run's), latency in one unit a column.
void PrintFlows(std::FILE* out, const std::vector<CellRecord>& records) {
  std::vector<std::optional<double>> p50s, p99s;
  for (const CellRecord& rec : records)
    for (const auto& f : rec.result.flows) {
      p50s.push_back(f.latency ? std::optional(f.latency->p50) : std::nullopt);
      p99s.push_back(f.latency ? std::optional(f.latency->p99) : std::nullopt);
    }
  if (p50s.empty()) return;
  const LatencyUnit u50 = ColumnUnit(p50s), u99 = ColumnUnit(p99s);
  fmt::print(out,
             "\nPer flow (a flow's frames: a producer's, one of its --flows; counted over each "
             "cell run, latency of those in its window):\n{:<14} {:>8} {:>6} {:>6} {:>5} {:>12} {:>9} {:>10} {:>9} {:>9} "
             "{:>9}  {}\n",
             "Policy", "Size", "Procs", "Round", "Flow", "Received", "Lost", "Duplicated",
             "Reordered", "lat p50", "lat p99", "driver");
  size_t i = 0;
  for (const CellRecord& rec : records)
    for (const auto& f : rec.result.flows) {
      fmt::print(out, "{:<14} {:>8} {:>6} {:>6} {:>5} {:>12} {:>9} {:>10} {:>9} {:>9} {:>9}  {}\n",
                 rec.config.policy.ToString(), rec.config.size, rec.config.procs, rec.round, f.id,
                 f.counts.received, f.counts.lost, f.counts.duplicated, f.counts.reordered,
                 LatencyText(p50s[i], u50), LatencyText(p99s[i], u99), rec.config.driver);
      ++i;
    }
}

// --flows above 1 or --per-flow: how evenly each cell run's load flows were served.
void PrintFairness(std::FILE* out, const std::vector<CellRecord>& records) {
  const auto shown = [](const CellRecord& r) {
    return r.result.fairness && (r.config.flows > 1 || r.config.per_flow);
  };
  if (std::none_of(records.begin(), records.end(), shown)) return;
  fmt::print(out,
             "\nFairness (Jain's index over the load's flows' received frames, (sum x)^2 / "
             "(n sum x^2): 1 every flow alike, 1/n one flow all; the probe left out):\n"
             "{:<14} {:>8} {:>6} {:>6} {:>6} {:>7} {:>12} {:>12}  {}\n",
             "Policy", "Size", "Procs", "Flows", "Round", "Jain", "Least", "Most",
             "driver [qdisc shape]");
  for (const CellRecord& rec : records)
    if (const auto& f = rec.result.fairness; shown(rec))
      fmt::print(out, "{:<14} {:>8} {:>6} {:>6} {:>6} {:>7.4f} {:>12} {:>12}  {} [{}]\n",
                 rec.config.policy.ToString(), rec.config.size, rec.config.procs, f->flows,
                 rec.round, f->jain, f->min_received, f->max_received, rec.config.driver,
                 ShapeName(rec.config));
}

// --probe: a row per cell run, the probe's flow beside the load (what a sparse flow waits).
void PrintProbe(std::FILE* out, const std::vector<CellRecord>& records) {
  std::vector<std::optional<double>> p50s, p99s;
  for (const CellRecord& rec : records)
    if (const auto& p = rec.result.probe) {
      p50s.push_back(p->latency ? std::optional(p->latency->p50) : std::nullopt);
      p99s.push_back(p->latency ? std::optional(p->latency->p99) : std::nullopt);
    }
  if (p50s.empty()) return;
  const LatencyUnit u50 = ColumnUnit(p50s), u99 = ColumnUnit(p99s);
  fmt::print(out,
             "\nProbe ({} of 60-byte frames, UDP datagrams of the txbatch header alone, a flow "
             "of its own beside the load; counted over each cell run, latency of those in its "
             "window; lost: after the qdisc):\n{:<14} {:>8} {:>6} {:>6} "
             "{:>9} {:>6} {:>9} {:>9}  {}\n",
             records.front().config.probe ? records.front().config.probe->ToString() : "-",
             "Policy", "Size", "Procs", "Round", "Received", "Lost", "lat p50", "lat p99",
             "driver [qdisc shape]");
  size_t i = 0;
  for (const CellRecord& rec : records)
    if (const auto& p = rec.result.probe) {
      fmt::print(out, "{:<14} {:>8} {:>6} {:>6} {:>9} {:>6} {:>9} {:>9}  {} [{}]\n",
                 rec.config.policy.ToString(), rec.config.size, rec.config.procs, rec.round,
                 p->counts.received, p->counts.lost, LatencyText(p50s[i], u50),
                 LatencyText(p99s[i], u99), rec.config.driver, ShapeName(rec.config));
      ++i;
    }
}

namespace {

// The books of one policy's table, over its cell runs: the sums (the receive side's over the runs
// that have one), BQL's range and stops, whether every run balanced.
struct TableBooks {
  Books sum;
  std::optional<BqlResult> bql;  // end limits' range in `limit`/`limit_max`, stops summed
  uint64_t bql_low = UINT64_MAX;
  bool all_balanced = true;
  unsigned runs = 0, rx_runs = 0;
  uint64_t rx_sent = 0;  // `sent` of the runs that have a receive side

  void Add(const CellResult& r) {
    const Books& k = r.books;
    sum.generated += k.generated;
    sum.sent += k.sent;
    sum.dropped += k.dropped;
    sum.queued += k.queued;
    if (k.rx_side) {
      sum.received += k.received;
      sum.lost += k.lost;
      sum.duplicated += k.duplicated;
      sum.in_flight += k.in_flight;
      sum.dropped_queued += k.dropped_queued;
      rx_sent += k.sent;
      ++rx_runs;
    }
    sum.mbufs_in_use = std::max(sum.mbufs_in_use, k.mbufs_in_use);
    if (const auto& b = r.bql) {
      if (!bql) bql.emplace();
      bql_low = std::min(bql_low, b->limit);
      bql->limit = std::max(bql->limit, b->limit);
      bql->limit_max = std::max(bql->limit_max, b->limit_max);
      bql->stops += b->stops;
    }
    all_balanced &= k.balanced;
    ++runs;
  }

  void Print(std::FILE* out) const {
    fmt::print(out, "books ({} cell runs): generated {} = sent {} + dropped {} + queued {}; ", runs,
               sum.generated, sum.sent, sum.dropped, sum.queued);
    if (rx_runs > 0)
      fmt::print(out, "sent {} + duplicated {}{} = received {} + lost {} + in flight {}{}; ",
                 rx_sent, sum.duplicated,
                 sum.dropped_queued > 0
                     ? fmt::format(" + dropped by the qdisc after queueing {}", sum.dropped_queued)
                     : "",
                 sum.received, sum.lost, sum.in_flight,
                 rx_runs < runs ? fmt::format(" ({} runs with a receive side)", rx_runs) : "");
    else
      fmt::print(out, "nothing receives (counted where the driver accepts frames); ");
    fmt::print(out, "mbufs in use at end {} — {}\n", sum.mbufs_in_use,
               all_balanced ? "balanced" : "NOT BALANCED");
    if (bql)
      fmt::print(out,
                 "BQL: limit at the end of a run {}..{} bytes, at most {}; it stopped the queue "
                 "{} times in the measured windows\n",
                 bql_low, bql->limit, bql->limit_max, bql->stops);
  }
};

// One policy's table: a row per cell (medians over its rounds; against the baseline's same cell
// where `verdicts`), then its books.
void PrintPolicyTable(std::FILE* out, const std::vector<CellSummary>& rows, const PolicySpec& pol,
                      bool verdicts, bool name_shape, LatencyUnit avg_unit, LatencyUnit p99_unit) {
  fmt::print(out, "\n{}\n",
             pol.batching() ? fmt::format("Test with batching ({}):", pol.ToString())
                            : fmt::format("Test without batching ({}):", pol.ToString()));
  fmt::print(out,
             "{:<4}{:>8} {:>6} {:>10} {:>8} {:>6} {:>9} {:>7} {:>9} {:>7} {:>9} {:>9} "
             "{:>8}  {}{}\n",
             "#", "Size", "Procs", "BW (MB/s)", "Mpps", "%ceil", "avg batch", "db/pkt",
             "cycles/pkt", "CPU ns", "lat avg", "lat p99", "requeue",
             verdicts ? fmt::format("{:<13} {:<13} ", "BW vs off", "cycles vs off") : "",
             "driver");
  TableBooks books;
  unsigned row = 0, last_procs = 0;
  for (const CellSummary& c : rows) {
    if (!(c.config.policy == pol)) continue;
    if (row > 0 && c.config.procs != last_procs) fmt::print(out, "\n");
    last_procs = c.config.procs;
    std::string remarks;
    for (const CellRecord* r : c.runs)
      if (std::string x = Remarks(r->result); !x.empty())
        remarks += (c.runs.size() > 1 ? fmt::format(" round {}:", r->round) : "") + x;
    const auto ceiling = c.Find(Metric::kCeilingMbPerS);
    const auto doorbells = c.Find(Metric::kDoorbellsPerPkt);
    fmt::print(
        out,
        "{:<4}{:>8} {:>6} {:>10.2f} {:>8.4f} {:>6} {:>9.2f} {:>7} {:>9.0f} "
        "{:>7.0f} {:>9} {:>9} {:>8.0f}  {}{}{}{}\n",
        ++row, c.config.size, c.config.procs, c.Value(Metric::kMbPerS), c.Value(Metric::kMpps),
        ceiling ? fmt::format("{:.2f}", 100 * c.Value(Metric::kMbPerS) / *ceiling) : "-",
        c.Value(Metric::kAvgBatch), doorbells ? fmt::format("{:.3f}", *doorbells) : "-",
        c.Value(Metric::kCyclesPerPkt), c.Value(Metric::kCpuNsPerPkt),
        LatencyText(c.Find(Metric::kLatAvgNs), avg_unit),
        LatencyText(c.Find(Metric::kLatP99Ns), p99_unit), c.Value(Metric::kRequeues),
        verdicts ? fmt::format("{:<13} {:<13} ", ShortVerdict(c.bw_vs_off, c.bw_verdict),
                               ShortVerdict(c.cycles_vs_off, c.cycles_verdict))
                 : "",
        c.config.driver, name_shape ? " [" + ShapeName(c.config) + "]" : "", remarks);
    for (const CellRecord* rec : c.runs) books.Add(rec->result);
  }
  books.Print(out);
}

}  // namespace

void PrintTables(std::FILE* out, const std::vector<CellRecord>& records,
                 const std::vector<PolicySpec>& policies) {
  if (records.empty() || policies.empty()) return;
  const std::vector<CellSummary> rows = Summarise(records, policies.front());
  size_t rounds = 0;
  for (const auto& r : rows) rounds = std::max(rounds, r.runs.size());
  std::vector<CellConfig> configs;
  for (const auto& rec : records) configs.push_back(rec.config);
  const bool name_shape = ShapesVary(configs);
  // --sync auto gave some policies another sync than batching off's: say what is compared.
  bool auto_mixed = false;
  for (const auto& c : configs)
    auto_mixed |= c.sync_auto && c.shape.nolock != configs.front().shape.nolock;
  if (rounds >= 2)
    fmt::print(out,
               "\n{} interleaved rounds (every cell once per round, in order): each row shows "
               "medians; vs {}: MB/s and cycles/pkt against the same cell without the policy{} "
               "(paired t on log ratios, 95% CI; equiv = within ±{:g}%)\n",
               rounds, policies.front().ToString(),
               auto_mixed ? ", each policy on its kernel's qdisc (--sync auto)" : "",
               kEquivalenceMargin * 100);
  // One unit a latency column, the same in every policy's table (they compare row by row).
  std::vector<std::optional<double>> avgs, p99s;
  for (const CellSummary& c : rows)
    avgs.push_back(c.Find(Metric::kLatAvgNs)), p99s.push_back(c.Find(Metric::kLatP99Ns));
  const LatencyUnit avg_unit = ColumnUnit(avgs), p99_unit = ColumnUnit(p99s);
  for (const PolicySpec& pol : policies)
    PrintPolicyTable(out, rows, pol, rounds >= 2 && !(pol == policies.front()), name_shape,
                     avg_unit, p99_unit);
  fmt::print(out,
             "\n%ceil: BW as a percentage of the wire ceiling for the frame mix actually sent. "
             "db/pkt: doorbells per frame. cycles/pkt: TSC on the TX path (dequeue + xmit). "
             "CPU ns: thread CPU time of producers and txirq per frame. lat: arrival minus "
             "the frame's TX stamp (qdisc wait included).\n");
  PrintLatencyStages(out, rows);
  PrintFlows(out, records);
  PrintFairness(out, records);
  PrintProbe(out, records);
  size_t bound = 0;
  for (const auto& rec : records) bound += rec.result.link_bound.value_or(false) ? 1 : 0;
  if (bound > 0)
    fmt::print(out,
               "link-bound: {} of {} cell runs sent at >= 97% of their link's ceiling for the "
               "frame mix they sent. There batching cannot raise bandwidth; what it buys shows in "
               "cycles/pkt and CPU ns per frame (the CPU the same bytes cost), not in BW.\n",
               bound, records.size());
  std::vector<const CellRecord*> emulator;
  for (const auto& rec : records)
    if (rec.result.emulator_bound.value_or(false)) emulator.push_back(&rec);
  if (!emulator.empty())
    fmt::print(out,
               "emulator-bound: {} of {} cell runs were paced by txbatch's own threads, not the "
               "modelled device or link (the first: {}). Their throughput says what txbatch "
               "could do on this machine, not what the device does: sample latency "
               "(--latency-sample), offer less (--rate) or give producers CPUs of their own.\n",
               emulator.size(), records.size(), emulator.front()->result.emulator_bound_why);
}

std::string PrintAndKeepTables(const std::vector<CellRecord>& records,
                               const std::vector<PolicySpec>& policies) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* mem = open_memstream(&buf, &len);
  if (mem == nullptr) {
    PrintTables(stdout, records, policies);
    return {};
  }
  PrintTables(mem, records, policies);
  std::fclose(mem);
  std::string text(buf, len);
  std::free(buf);
  std::fputs(text.c_str(), stdout);
  return text;
}

}  // namespace txbatch
