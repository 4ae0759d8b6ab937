#include "tools/tune.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "results/latency_text.h"

namespace txbatch {
namespace {

// "batch 8 reaches only 86.0 %", "batch 58 has p99 1757.7us, over the 1000.0us budget": the
// constraints `p` fails, each named, so the evidence says which one bound.
std::string Missed(const TunePoint& p, double share, double target,
                   std::optional<double> budget_ns) {
  std::vector<std::string> why;
  if (share < target) why.push_back(fmt::format("reaches only {:.1f} %", 100 * share));
  if (budget_ns && !p.p99_ns)
    why.push_back("has no p99 measured");
  else if (budget_ns && *p.p99_ns > *budget_ns)
    why.push_back(fmt::format("has p99 {}, over the {} budget", LatencyText(*p.p99_ns),
                              LatencyText(*budget_ns)));
  return fmt::format("batch {} {}", p.batch, fmt::join(why, " and "));
}

}  // namespace

TuneAdvice FindKnee(std::vector<TunePoint> points, double target,
                    std::optional<double> p99_max_ns) {
  TuneAdvice a;
  if (points.empty()) {
    a.reason = "nothing was measured";
    return a;
  }
  std::sort(points.begin(), points.end(),
            [](const TunePoint& x, const TunePoint& y) { return x.batch < y.batch; });
  std::vector<unsigned> bound;
  for (const auto& p : points)
    if (p.emulator_bound) bound.push_back(p.batch);
  if (!bound.empty()) {
    a.reason = fmt::format(
        "batch {} ran emulator-bound (txbatch's own threads, not the device or link, set the "
        "rate), so the knee would be txbatch's: no recommendation is drawn; sample latency "
        "(--latency-sample), offer less (--rate) or give producers CPUs of their own",
        fmt::join(bound, ", "));
    return a;
  }
  double peak = 0;
  unsigned peak_batch = points.front().batch;
  for (const auto& p : points)
    if (p.mpps > peak) peak = p.mpps, peak_batch = p.batch;
  const auto share_of = [&](const TunePoint& p) { return peak > 0 ? p.mpps / peak : 0; };
  // A budget no point has a p99 to hold against (nothing receives) is not applied, and the
  // reason says so; where other points have one, a point without is not known to meet it.
  const bool p99_measured =
      std::any_of(points.begin(), points.end(), [](const TunePoint& p) { return p.p99_ns; });
  const std::optional<double> budget_ns = p99_measured ? p99_max_ns : std::nullopt;
  const auto within_budget = [&](const TunePoint& p) {
    return !budget_ns || (p.p99_ns && *p.p99_ns <= *budget_ns);
  };
  std::string notes;
  if (p99_max_ns && !p99_measured)
    notes += "; p99 not measured: the --p99-max budget was not applied";
  if (points.size() > 1 && peak > 0 && peak_batch == points.back().batch)
    notes += fmt::format("; the peak is at batch {}, the largest limit tried: try larger limits",
                         peak_batch);

  const TunePoint* prev = nullptr;  // the largest smaller batch, for the reason
  for (const auto& p : points) {
    const double share = share_of(p);
    if (share >= target && within_budget(p)) {
      a.found = true;
      a.batch = p.batch;
      a.share_of_peak = share;
      a.p99_ns = p.p99_ns;
      a.reason = fmt::format("batch {}: {:.1f} % of peak ({:.4g} Mpps at batch {})", p.batch,
                             100 * share, peak, peak_batch);
      if (p.p99_ns) a.reason += fmt::format(", p99 {}", LatencyText(*p.p99_ns));
      if (prev)
        a.reason += "; " + Missed(*prev, share_of(*prev), target, budget_ns);
      else
        a.reason += "; no smaller batch was measured, so batching is not needed here";
      a.reason += notes;
      return a;
    }
    prev = &p;
  }
  // Nothing qualifies. A point reaching the target exists whenever the peak is above 0, so it is
  // the budget that binds: say how close the fast points came.
  const TunePoint* lowest = nullptr;  // the fast point with the lowest measured p99
  bool any_fast = false;
  for (const auto& p : points) {
    if (share_of(p) < target) continue;
    any_fast = true;
    if (p.p99_ns && (!lowest || *p.p99_ns < *lowest->p99_ns)) lowest = &p;
  }
  if (any_fast && budget_ns && lowest)
    a.reason = fmt::format(
        "no batch reaching {:.0f} % of peak keeps p99 within {} (the lowest of theirs is {}, at "
        "batch {}); the budget or the target must give",
        100 * target, LatencyText(*budget_ns), LatencyText(*lowest->p99_ns), lowest->batch);
  else if (any_fast && budget_ns)
    a.reason = fmt::format(
        "no batch reaching {:.0f} % of peak had its p99 measured, so none is known to keep p99 "
        "within {}",
        100 * target, LatencyText(*budget_ns));
  else
    a.reason = fmt::format("no batch reaches {:.0f} % of peak", 100 * target);
  a.reason += notes;
  return a;
}

std::vector<unsigned> RefineBetween(unsigned below, unsigned knee, unsigned max_points) {
  std::vector<unsigned> out;
  if (knee <= below + 1) return out;
  const unsigned gap = knee - below - 1;
  if (gap <= max_points) {
    for (unsigned b = below + 1; b < knee; ++b) out.push_back(b);
    return out;
  }
  for (unsigned i = 1; i <= max_points; ++i) {
    const auto b = static_cast<unsigned>(
        std::lround(below + static_cast<double>(knee - below) * i / (max_points + 1)));
    if (b > below && b < knee && (out.empty() || out.back() != b)) out.push_back(b);
  }
  return out;
}

}  // namespace txbatch
