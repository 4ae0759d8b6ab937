#include "dataplane/histogram.h"

#include <algorithm>
#include <cmath>

namespace txbatch {

double LatencyHistogram::LowerEdge(int bin) {
  constexpr int kSub = 1 << kSubBucketBits;
  return std::ldexp(1.0 + static_cast<double>(bin % kSub) / kSub, bin / kSub);
}

double LatencyHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  const double target = q * static_cast<double>(count_);
  double seen = 0;
  for (size_t slot = 0; slot < bins_.size(); ++slot) {
    const double in_bin = static_cast<double>(bins_[slot]);
    seen += in_bin;
    if (seen < target || in_bin == 0) continue;
    const int bin = static_cast<int>(slot) - 1;
    if (bin < 0) return min_;
    if (bin >= kBins) return max_;
    // Interpolated within the (linear) bin: the rank's place among the bin's samples, so
    // adjacent quantiles do not snap to the same step.
    const double f = std::clamp((target - (seen - in_bin)) / in_bin, 0.0, 1.0);
    const double lo = LowerEdge(bin), hi = LowerEdge(bin + 1);
    return std::clamp(lo + (hi - lo) * f, min_, max_);
  }
  return max_;
}

std::optional<LatencySummary> LatencyHistogram::Summary() const {
  if (count_ == 0) return std::nullopt;
  LatencySummary s;
  s.count = count_;
  s.min = min_;
  s.max = max_;
  s.avg = sum_ / static_cast<double>(count_);
  s.p50 = Quantile(0.50);
  s.p90 = Quantile(0.90);
  s.p99 = Quantile(0.99);
  s.p999 = Quantile(0.999);
  return s;
}

void LatencyHistogram::Merge(const LatencyHistogram& other) {
  if (other.count_ == 0) return;
  for (size_t i = 0; i < bins_.size(); ++i) bins_[i] += other.bins_[i];
  sum_ += other.sum_;
  min_ = count_ == 0 ? other.min_ : std::min(min_, other.min_);
  max_ = count_ == 0 ? other.max_ : std::max(max_, other.max_);
  count_ += other.count_;
}

std::vector<HistBin> LatencyHistogram::Bins() const {
  std::vector<HistBin> out;
  for (size_t slot = 0; slot < bins_.size(); ++slot) {
    if (bins_[slot] == 0) continue;
    const int bin = static_cast<int>(slot) - 1;
    if (bin < 0) {  // below 1 ns, NaN and negative values too
      out.push_back({std::min(0.0, min_), 1, bins_[slot]});
    } else if (bin >= kBins) {  // up to and including max
      out.push_back({LowerEdge(kBins), std::nextafter(max_, HUGE_VAL), bins_[slot]});
    } else {
      out.push_back({LowerEdge(bin), LowerEdge(bin + 1), bins_[slot]});
    }
  }
  return out;
}

}  // namespace txbatch
