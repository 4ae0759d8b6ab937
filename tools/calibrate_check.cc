#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <tuple>

#include "engine/sched_probe.h"
#include "results/records.h"
#include "results/summary.h"
#include "results/tables.h"
#include "results/verdict.h"
#include "tools/calibrate.h"
#include "tools/run_options.h"
#include "tools/session.h"

namespace txbatch {

Result<std::vector<CellConfig>> CheckCells(unsigned cpus, const std::string& cost_model,
                                           double duration_s, double warmup_s) {
  std::string procs = "1";
  for (unsigned p = 2; p <= 4 * std::max(1u, cpus) && p <= 64; p *= 2)
    procs += fmt::format(",{}", p);
  std::vector<CellConfig> cells;
  for (const auto& [driver, proto, size] :
       {std::tuple{"emu:ixgbe", "udp", "64"}, std::tuple{"emu:e1000", "tcp", "65536"}}) {
    RunArgs a;
    a.drivers = {driver};
    a.proto = proto;
    a.size = size;
    a.procs = procs;
    a.batch = "1,32";
    a.sync = "rootlock,nolock";
    a.runner = "inline,dedicated";
    a.engine = "real,sim";
    a.cost_model = cost_model;
    a.duration_s = duration_s;
    a.warmup_s = warmup_s;
    a.rounds = 1;
    auto plan = BuildRunPlan(a);
    if (!plan) return plan.error();
    cells.insert(cells.end(), plan->cells.begin(), plan->cells.end());
  }
  // The training cells: calibrate's own at batch 1 and 32, on both engines, the simulation's
  // with the model checked (the grid's); net_null's have no simulated twin (DPDK's drivers are
  // not simulated).
  const auto sim = std::find_if(cells.begin(), cells.end(),
                                [](const CellConfig& c) { return c.engine == Engine::kSim; });
  if (sim == cells.end()) return cells;
  const CostModel cost = sim->cost;
  for (const Engine engine : {Engine::kReal, Engine::kSim})
    for (const CellConfig& c : CalibrationCells({1, 32}, engine, cost, duration_s, warmup_s))
      if (c.driver_spec.emulated()) cells.push_back(c);
  return cells;
}

namespace {

// `sim` is `real`'s simulated twin: the same cell and policy on the other engine.
bool Twins(const CellConfig& real, const CellConfig& sim) {
  CellConfig as_real = sim;
  as_real.engine = Engine::kReal;
  return real.driver == sim.driver && real.proto == sim.proto && real.size == sim.size &&
         real.procs == sim.procs && real.policy == sim.policy &&
         ShapeName(real) == ShapeName(as_real) && real.bypass == sim.bypass &&
         real.stream == sim.stream && real.rate.unit == sim.rate.unit &&
         real.rate.value == sim.rate.value;
}

}  // namespace

double AgreementBound(const MedianInterval& interval, double median) {
  if (!(median > 0)) return kAgreementFloor;
  return std::max(kAgreementFloor, (interval.hi - interval.lo) / median);
}

bool AsCalibrated(double line_pass, double calibrated) {
  return line_pass > 0 && calibrated > 0 && line_pass <= calibrated * kMachineStateFactor &&
         line_pass * kMachineStateFactor >= calibrated;
}

double CalibratedLinePass(const std::string& path, double tsc_hz) {
  if (path.empty()) return 0;
  std::ifstream in(path);
  const nlohmann::json doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("fit") || !doc.contains("tsc_hz")) return 0;
  const nlohmann::json& fit = doc["fit"];
  if (!fit.is_object() || !fit.contains("scheduler") || !fit["scheduler"].is_object()) return 0;
  // Before 2026-12-08 the probe's time held its threads' start (a main thread starved by the
  // first spinner: up to twice the pass): not this probe's measure.
  if (!fit["scheduler"].value("line_pass_from_ready", false)) return 0;
  const nlohmann::json& line = fit["scheduler"].value("line_pass_cycles", nlohmann::json());
  const nlohmann::json& hz = doc["tsc_hz"];
  if (!line.is_number() || !hz.is_number() || !(tsc_hz > 0)) return 0;
  // Another machine's TSC: its cycles are not this one's.
  if (std::abs(hz.get<double>() / tsc_hz - 1) > 0.02) return 0;
  return std::max(0.0, line.get<double>());
}

