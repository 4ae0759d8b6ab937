#include "tools/compare.h"

#include <fmt/format.h>

#include <algorithm>

#include "results/latency_text.h"
#include "results/metrics.h"
#include "results/tables.h"

namespace txbatch {
namespace {

using nlohmann::json;

// The metrics compare judges, in its order; their names, directions and values are the
// summary's (results/metrics.h).
constexpr Metric kCompared[] = {Metric::kMpps,           Metric::kMbPerS,
                                Metric::kCyclesPerPkt,   Metric::kCpuNsPerPkt,
                                Metric::kDoorbellsPerPkt, Metric::kXmitCallsPerPkt,
                                Metric::kLatP50Ns,       Metric::kLatP99Ns};
static_assert(std::all_of(std::begin(kCompared), std::end(kCompared),
                          [](Metric m) { return !RowOf(m).compared.empty(); }));

std::string Cell(const std::optional<double>& v, const char* fmt_spec = "{:.3g}") {
  return v ? fmt::format(fmt::runtime(fmt_spec), *v) : "-";
}

// A latency field of the rounds' results, none where nothing was received.
std::vector<std::optional<double>> LatencyColumn(const std::vector<CellResult>& ra,
                                                 const std::vector<CellResult>& rb,
                                                 double LatencySummary::*f) {
  std::vector<std::optional<double>> out;
  for (const auto* side : {&ra, &rb})
    for (const CellResult& r : *side)
      out.push_back(r.latency ? std::optional((*r.latency).*f) : std::nullopt);
  return out;
}

std::optional<double> Latency(const std::optional<LatencySummary>& l, double LatencySummary::*f) {
  return l ? std::optional((*l).*f) : std::nullopt;
}

}  // namespace

Result<std::string> CompareAxis(const RunPlan& plan) {
  std::vector<std::string> two, many;
  for (const auto& [name, n] : plan.axes) {
    if (n == 2) two.push_back(name);
    if (n > 2) many.push_back(fmt::format("{} ({} values)", name, n));
  }
  if (two.size() == 1 && many.empty()) return two.front();
  std::string given;
  for (const auto& [name, n] : plan.axes)
    if (n > 1) given += fmt::format("{}{} has {}", given.empty() ? "" : ", ", name, n);
  return MakeError(EINVAL,
                   fmt::format("compare needs exactly one axis with two values and one value "
                               "everywhere else ({}); valid: e.g. --batch 1,32, --policy "
                               "count:1,buffer:32, two --driver, --procs 1,8, --size "
                               "64,1500 or --sync rootlock,nolock",
                               given.empty() ? "no axis has two values" : given));
}

std::string AxisValue(const std::string& axis, const CellConfig& c) {
  if (axis == "--procs") return std::to_string(c.procs);
  if (axis == "--size") return std::to_string(c.size);
  if (axis == "--driver") return c.driver;
  if (axis == "--qdisc/--runner/--sync") return ShapeName(c);
  return c.policy.ToString();
}

namespace {
// Rounds of `r` that txbatch's own threads paced.
size_t EmulatorBoundRounds(const std::vector<CellResult>& r) {
  return static_cast<size_t>(std::count_if(r.begin(), r.end(), [](const CellResult& x) {
    return x.emulator_bound.value_or(false);
  }));
}
// Whether most of `r`'s rounds were (MostRoundsBound).
bool MostlyEmulatorBound(const std::vector<CellResult>& r) {
  return MostRoundsBound(EmulatorBoundRounds(r), r.size());
}
}  // namespace

std::vector<MetricComparison> CompareMetrics(const std::vector<CellResult>& a,
                                             const std::vector<CellResult>& b) {
  std::vector<MetricComparison> out;
  const bool emulator_bound = MostlyEmulatorBound(a) || MostlyEmulatorBound(b);
  for (const Metric metric : kCompared) {
    const MetricRow& m = RowOf(metric);
    MetricComparison mc;
    mc.name = m.compared;
    mc.higher_is_better = m.higher_is_better;
    std::vector<double> va, vb;
    for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
      const auto x = m.of(a[i]), y = m.of(b[i]);
      va.push_back(x.value_or(0));
      vb.push_back(y.value_or(0));
    }
    mc.estimate = EstimateRatio(va, vb);
    const bool rate = metric == Metric::kMpps || metric == Metric::kMbPerS;
    if (mc.estimate && rate && emulator_bound) {
      mc.withheld = true;
      mc.text = "no verdict: emulator-bound rounds (see the note below) measured txbatch's rate, "
                "not the configuration's";
    } else if (mc.estimate) {
      mc.verdict = Judge(*mc.estimate, m.higher_is_better);
      mc.text = DescribeVerdict(*mc.estimate, mc.verdict, mc.name);
    } else {
      mc.text = "no verdict: null or 0 on a side in every round";
    }
    out.push_back(std::move(mc));
  }
  return out;
}

std::string BatchCheck(const char* side, const CellConfig& c, const std::vector<CellResult>& r) {
  if (c.policy.frames <= 1 || r.empty()) return {};
  std::vector<double> avg;
  for (const auto& x : r) avg.push_back(x.avg_batch);
  std::sort(avg.begin(), avg.end());
  const double median = avg[avg.size() / 2];
  if (median >= 0.5 * c.policy.frames) return {};
  return fmt::format(
      "{} asked for {} but its batches averaged {:.2f}: no backlog formed for it to take (an "
      "inline runner with few producers sends each frame as it comes), so this compares the "
      "limit, not batches of {}",
      side, c.policy.ToString(), median, c.policy.frames);
}

