// `txbatch tune` (tune_cmd.h).
#include "tools/tune_cmd.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/units.h"
#include "engine/emulator_check.h"
#include "results/latency_text.h"
#include "results/records.h"
#include "results/summary.h"
#include "results/tables.h"
#include "tools/command_outputs.h"
#include "tools/session.h"
#include "tools/stats_stream.h"
#include "tools/tune.h"

namespace txbatch {
namespace {

// --target and --p99-max, checked: the latency budget in ns, none where not given.
Result<std::optional<double>> CheckTuneOptions(const RunArgs& args, double target_pct,
                                               const std::string& p99_max) {
  if (!kTuneTargetPct.Holds(target_pct))
    return Error{ERANGE, OutOfRange("--target", fmt::format("{}", target_pct), kTuneTargetPct,
                                    "(percent of the best throughput)")};
  if (p99_max.empty()) return std::optional<double>();
  auto d = ParseTimeNs("--p99-max", p99_max, 0);
  if (!d) return d.error();
  if (*d == 0)
    return Error{ERANGE,
                 "--p99-max 0 leaves no latency budget; valid: a time above 0 (e.g. 50us, 2ms)"};
  if (args.no_timing)
    return Error{EINVAL,
                 "--p99-max needs latency, which --no-timing leaves out; valid: drop one of them"};
  return std::optional<double>(*d);
}

// tune searches count:N limits of one configuration: every axis but --batch has one value.
Status CheckTunePlan(const RunPlan& plan) {
  for (const auto& [axis, n] : plan.axes)
    if (axis != "--batch/--policy" && n != 1)
      return Error{EINVAL, fmt::format("tune searches batch limits for one configuration, and {} "
                                       "has {} values; valid: one value for every option but "
                                       "--batch",
                                       axis, n)};
  for (const PolicySpec& p : plan.policies)
    if (p.kind != PolicyKind::kCount)
      return Error{EINVAL, fmt::format("tune searches count:N limits, and {} is not one; valid: "
                                       "--batch N,N,…",
                                       p.ToString())};
  return {};
}

// Each limit's median Mpps and p99 over its rounds, by batch limit.
std::vector<TunePoint> PointsOf(const std::vector<CellRecord>& records,
                                const PolicySpec& baseline) {
  std::vector<TunePoint> points;
  for (const CellSummary& r : Summarise(records, baseline)) {
    const auto bound_rounds = std::count_if(r.runs.begin(), r.runs.end(), [](const CellRecord* x) {
      return x->result.emulator_bound.value_or(false);
    });
    const bool bound = MostRoundsBound(static_cast<size_t>(bound_rounds), r.runs.size());
    points.push_back(
        {r.config.policy.frames, r.Value(Metric::kMpps), r.Find(Metric::kLatP99Ns), bound});
  }
  std::sort(points.begin(), points.end(),
            [](const TunePoint& a, const TunePoint& b) { return a.batch < b.batch; });
  return points;
}

// The points' table (batch, Mpps, share of the peak, p99), and the same as the `tune` object's
// points.
nlohmann::json PrintPoints(const std::vector<TunePoint>& points) {
  double peak = 0;
  for (const auto& p : points) peak = std::max(peak, p.mpps);
  std::printf("%8s %10s %9s %10s\n", "batch", "Mpps", "% of peak", "p99");
  nlohmann::json out = nlohmann::json::array();
  std::vector<std::optional<double>> p99s;
  for (const auto& p : points) p99s.push_back(p.p99_ns);
  const LatencyUnit p99_unit = ColumnUnit(p99s);
  for (const auto& p : points) {
    const std::string p99 = LatencyText(p.p99_ns, p99_unit);
    std::printf("%8u %10.4f %9.1f %10s\n", p.batch, p.mpps, peak > 0 ? 100 * p.mpps / peak : 0,
                p99.c_str());
    out.push_back({{"batch", p.batch},
                   {"mpps", p.mpps},
                   {"share_of_peak", peak > 0 ? p.mpps / peak : 0},
                   {"p99_ns", p.p99_ns ? nlohmann::json(*p.p99_ns) : nlohmann::json(nullptr)},
                   {"emulator_bound", p.emulator_bound}});
  }
  return out;
}

}  // namespace

int TuneCommand(const RunArgs& args, double target_pct, const std::string& p99_max,
                const EalUserArgs& eal_user_args, RunEnv env) {
  auto budget = CheckTuneOptions(args, target_pct, p99_max);
  if (!budget) return Fail(kExitBadInput, budget.error());
  const std::optional<double> p99_max_ns = *budget;
  auto plan = BuildRunPlan(args);
  if (!plan) return Fail(kExitBadInput, plan.error());
  if (Status st = CheckTunePlan(*plan); !st) return Fail(kExitBadInput, st.error());
  auto outputs = OpenOutputs({.json = plan->json_path, .stats_json = plan->stats_json_path});
  if (!outputs) return Fail(kExitBadInput, outputs.error());
  StatsStream& stream = outputs->stream;
  int status = kExitOk;
  auto session =
      StartSession(plan->cells, plan->eal_memory, eal_user_args, std::move(env), &status);
  if (!session) return Fail(status, session.error());
  PrintHeader(stdout, plan->cells, session->env);
  PrintTelemetryLine(session->env);
  std::fflush(stdout);
  StartCellStream(stream, *session, "tune", plan->cells.size() * plan->rounds, plan->rounds);
  std::vector<CellRecord> records;
  bool balanced = true;
  MeasureGrid(plan->cells, plan->rounds, *session, 0, records, &status, &balanced);
  std::vector<PolicySpec> policies = plan->policies;
  TuneAdvice advice =
      FindKnee(PointsOf(records, policies.front()), target_pct / 100, p99_max_ns);
  // The limits between the knee and the coarse one below it, measured in the same session.
  std::vector<unsigned> refined;
  if (advice.found && status == kExitOk && !StopRequested()) {
    unsigned below = 0;
    for (const PolicySpec& p : plan->policies)
      if (p.frames < advice.batch) below = std::max<unsigned>(below, p.frames);
    if (below > 0) refined = RefineBetween(below, advice.batch);
    if (!refined.empty()) {
      RunArgs finer = args;
      finer.policy.clear();
      finer.batch = fmt::format("{}", fmt::join(refined, ","));
      finer.batching_off_first = false;
      auto plan2 = BuildRunPlan(finer);
      if (!plan2) return Fail(kExitBadInput, plan2.error());
      MeasureGrid(plan2->cells, plan2->rounds, *session, static_cast<int>(plan->cells.size()),
                  records, &status, &balanced);
      policies.insert(policies.end(), plan2->policies.begin(), plan2->policies.end());
      std::sort(policies.begin() + 1, policies.end(),
                [](const PolicySpec& a, const PolicySpec& b) { return a.frames < b.frames; });
      advice = FindKnee(PointsOf(records, policies.front()), target_pct / 100, p99_max_ns);
    }
  }
  PrintAndKeepTables(records, policies);
  std::vector<unsigned> coarse;
  for (const PolicySpec& p : plan->policies) coarse.push_back(p.frames);
  fmt::print("\ntune: target {:.0f}% of the best throughput{}; coarse limits {}{}\n", target_pct,
             p99_max_ns ? ", p99 within " + p99_max : "", fmt::join(coarse, ","),
             refined.empty() ? "" : fmt::format(", refined with {}", fmt::join(refined, ",")));
  const nlohmann::json points = PrintPoints(PointsOf(records, policies.front()));
  std::printf("%s: %s\n", advice.found ? "recommendation" : "no recommendation",
              advice.reason.c_str());
  std::fflush(stdout);
  nlohmann::json doc = ToJson(records, session->env);
  doc["tune"] = {{"target_share", target_pct / 100},
                 {"p99_max_ns", p99_max_ns ? nlohmann::json(*p99_max_ns) : nlohmann::json(nullptr)},
                 {"points", points},
                 {"refined", refined},
                 {"recommendation",
                  {{"found", advice.found},
                   {"batch", advice.found ? nlohmann::json(advice.batch) : nlohmann::json(nullptr)},
                   {"share_of_peak", advice.share_of_peak},
                   {"reason", advice.reason}}}};
  session->pool.reset();
  const int code = Finish(outputs->json, doc, status, balanced);
  EndCellStream(stream, records, status, balanced, code, {{"tune", doc["tune"]}});
  return stream.Finish(code);
}

}  // namespace txbatch
