#pragma once
// A/B verdicts from interleaved rounds: the ratio B/A of a metric with a 95 % confidence
// interval, and one of better / worse / equivalent / inconclusive that a person can quote.
//
// Method: paired t on log ratios. Round i gives d_i = ln(B_i / A_i) (A and B ran back to back,
// so drift of the machine hits both and cancels in the ratio); the interval is
// exp(mean(d) ± t(0.975, n-1) · sd(d) / sqrt(n)) and the point estimate exp(mean(d)), the
// geometric mean of the per-round ratios. Equivalent means the whole interval lies within the
// margin (±2 % by default: TOST at 95 %); better/worse that it lies wholly beyond it.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/median.h"

namespace txbatch {

// Equivalence margin: two configurations within ±2 % are "the same" for a throughput table.
inline constexpr double kEquivalenceMargin = 0.02;

struct RatioEstimate {
  int rounds = 0;       // pairs used (both sides positive)
  double median_a = 0;  // medians of each side, for the table
  double median_b = 0;
  double ratio = 0;  // exp(mean log ratio)
  double ci_lo = 0;  // 95 % interval of the ratio; equal to `ratio` when rounds < 2
  double ci_hi = 0;
};

// Pairs a[i] with b[i]. Pairs where either side is not positive (a metric that is null or 0 in
// that round) are left out. Empty when no pair is left.
std::optional<RatioEstimate> EstimateRatio(std::span<const double> a, std::span<const double> b);

enum class Verdict { kBetter, kWorse, kEquivalent, kInconclusive };
std::string_view VerdictName(Verdict v);

// `higher_is_better`: throughput yes; cycles, CPU time, doorbells and latency no.
Verdict Judge(const RatioEstimate& e, bool higher_is_better, double margin = kEquivalenceMargin);

// "better: 1.83x Mpps (95% CI 1.79–1.88)", "equivalent: within ±2% (ratio 1.002, CI
// 0.991–1.013)", "inconclusive: CI 0.93–1.12 spans ±2%, run more rounds".
std::string DescribeVerdict(const RatioEstimate& e, Verdict v, std::string_view metric,
                            double margin = kEquivalenceMargin);

}  // namespace txbatch
