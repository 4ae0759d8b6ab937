#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
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
  return cells;
}

namespace {

// `sim` is `real`'s simulated twin: the same cell and policy on the other engine.
bool Twins(const CellConfig& real, const CellConfig& sim) {
  CellConfig as_real = sim;
  as_real.engine = Engine::kReal;
  return real.driver == sim.driver && real.proto == sim.proto && real.size == sim.size &&
         real.procs == sim.procs && real.policy == sim.policy &&
         ShapeName(real) == ShapeName(as_real);
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
  const nlohmann::json& line = fit["scheduler"].value("line_pass_cycles", nlohmann::json());
  const nlohmann::json& hz = doc["tsc_hz"];
  if (!line.is_number() || !hz.is_number() || !(tsc_hz > 0)) return 0;
  // Another machine's TSC: its cycles are not this one's.
  if (std::abs(hz.get<double>() / tsc_hz - 1) > 0.02) return 0;
  return std::max(0.0, line.get<double>());
}

std::vector<CheckRow> CheckRows(const std::vector<CellRecord>& records, unsigned cpus,
                                std::span<const int> rounds) {
  std::vector<CellRecord> kept;
  for (const CellRecord& r : records)
    if (rounds.empty() ||
        std::find(rounds.begin(), rounds.end(), std::max(1, r.round)) != rounds.end())
      kept.push_back(r);
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
    const auto within = [](double sim_v, double real_v, double bound) {
      return real_v > 0 && std::abs(sim_v / real_v - 1) <= bound;
    };
    const bool mpps_ok = within(row.sim_mpps, row.real_mpps, row.mpps_bound);
    const bool cycles_ok = within(row.sim_cycles, row.real_cycles, row.cycles_bound);
    row.undecided = row.mpps_bound >= kAgreementCeiling || row.cycles_bound >= kAgreementCeiling;
    row.agrees = !row.undecided && mpps_ok && cycles_ok;
    if (row.undecided) {
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
    out.push_back({{"driver", r.cell.driver},
                   {"proto", ProtoName(r.cell.proto)},
                   {"size", r.cell.size},
                   {"procs", r.cell.procs},
                   {"sync", r.cell.shape.nolock ? "nolock" : "rootlock"},
                   {"runner", r.cell.shape.dedicated ? "dedicated" : "inline"},
                   {"policy", r.cell.policy.ToString()},
                   {"oversubscribed", r.oversubscribed},
                   {"coverage", r.coverage},
                   {"mpps", side(r.real_mpps, r.real_lo, r.real_hi, r.mpps_bound, r.sim_mpps,
                                 r.real_mpps_rounds)},
                   {"cycles_per_pkt", side(r.real_cycles, r.real_cycles_lo, r.real_cycles_hi,
                                           r.cycles_bound, r.sim_cycles, r.real_cycles_rounds)},
                   {"agrees", r.agrees},
                   {"undecided", r.undecided},
                   {"batching_real", r.batching_real.empty() ? nlohmann::json(nullptr)
                                                             : nlohmann::json(r.batching_real)},
                   {"batching_sim", r.batching_sim.empty() ? nlohmann::json(nullptr)
                                                           : nlohmann::json(r.batching_sim)}});
  }
  return out;
}

CheckTally Tally(std::span<const CheckRow> rows) {
  CheckTally t;
  for (const CheckRow& r : rows) {
    ++t.cells;
    t.agree += r.agrees;
    t.undecided += r.undecided;
    (r.oversubscribed ? t.over_cells : t.fit_cells) += 1;
    (r.oversubscribed ? t.over_agree : t.fit_agree) += r.agrees;
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

// The check's table, a row a cell (both engines' Mpps and cycles/pkt, their ratios, the sleeps,
// the verdict and batching's on each engine), and the tally under it.
void PrintCheckTable(const std::vector<CheckRow>& rows, const CheckTally& t, unsigned cpus) {
  fmt::print(
      "\n{:<10} {:<4} {:>5} {:>5} {:<8} {:<9} {:>6} {:>20} {:>6} {:>6} {:>8} {:>8} {:>6} "
      "{:>13}  {:<28} {}\n",
      "driver", "prot", "size", "procs", "sync", "runner", "batch", "real Mpps (interval)", "sim",
      "s/r", "real cyc", "sim cyc", "s/r", "sleeps/kpkt", "verdict", "batching real / sim");
  for (const CheckRow& r : rows) {
    const bool judged = !r.batching_real.empty();
    fmt::print(
        "{:<10} {:<4} {:>5} {:>5} {:<8} {:<9} {:>6} {:>7.3f} ({:.2f}-{:.2f}) {:>7.3f} {:>6.2f} "
        "{:>8.0f} {:>8.0f} {:>6.2f} {:>6.1f}/{:<6.1f}  {:<28} {}\n",
        r.cell.driver, ProtoName(r.cell.proto), r.cell.size, r.cell.procs,
        r.cell.shape.nolock ? "nolock" : "rootlock",
        r.cell.shape.dedicated ? "dedicated" : "inline", r.cell.policy.ToString(), r.real_mpps,
        r.real_lo, r.real_hi, r.sim_mpps, r.real_mpps > 0 ? r.sim_mpps / r.real_mpps : 0.0,
        r.real_cycles, r.sim_cycles, r.real_cycles > 0 ? r.sim_cycles / r.real_cycles : 0.0,
        r.real_sleeps, r.sim_sleeps, r.why,
        judged ? fmt::format("{} / {}{}", r.batching_real, r.batching_sim,
                             r.batching_real == r.batching_sim ? "" : "  (differ)")
               : std::string());
  }
  const double coverage = rows.empty() ? 0 : rows.front().coverage;
  fmt::print(
      "\n{} of {} cells agree ({} of {} with no more threads than the {} CPUs, {} of {} beyond; "
      "Mpps and cycles/pkt each within max(15 %, twice the half-width of the real median's "
      "interval: its rounds' order statistics, a {:.1f} % interval with these rounds{}) of the "
      "real median{}); batching's verdict the same on both engines in {} of {} ({} of the {} the "
      "real rounds decided: not inconclusive).\n",
      t.agree, t.cells, t.fit_agree, t.fit_cells, cpus, t.over_agree, t.over_cells, coverage * 100,
      coverage < 0.95 ? "; 6 or more judged rounds give 95 %" : "",
      t.undecided == 0
          ? std::string()
          : fmt::format("; {} undecided: a bound of {:.0f} % or more, the real rounds too "
                        "spread to judge by",
                        t.undecided, kAgreementCeiling * 100),
      t.same, t.judged, t.decisive_same, t.decisive);
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
  // The machine's state before each round (AsCalibrated): a cache line between its first two
  // CPUs, the median of three probes.
  std::vector<int> cpu_list;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &allowed)) cpu_list.push_back(c);
  std::vector<double> line(static_cast<size_t>(args.rounds) + 1, 0);
  std::vector<int> probed;
  const auto probe = [&](int round) {
    if (cpu_list.size() < 2) return;
    std::vector<double> passes;
    for (int i = 0; i < 3; ++i) passes.push_back(ProbeLinePass(cpu_list[0], cpu_list[1]));
    line[static_cast<size_t>(round)] = Median(passes);
    probed.push_back(round);
  };
  MeasureGrid(*cells, args.rounds, *session, 0, records, &status, &balanced, probe);
  if (status != kExitOk) return status;
  // calibrate's own probe of the line for this model, where it measured one on this machine.
  const double calibrated = CalibratedLinePass(args.cost_model, session->env.tsc_hz);
  std::vector<int> same, other;
  for (const int r : probed)
    (AsCalibrated(line[static_cast<size_t>(r)], calibrated) ? same : other).push_back(r);
  const auto list = [](const std::vector<int>& v) { return fmt::format("{}", fmt::join(v, ", ")); };
  // Fewer than two rounds cannot judge batching: then every round counts, as with none.
  const bool filtered = !other.empty() && same.size() >= 2;
  if (!probed.empty()) {
    std::vector<std::string> at;
    for (const int r : probed) at.push_back(fmt::format("{:.0f}", line[static_cast<size_t>(r)]));
    std::string verdict;
    if (!(calibrated > 0))
      verdict =
          "the cost model has no line pass calibrate measured on this machine (built in, "
          "another machine's, or not probed): every round is judged";
    else if (other.empty())
      verdict = "every round ran on the machine as calibrated";
    else if (filtered)
      verdict = fmt::format(
          "round{} {} ran on another state of the machine (a factor of {} or more off; a "
          "guest's vCPUs moved between near and far host cores) and {} left out: the cells are "
          "judged on rounds {}",
          other.size() > 1 ? "s" : "", list(other), kMachineStateFactor,
          other.size() > 1 ? "are" : "is", list(same));
    else
      verdict = fmt::format(
          "{} of the rounds ran on the machine as calibrated (the others a factor of {} or more "
          "off: its CPUs' cache moved), fewer than the two a verdict needs: every round is "
          "judged, and the simulation is expected off",
          same.size(), kMachineStateFactor);
    fmt::print(
        "\nthe machine before each round: a cache line passed between CPUs {} and {} in {} "
        "cycles (calibrate's probe for the cost model: {}); {}\n",
        cpu_list[0], cpu_list[1], fmt::join(at, ", "),
        calibrated > 0 ? fmt::format("{:.0f}", calibrated) : std::string("none"), verdict);
  }
  const auto rows =
      CheckRows(records, cpus, filtered ? std::span<const int>{same} : std::span<const int>{});
  const CheckTally t = Tally(rows);
  PrintCheckTable(rows, t, cpus);
  nlohmann::json doc = ToJson(records, session->env);
  doc["check"]["cells"] = CheckRowsJson(rows);
  if (!probed.empty()) {
    nlohmann::json machine = nlohmann::json::array();
    for (const int r : probed)
      machine.push_back(
          {{"round", r},
           {"line_pass_cycles", line[static_cast<size_t>(r)]},
           {"as_calibrated", AsCalibrated(line[static_cast<size_t>(r)], calibrated)},
           {"judged", !filtered || std::find(same.begin(), same.end(), r) != same.end()}});
    doc["check"]["calibrated_line_pass_cycles"] =
        calibrated > 0 ? nlohmann::json(calibrated) : nlohmann::json(nullptr);
    doc["check"]["rounds"] = machine;
  }
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
