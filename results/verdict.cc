#include "results/verdict.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <boost/math/distributions/students_t.hpp>
#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "base/enum_names.h"

namespace txbatch {
namespace {

// The interval [lo, hi] as a verdict prints it: three significant digits, or as many more as it
// takes for each printed bound to fall on the same side of 1 and of the band's edges 1 ± margin
// as the bound itself, so that the verdict follows visibly from the numbers (a lower bound of
// 1.0204 printed as 1.02 reads as on the edge, not past it: "worse" next to an "inconclusive"
// whose bound is 1.0196 looked like two labels for one interval). Four or five digits nearly
// always do; a bound within 1e-5 of an edge takes more (17 round-trip any double).
std::string Interval(double lo, double hi, double margin) {
  constexpr int kFewest = 3, kMost = 17;
  const double edges[] = {1 - margin, 1.0, 1 + margin};
  const auto shown_same_side = [&](double x, int digits) {
    const std::string text = fmt::format("{:.{}g}", x, digits);
    double shown = 0;
    std::from_chars(text.data(), text.data() + text.size(), shown);
    for (double c : edges)
      if ((x < c) != (shown < c) || (x > c) != (shown > c)) return false;
    return true;
  };
  int digits = kFewest;
  while (digits < kMost && !(shown_same_side(lo, digits) && shown_same_side(hi, digits))) ++digits;
  return fmt::format("{:.{}g}–{:.{}g}", lo, digits, hi, digits);
}

}  // namespace

std::optional<RatioEstimate> EstimateRatio(std::span<const double> a, std::span<const double> b) {
  std::vector<double> as, bs, d;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    if (!(a[i] > 0) || !(b[i] > 0) || !std::isfinite(a[i]) || !std::isfinite(b[i])) continue;
    as.push_back(a[i]);
    bs.push_back(b[i]);
    d.push_back(std::log(b[i] / a[i]));
  }
  if (d.empty()) return std::nullopt;
  RatioEstimate e;
  e.rounds = static_cast<int>(d.size());
  e.median_a = Median(as);
  e.median_b = Median(bs);
  double mean = 0;
  for (double x : d) mean += x;
  mean /= static_cast<double>(d.size());
  e.ratio = std::exp(mean);
  e.ci_lo = e.ci_hi = e.ratio;
  if (d.size() >= 2) {
    double ss = 0;
    for (double x : d) ss += (x - mean) * (x - mean);
    const double n = static_cast<double>(d.size());
    const double se = std::sqrt(ss / (n - 1)) / std::sqrt(n);
    const boost::math::students_t t(n - 1);
    const double q = boost::math::quantile(boost::math::complement(t, 0.025));
    e.ci_lo = std::exp(mean - q * se);
    e.ci_hi = std::exp(mean + q * se);
  }
  return e;
}

// Indexed by Verdict.
constexpr std::array<std::string_view, 4> kVerdictNames = {"better", "worse", "equivalent",
                                                           "inconclusive"};
static_assert(kVerdictNames.size() == static_cast<size_t>(Verdict::kInconclusive) + 1);

std::string_view VerdictName(Verdict v) { return NameOf(kVerdictNames, v, "inconclusive"); }

Verdict Judge(const RatioEstimate& e, bool higher_is_better, double margin) {
  if (e.rounds < 2) return Verdict::kInconclusive;  // no interval from one pair
  const double lo = 1 - margin, hi = 1 + margin;
  if (e.ci_lo >= lo && e.ci_hi <= hi) return Verdict::kEquivalent;
  if (e.ci_lo > hi) return higher_is_better ? Verdict::kBetter : Verdict::kWorse;
  if (e.ci_hi < lo) return higher_is_better ? Verdict::kWorse : Verdict::kBetter;
  return Verdict::kInconclusive;
}

std::string DescribeVerdict(const RatioEstimate& e, Verdict v, std::string_view metric,
                            double margin) {
  const int pct = static_cast<int>(std::lround(margin * 100));
  switch (v) {
    case Verdict::kBetter:
    case Verdict::kWorse:
      return fmt::format("{}: {:.3g}x {} (95% CI {})", VerdictName(v), e.ratio, metric,
                         Interval(e.ci_lo, e.ci_hi, margin));
    case Verdict::kEquivalent:
      return fmt::format("equivalent: within ±{}% (ratio {:.3f}, CI {:.3f}–{:.3f})", pct, e.ratio,
                         e.ci_lo, e.ci_hi);
    case Verdict::kInconclusive:
      if (e.rounds < 2)
        return fmt::format(
            "inconclusive: {} usable round, no interval (ratio {:.3g}); run more "
            "rounds",
            e.rounds, e.ratio);
      return fmt::format("inconclusive: CI {} spans ±{}%, run more rounds",
                         Interval(e.ci_lo, e.ci_hi, margin), pct);
  }
  return {};
}

}  // namespace txbatch
