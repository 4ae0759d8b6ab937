#pragma once
// The median of a sample: the statistic every floor's summaries use (results' tables and
// verdicts, the scheduler probe's and the cost-model fit's measurements).

#include <algorithm>
#include <vector>

namespace txbatch {

// The median of `v` (the mean of the middle two for an even count); 0 when empty.
inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace txbatch