std::string DisturbedBy(const CellRecord& r, double line_before, double line_after,
                        double calibrated) {
  std::vector<std::string> why;
  if (const auto& m = r.result.machine; m && r.result.window_s > 0) {
    // A difference of two reads of a counter is off by less than a tick a CPU: a share that
    // many ticks could make of nothing is not a disturbance (steal one counter, the rest three:
    // idle, iowait and steal). 0.2-s windows: 5 % and 15 %.
    const double tick = 1.0 / (static_cast<double>(sysconf(_SC_CLK_TCK)) * r.result.window_s);
    if (m->steal_share - tick >= kDisturbedShare)
      why.push_back(fmt::format("steal {:.0f} %", m->steal_share * 100));
    if (m->others_share - 3 * tick >= kDisturbedShare)
      why.push_back(fmt::format("other tasks {:.0f} %", m->others_share * 100));
  }
  if (r.result.txirq_realtime && r.result.irq_max_late_us >= kHostStallS * 1e6)
    why.push_back(fmt::format("txirq {:.1f} ms late", r.result.irq_max_late_us / 1e3));
  if (line_before > 0 && line_after > 0) {
    const bool moved = calibrated > 0 ? !AsCalibrated(line_before, calibrated) ||
                                            !AsCalibrated(line_after, calibrated)
                                      : !AsCalibrated(line_after, line_before);
    if (moved && calibrated > 0)
      why.push_back(
          fmt::format("the machine not as calibrated (a cache line {:.0f} -> {:.0f} "
                      "cycles, the model's {:.0f})",
                      line_before, line_after, calibrated));
    else if (moved)
      why.push_back(fmt::format("the machine moved (a cache line {:.0f} -> {:.0f} cycles)",
                                line_before, line_after));
  }
  return fmt::format("{}", fmt::join(why, ", "));
}