std::string EmulatorCheckNote(const char* side, const std::vector<CellResult>& r) {
  const size_t bound = EmulatorBoundRounds(r);
  if (bound == 0) return {};
  const auto first = std::find_if(r.begin(), r.end(), [](const CellResult& x) {
    return x.emulator_bound.value_or(false);
  });
  if (!MostlyEmulatorBound(r))
    return fmt::format(
        "{} was emulator-bound in {} of {} rounds ({}): half or fewer, so its median stands "
        "and the throughput verdicts carry those rounds as noise",
        side, bound, r.size(), first->emulator_bound_why);
  return fmt::format(
      "{} was emulator-bound in {} of {} rounds ({}): its throughput is what txbatch could do on "
      "this machine, so no throughput verdict is drawn; sample latency (--latency-sample), offer "
      "less (--rate) or give producers CPUs of their own",
      side, bound, r.size(), first->emulator_bound_why);
}

std::vector<std::string> ComparisonChecks(const CellConfig& a, const CellConfig& b,
                                          const std::vector<CellResult>& ra,
                                          const std::vector<CellResult>& rb) {
  std::vector<std::string> out;
  for (std::string c : {BatchCheck("A", a, ra), BatchCheck("B", b, rb),
                        EmulatorCheckNote("A", ra), EmulatorCheckNote("B", rb)})
    if (!c.empty()) out.push_back(std::move(c));
  return out;
}

void PrintComparison(std::FILE* out, const std::string& axis, const CellConfig& a,
                     const CellConfig& b, const std::vector<CellResult>& ra,
                     const std::vector<CellResult>& rb,
                     const std::vector<MetricComparison>& metrics) {
  fmt::print(out, "\ncompare along {}: A = {}, B = {}; {} rounds, A then B in each\n\n", axis,
             AxisValue(axis, a), AxisValue(axis, b), std::min(ra.size(), rb.size()));
  fmt::print(out, "{:<10} {:>9} {:>10} {:>9} {:>10} {:>10} {:>8} {:>9} {:>9} {:>9}  {}\n", "run",
             "Mpps", "MB/s", "avg batch", "cycles/pkt", "CPU ns/pkt", "db/pkt", "xmit/pkt",
             "lat p50", "lat p99", "books");
  const LatencyUnit p50_unit = ColumnUnit(LatencyColumn(ra, rb, &LatencySummary::p50)),
                    p99_unit = ColumnUnit(LatencyColumn(ra, rb, &LatencySummary::p99));
  const auto row = [&](const char* side, size_t i, const CellResult& r) {
    fmt::print(out,
               "{:<10} {:>9.4f} {:>10.2f} {:>9.2f} {:>10.0f} {:>10.1f} {:>8} {:>9.3f} {:>9} "
               "{:>9}  {}\n",
               fmt::format("{} {}", side, i + 1), r.mpps, r.mb_per_s, r.avg_batch, r.cycles_per_pkt,
               r.cpu_ns_per_pkt, Cell(r.doorbells_per_pkt), r.xmit_calls_per_pkt,
               LatencyText(Latency(r.latency, &LatencySummary::p50), p50_unit),
               LatencyText(Latency(r.latency, &LatencySummary::p99), p99_unit),
               r.books.balanced ? "balanced" : "NOT BALANCED");
  };
  for (size_t i = 0; i < std::max(ra.size(), rb.size()); ++i) {
    if (i < ra.size()) row("A", i, ra[i]);
    if (i < rb.size()) row("B", i, rb[i]);
  }
  fmt::print(out,
             "\nB vs A (median A, median B; ratio B/A with its 95% CI, paired t on log ratios; "
             "equivalent = the whole CI within ±{:g}%):\n",
             kEquivalenceMargin * 100);
  for (const auto& m : metrics) {
    if (!m.estimate) {
      fmt::print(out, "  {:<15} {}\n", m.name, m.text);
      continue;
    }
    // A latency row's A and B in one unit.
    const LatencyUnit unit = ColumnUnit({m.estimate->median_a, m.estimate->median_b});
    const auto show = [&](double v) {
      if (!m.name.starts_with("latency")) return fmt::format("{:.4g}", v);
      return LatencyText(v, unit);
    };
    fmt::print(out, "  {:<15} {:>10} {:>10}   {}\n", m.name, show(m.estimate->median_a),
               show(m.estimate->median_b), m.text);
  }
}

json ComparisonJson(const std::string& axis, const CellConfig& a, const CellConfig& b, int rounds,
                    const std::vector<MetricComparison>& metrics,
                    const std::vector<std::string>& checks) {
  json m = json::array();
  for (const auto& x : metrics) {
    json e = {{"metric", x.name},
              {"higher_is_better", x.higher_is_better},
              {"verdict",
               x.estimate && !x.withheld ? json(VerdictName(x.verdict)) : json(nullptr)},
              {"text", x.text}};
    if (x.estimate) {
      e["median_a"] = x.estimate->median_a;
      e["median_b"] = x.estimate->median_b;
      e["ratio"] = x.estimate->ratio;
      e["ci95"] = {x.estimate->ci_lo, x.estimate->ci_hi};
      e["rounds_used"] = x.estimate->rounds;
    }
    m.push_back(e);
  }
  return {{"axis", axis},
          {"a", AxisValue(axis, a)},
          {"b", AxisValue(axis, b)},
          {"rounds", rounds},
          {"order", "A then B in every round"},
          {"method", "paired t on log ratios, 95% two-sided"},
          {"equivalence_margin", kEquivalenceMargin},
          {"metrics", m},
          {"batch_checks", checks}};
}

}  // namespace txbatch
