#include "tools/tune.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "results/latency_text.h"

namespace txbatch {
TuneAdvice FindKnee(std::vector<TunePoint> points, double target,
                    std::optional<double> p99_max_ns) {
  TuneAdvice a;
  if (points.empty()) {
    a.reason = "nothing was measured";
    return a;
  }
  std::sort(points.begin(), points.end(),
            [](const TunePoint& x, const TunePoint& y) { return x.batch < y.batch; });
  double peak = 0;
  unsigned peak_batch = points.front().batch;
  for (const auto& p : points)
    if (p.mpps > peak) peak = p.mpps, peak_batch = p.batch;
  const auto within_budget = [&](const TunePoint& p) {
    return !p99_max_ns || !p.p99_ns || *p.p99_ns <= *p99_max_ns;
  };
  const TunePoint* prev = nullptr;  // the largest smaller batch, for the reason
  for (const auto& p : points) {
    const double share = peak > 0 ? p.mpps / peak : 0;
    if (share >= target && within_budget(p)) {
      a.found = true;
      a.batch = p.batch;
      a.share_of_peak = share;
      a.p99_ns = p.p99_ns;
      a.reason = fmt::format("batch {}: {:.1f} % of peak ({:.4g} Mpps at batch {})", p.batch,
                             100 * share, peak, peak_batch);
      if (p.p99_ns) a.reason += fmt::format(", p99 {}", LatencyText(*p.p99_ns));
      if (prev)
        a.reason += fmt::format("; batch {} reaches only {:.1f} %", prev->batch,
                                100 * (peak > 0 ? prev->mpps / peak : 0));
      else
        a.reason += "; no smaller batch was measured, so batching is not needed here";
      return a;
    }
    prev = &p;
  }
  // Nothing qualifies: say which limit binds.
  bool any_fast = false;
  for (const auto& p : points) any_fast |= peak > 0 && p.mpps / peak >= target;
  if (any_fast && p99_max_ns)
    a.reason = fmt::format(
        "no batch reaching {:.0f} % of peak keeps p99 within {}; the budget "
        "or the target must give",
        100 * target, LatencyText(*p99_max_ns));
  else
    a.reason = fmt::format("no batch reaches {:.0f} % of peak", 100 * target);
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