std::vector<CheckRow> CheckRows(const std::vector<CellRecord>& records, unsigned cpus,
                                std::span<const std::string> disturbed) {
  // Each real cell's clean and disturbed rounds (cells by their index in the plan).
  std::map<int, unsigned> clean, hit;
  const auto is_disturbed = [&](size_t i) { return i < disturbed.size() && !disturbed[i].empty(); };
  for (size_t i = 0; i < records.size(); ++i)
    if (records[i].config.engine == Engine::kReal)
      (is_disturbed(i) ? hit : clean)[records[i].cell]++;
  const auto too_disturbed = [&](int cell) {
    return hit.count(cell) != 0 && clean[cell] < kMinCleanRounds;
  };
  std::vector<CellRecord> kept;
  for (size_t i = 0; i < records.size(); ++i)
    if (!is_disturbed(i) || too_disturbed(records[i].cell)) kept.push_back(records[i]);
  // Medians per cell, and batching's verdict against the same cell at count:1, as every table.
  const std::vector<CellSummary> cells = Summarise(kept, PolicySpec{PolicyKind::kCount, 1});
  std::vector<CheckRow> rows;
  for (const CellSummary& real : cells) {
    if (real.config.engine != Engine::kReal) continue;
    const auto sim = std::find_if(cells.begin(), cells.end(), [&](const CellSummary& s) {
      return s.config.engine == Engine::kSim && Twins(real.config, s.config);
    });
    if (sim == cells.end()) continue;
    CheckRow row;
    row.cell = real.config;
    row.threads = row.cell.procs + (row.cell.shape.dedicated ? 1 : 0);
    const int index = real.runs.empty() ? -1 : real.runs.front()->cell;
    row.rounds_disturbed = hit.count(index) != 0 ? hit[index] : 0;
    row.too_disturbed = too_disturbed(index);
    row.rounds_judged = row.too_disturbed ? 0 : static_cast<unsigned>(real.runs.size());
    row.real_mpps = real.Value(Metric::kMpps);
    row.real_cycles = real.Value(Metric::kCyclesPerPkt);
    // The real median's distribution-free 95 % interval (its rounds' order statistics), and the
    // bound it sets: the simulation within max(15 %, twice the interval's half-width) of the
    // median — the reference's own spread, not a tighter bar than its noise.
    std::vector<double> mpps, cycles;
    for (const CellRecord* r : real.runs) {
      mpps.push_back(r->result.mpps);
      cycles.push_back(r->result.cycles_per_pkt);
    }
    const MedianInterval mi = MedianIntervalOf(mpps), ci = MedianIntervalOf(cycles);
    row.real_mpps_rounds = mpps;
    row.real_cycles_rounds = cycles;
    row.real_lo = mi.lo;
    row.real_hi = mi.hi;
    row.real_cycles_lo = ci.lo;
    row.real_cycles_hi = ci.hi;
    row.coverage = mi.coverage;
    row.mpps_bound = AgreementBound(mi, row.real_mpps);
    row.cycles_bound = AgreementBound(ci, row.real_cycles);
    row.sim_mpps = sim->Value(Metric::kMpps);
    row.sim_cycles = sim->Value(Metric::kCyclesPerPkt);
    const auto sleeps = [](const CellSummary& s) {
      std::vector<double> v;
      for (const CellRecord* r : s.runs)
        if (r->result.packets > 0)
          v.push_back(1e3 * static_cast<double>(r->result.voluntary_ctxsw) /
                      static_cast<double>(r->result.packets));
      return v.empty() ? 0.0 : Median(v);
    };
    row.real_sleeps = sleeps(real);
    row.sim_sleeps = sleeps(*sim);
    row.oversubscribed = row.threads > cpus;
    row.series = CalibrationSeries(row.cell);
    const auto within = [](double sim_v, double real_v, double bound) {
      return real_v > 0 && std::abs(sim_v / real_v - 1) <= bound;
    };
    const bool mpps_ok = within(row.sim_mpps, row.real_mpps, row.mpps_bound);
    const bool cycles_ok = within(row.sim_cycles, row.real_cycles, row.cycles_bound);
    row.undecided = row.too_disturbed || row.mpps_bound >= kAgreementCeiling ||
                    row.cycles_bound >= kAgreementCeiling;
    row.agrees = !row.undecided && mpps_ok && cycles_ok;
    if (row.too_disturbed) {
      row.why = fmt::format("undecided ({} of {} rounds disturbed)", row.rounds_disturbed,
                            real.runs.size());
    } else if (row.undecided) {
      row.why = fmt::format("undecided (real spread {:.0f} %, {:.0f} %)", row.mpps_bound * 100,
                            row.cycles_bound * 100);
    } else if (row.agrees) {
      row.why = fmt::format("agrees (within {:.0f} %, {:.0f} %)", row.mpps_bound * 100,
                            row.cycles_bound * 100);
    } else {
      const auto ratio = [](double sim_v, double real_v) {
        return real_v > 0 ? sim_v / real_v : 0;
      };
      row.why = fmt::format(
          "off:{}{}",
          mpps_ok ? "" : fmt::format(" Mpps {:.2f}x", ratio(row.sim_mpps, row.real_mpps)),
          cycles_ok ? "" : fmt::format(" cycles {:.2f}x", ratio(row.sim_cycles, row.real_cycles)));
    }
    if (real.bw_vs_off && sim->bw_vs_off) {
      row.batching_real = VerdictName(real.bw_verdict);
      row.batching_sim = VerdictName(sim->bw_verdict);
    }
    rows.push_back(std::move(row));
  }
  // Batching is judged on clean rounds alone: not where the batched cell or its batch-1 twin
  // kept disturbed ones (too few clean).
  for (CheckRow& row : rows) {
    if (row.batching_real.empty()) continue;
    const bool base_disturbed = std::any_of(rows.begin(), rows.end(), [&](const CheckRow& b) {
      return b.too_disturbed && b.cell.policy == PolicySpec{PolicyKind::kCount, 1} &&
             SameCellOtherPolicy(b.cell, row.cell);
    });
    if (!row.too_disturbed && !base_disturbed) continue;
    row.batching_real.clear();
    row.batching_sim.clear();
    row.batching_disturbed = true;
  }
  return rows;
}

