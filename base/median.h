#pragma once
// The median of a sample: the statistic every floor's summaries use (results' tables and
// verdicts, the scheduler probe's and the cost-model fit's measurements).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace txbatch {

// The median of `v` (the mean of the middle two for an even count); 0 when empty.
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A distribution-free interval for the median of what `v` samples: its k-th smallest and k-th
// largest value, k the largest rank whose interval still covers the median with probability
// `level` or more (each value falls below the median with probability 1/2: the coverage is
// 1 - 2 P(Binomial(n, 1/2) < k)). Where no rank gives `level` (fewer than 6 values for 95 %),
// the whole range, with the coverage it has (5 values: 93.75 %; 3: 75 %). No normal theory:
// the interval is as wide as the values are spread, whatever their distribution.
struct MedianInterval {
  double lo = 0, hi = 0;
  double coverage = 0;  // the probability the interval holds the median; 0 when empty
};
inline MedianInterval MedianIntervalOf(std::vector<double> v, double level = 0.95) {
  if (v.empty()) return {};
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  // P(Binomial(n, 1/2) <= j), summed from j = 0.
  std::vector<double> below(n + 1);
  double pmf = std::pow(0.5, static_cast<double>(n)), sum = 0;
  for (size_t j = 0; j <= n; ++j) {
    sum += pmf;
    below[j] = sum;
    pmf = pmf * static_cast<double>(n - j) / static_cast<double>(j + 1);
  }
  size_t k = 1;  // 1-based rank: [v[k-1], v[n-k]] covers with 1 - 2 P(B <= k-1)
  while (k + 1 <= (n + 1) / 2 && 1 - 2 * below[k] >= level) ++k;
  return {v[k - 1], v[n - k], n == 1 ? 0.0 : 1 - 2 * below[k - 1]};
}

}  // namespace txbatch