nlohmann::json CheckRowsJson(std::span<const CheckRow> rows) {
  nlohmann::json out = nlohmann::json::array();
  for (const CheckRow& r : rows) {
    const auto side = [](double median, double lo, double hi, double bound, double sim,
                         const std::vector<double>& rounds) {
      return nlohmann::json{{"real_median", median}, {"real_lo", lo},  {"real_hi", hi},
                            {"real_rounds", rounds}, {"bound", bound}, {"sim", sim}};
    };
    out.push_back(
        {{"driver", r.cell.driver},
         {"proto", ProtoName(r.cell.proto)},
         {"size", r.cell.size},
         {"procs", r.cell.procs},
         {"sync", r.cell.shape.nolock ? "nolock" : "rootlock"},
         {"runner", r.cell.shape.dedicated ? "dedicated" : "inline"},
         {"policy", r.cell.policy.ToString()},
         {"set", r.series.empty() ? "held_out" : "training"},
         {"series", r.series.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.series)},
         {"oversubscribed", r.oversubscribed},
         {"coverage", r.coverage},
         {"mpps",
          side(r.real_mpps, r.real_lo, r.real_hi, r.mpps_bound, r.sim_mpps, r.real_mpps_rounds)},
         {"cycles_per_pkt", side(r.real_cycles, r.real_cycles_lo, r.real_cycles_hi, r.cycles_bound,
                                 r.sim_cycles, r.real_cycles_rounds)},
         {"rounds_judged", r.rounds_judged},
         {"rounds_disturbed", r.rounds_disturbed},
         {"agrees", r.agrees},
         {"undecided", r.undecided},
         {"batching_real",
          r.batching_real.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.batching_real)},
         {"batching_sim",
          r.batching_sim.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.batching_sim)},
         {"batching_disturbed", r.batching_disturbed}});
  }
  return out;
}

CheckTally Tally(std::span<const CheckRow> rows) {
  CheckTally t;
  for (const CheckRow& r : rows) {
    ++t.cells;
    t.agree += r.agrees;
    t.undecided += r.undecided;
    t.too_disturbed += r.too_disturbed;
    t.rounds_disturbed += r.rounds_disturbed;
    if (!r.series.empty()) {
      ++t.train_cells;
      t.train_agree += r.agrees;
    } else {
      (r.oversubscribed ? t.over_cells : t.fit_cells) += 1;
      (r.oversubscribed ? t.over_agree : t.fit_agree) += r.agrees;
    }
    if (r.batching_real.empty()) continue;
    ++t.judged;
    const bool same = r.batching_real == r.batching_sim;
    t.same += same;
    if (r.batching_real == "inconclusive") continue;
    ++t.decisive;
    t.decisive_same += same;
  }
  return t;
}

bool CheckHolds(const CheckTally& t) {
  return t.cells > 0 && t.agree == t.cells && t.same == t.judged;
}

namespace {

// The check's tables — the held-out cells, then the training cells (a row a cell: both
// engines' Mpps and cycles/pkt, their ratios, the sleeps, the verdict and batching's on each
// engine; a training cell named by its series) — and the tally under them.
void PrintCheckTable(const std::vector<CheckRow>& rows, const CheckTally& t, unsigned cpus) {
  for (const bool training : {false, true}) {
    if (training && t.train_cells == 0) break;
    fmt::print(
        "\n{}\n{:<10} {:<4} {:>5} {:>5} {:<8} {:<9} {:>6} {:>20} {:>6} {:>6} {:>8} {:>8} {:>6} "
        "{:>13}  {:<28} {}\n",
        training ? "training cells: calibrate's own, the model was fitted on these"
                 : "held-out cells: the model was fitted on none of them",
        training ? "series" : "driver", "prot", "size", "procs", "sync", "runner", "batch",
        "real Mpps (interval)", "sim", "s/r", "real cyc", "sim cyc", "s/r", "sleeps/kpkt",
        "verdict", "batching real / sim");
    for (const CheckRow& r : rows) {
      if (r.series.empty() == training) continue;
      const bool judged = !r.batching_real.empty();
      fmt::print(
          "{:<10} {:<4} {:>5} {:>5} {:<8} {:<9} {:>6} {:>7.3f} ({:.2f}-{:.2f}) {:>7.3f} {:>6.2f} "
          "{:>8.0f} {:>8.0f} {:>6.2f} {:>6.1f}/{:<6.1f}  {:<28} {}\n",
          training ? r.series : r.cell.driver, ProtoName(r.cell.proto), r.cell.size, r.cell.procs,
          r.cell.shape.nolock ? "nolock" : "rootlock",
          r.cell.shape.dedicated ? "dedicated" : "inline", r.cell.policy.ToString(), r.real_mpps,
          r.real_lo, r.real_hi, r.sim_mpps, r.real_mpps > 0 ? r.sim_mpps / r.real_mpps : 0.0,
          r.real_cycles, r.sim_cycles, r.real_cycles > 0 ? r.sim_cycles / r.real_cycles : 0.0,
          r.real_sleeps, r.sim_sleeps, r.why,
          judged                 ? fmt::format("{} / {}{}", r.batching_real, r.batching_sim,
                               r.batching_real == r.batching_sim ? "" : "  (differ)")
          : r.batching_disturbed ? std::string("not judged: rounds disturbed")
                                 : std::string());
    }
  }
  // Of the held-out cells (training = false) or the training ones: the intervals' coverage (the
  // same in every cell unless rounds were left out of some) and the undecided, by why.
  const auto coverage = [&](bool training) {
    double lo = 1, hi = 0;
    for (const CheckRow& r : rows)
      if (r.series.empty() != training)
        lo = std::min(lo, r.coverage), hi = std::max(hi, r.coverage);
    if (hi == 0) return std::string("no interval");
    const std::string range = lo == hi ? fmt::format("a {:.1f} %", lo * 100)
                                       : fmt::format("a {:.1f} % to {:.1f} %", lo * 100, hi * 100);
    return range + " interval with these rounds" +
           (lo < 0.95 ? "; 6 or more judged rounds give 95 %" : "");
  };
  const auto undecided = [&](bool training) {
    unsigned spread = 0, disturbed = 0;
    for (const CheckRow& r : rows)
      if (r.series.empty() != training && r.undecided) ++(r.too_disturbed ? disturbed : spread);
    std::vector<std::string> why;
    if (spread > 0)
      why.push_back(
          fmt::format("{} with a bound of {:.0f} % or more, the real rounds too spread "
                      "to judge by",
                      spread, kAgreementCeiling * 100));
    if (disturbed > 0)
      why.push_back(fmt::format("{} with fewer than {} clean rounds", disturbed, kMinCleanRounds));
    return why.empty()
               ? std::string()
               : fmt::format("; {} undecided: {}", spread + disturbed, fmt::join(why, ", "));
  };
  fmt::print(
      "\n{} of {} held-out cells agree ({} of {} with no more threads than the {} CPUs, {} of {} "
      "beyond; Mpps and cycles/pkt each within max(15 %, twice the half-width of the real "
      "median's interval: its rounds' order statistics, {}) of the real median{}); {} of {} "
      "training cells{}; batching's verdict the same on both engines in {} of {} ({} of the {} "
      "the real rounds decided: not inconclusive).\n",
      t.fit_agree + t.over_agree, t.fit_cells + t.over_cells, t.fit_agree, t.fit_cells, cpus,
      t.over_agree, t.over_cells, coverage(false), undecided(false), t.train_agree, t.train_cells,
      undecided(true), t.same, t.judged, t.decisive_same, t.decisive);
}

// What the machine did to the real runs (DisturbedBy): the cache line's passes around them, how
// many were disturbed and by what, the first kListed of them, and the cells left undecided.
void PrintDisturbances(const std::vector<CellRecord>& records,
                       const std::vector<std::string>& disturbed,
                       const std::vector<std::pair<double, double>>& lines, double calibrated,
                       int cpu_a, int cpu_b, const CheckTally& t) {
  constexpr size_t kListed = 10;
  double lo = 0, hi = 0;
  size_t real = 0;
  std::vector<size_t> hit;
  std::map<std::string, unsigned> causes;
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].config.engine != Engine::kReal) continue;
    ++real;
    for (const double v : {lines[i].first, lines[i].second}) {
      if (!(v > 0)) continue;
      lo = lo > 0 ? std::min(lo, v) : v;
      hi = std::max(hi, v);
    }
    if (disturbed[i].empty()) continue;
    hit.push_back(i);
    for (const char* cause : {"steal", "other tasks", "txirq", "the machine"})
      causes[cause] += disturbed[i].find(cause) != std::string::npos;
  }
  std::vector<std::string> by;
  for (const auto& [cause, n] : causes)
    if (n > 0) by.push_back(fmt::format("{} {}", cause, n));
  const std::string line =
      hi > 0 ? fmt::format(
                   "a cache line passed between CPUs {} and {} in {:.0f}-{:.0f} cycles "
                   "(calibrate's probe for the cost model: {})",
                   cpu_a, cpu_b, lo, hi,
                   calibrated > 0
                       ? fmt::format("{:.0f}", calibrated)
                       : std::string("none, so a run is judged against the line's pass before it"))
             : std::string("one CPU, no cache line to pass");
  fmt::print("\nthe machine around each real run: {}; {} of {} real runs disturbed{}{}\n", line,
             hit.size(), real, by.empty() ? "" : fmt::format(" ({})", fmt::join(by, ", ")),
             hit.empty()
                 ? std::string()
                 : fmt::format(" and left out of the verdicts{}",
                               t.too_disturbed == 0
                                   ? std::string()
                                   : fmt::format("; {} cell{} kept fewer than {} clean rounds: "
                                                 "undecided",
                                                 t.too_disturbed, t.too_disturbed > 1 ? "s" : "",
                                                 kMinCleanRounds)));
  for (size_t k = 0; k < hit.size() && k < kListed; ++k) {
    const CellConfig& c = records[hit[k]].config;
    // A training cell by its series (and its pace: the completion series' two differ by it).
    const std::string series = CalibrationSeries(c);
    fmt::print("  round {} {} {} {} procs {} {} {} {}{}: {}\n", std::max(1, records[hit[k]].round),
               series.empty() ? c.driver : "training " + series, ProtoName(c.proto), c.size,
               c.procs, c.shape.nolock ? "nolock" : "rootlock",
               c.shape.dedicated ? "dedicated" : "inline", c.policy.ToString(),
               c.rate.unit == RateSpec::Unit::kMax ? "" : " at " + c.rate.ToString(),
               disturbed[hit[k]]);
  }
  if (hit.size() > kListed)
    fmt::print("  and {} more (the --json file's check.runs)\n", hit.size() - kListed);
}

}  // namespace

int CheckCommand(const CalibrateArgs& args, const EalUserArgs& eal_user_args, RunEnv env,
                 EalMemory memory, const std::optional<OutputFile>& json) {
  // The grid needs the machine's CPUs before EAL runs: what this process may run on.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  sched_getaffinity(0, sizeof(allowed), &allowed);
  const unsigned cpus = static_cast<unsigned>(std::max(1, CPU_COUNT(&allowed)));
  auto cells = CheckCells(cpus, args.cost_model, args.duration_s, args.warmup_s);
  if (!cells) return Fail(kExitBadInput, cells.error());
  int status = kExitOk;
  auto session = StartSession(*cells, memory, eal_user_args, std::move(env), &status);
  if (!session) return Fail(status, session.error());
  std::vector<CellRecord> records;
  bool balanced = true;
  fmt::print(
      "calibrate --check: {} cells on both engines, {} interleaved rounds, on {} CPUs ({}); "
      "the simulation's cost model: {}\n",
      cells->size() / 2, args.rounds, cpus, session->env.cpu, cells->back().cost.source);
  std::fflush(stdout);
  // The machine around each real run (DisturbedBy): a cache line between its first two CPUs.
  std::vector<int> cpu_list;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpu_list.push_back(c);
  struct Around {
    size_t record = 0;
    double before = 0, after = 0;
  };
  std::vector<Around> around;
  double line_before = 0;
  const auto probe = [&](size_t cell, bool after) {
    if (cpu_list.size() < 2 || (*cells)[cell].engine != Engine::kReal) return;
    const double pass = ProbeLinePass(cpu_list[0], cpu_list[1], kCheckLineRoundTrips);
    if (!after)
      line_before = pass;
    else
      around.push_back({records.size() - 1, line_before, pass});
  };
  MeasureGrid(*cells, args.rounds, *session, 0, records, &status, &balanced, probe);
  if (status != kExitOk) return status;
  // calibrate's own probe of the line for this model, where it measured one on this machine.
  const double calibrated = CalibratedLinePass(args.cost_model, session->env.tsc_hz);
  std::vector<std::string> disturbed(records.size());
  std::vector<std::pair<double, double>> lines(records.size());
  for (const Around& a : around) lines[a.record] = {a.before, a.after};
  for (size_t i = 0; i < records.size(); ++i)
    if (records[i].config.engine == Engine::kReal)
      disturbed[i] = DisturbedBy(records[i], lines[i].first, lines[i].second, calibrated);
  const auto rows = CheckRows(records, cpus, disturbed);
  const CheckTally t = Tally(rows);
  PrintDisturbances(records, disturbed, lines, calibrated, cpu_list.size() > 1 ? cpu_list[0] : 0,
                    cpu_list.size() > 1 ? cpu_list[1] : 0, t);
  PrintCheckTable(rows, t, cpus);
  nlohmann::json doc = ToJson(records, session->env);
  doc["check"]["cells"] = CheckRowsJson(rows);
  doc["check"]["calibrated_line_pass_cycles"] =
      calibrated > 0 ? nlohmann::json(calibrated) : nlohmann::json(nullptr);
  nlohmann::json runs = nlohmann::json::array();
  for (size_t i = 0; i < records.size(); ++i) {
    if (records[i].config.engine != Engine::kReal) continue;
    const auto line = [](double v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
    runs.push_back({{"record", i},
                    {"line_pass_before", line(lines[i].first)},
                    {"line_pass_after", line(lines[i].second)},
                    {"disturbed", disturbed[i].empty() ? nlohmann::json(nullptr)
                                                       : nlohmann::json(disturbed[i])}});
  }
  doc["check"]["runs"] = runs;
  session->pool.reset();
  const int finished = Finish(json, doc, status, balanced);
  if (finished != kExitOk || !args.strict || CheckHolds(t)) return finished;
  fmt::print(stderr,
             "txbatch: calibrate --check --strict: the simulation does not agree with this "
             "machine ({} of {} cells agree, batching's verdict the same in {} of {}): exit "
             "5\n",
             t.agree, t.cells, t.same, t.judged);
  return kExitPoorFit;
}

}  // namespace txbatch
