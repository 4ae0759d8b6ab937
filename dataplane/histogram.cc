#include "dataplane/histogram.h"

#include <algorithm>
#include <cmath>

namespace txbatch {
namespace {
constexpr double kLowNs = 1.0;
constexpr double kHighNs = 1e10;
constexpr double kBinRatio = 1.01;  // 1 % wide bins: an interpolated percentile is within 1 %
const unsigned kBins =
    static_cast<unsigned>(std::ceil(std::log(kHighNs / kLowNs) / std::log(kBinRatio)));
}  // namespace

LatencyHistogram::LatencyHistogram()
    : hist_(boost::histogram::make_histogram_with(boost::histogram::dense_storage<uint64_t>(),
                                                  Axis(kBins, kLowNs, kHighNs))) {}

double LatencyHistogram::Quantile(double q) const {
  if (count_ == 0) return 0;
  const double target = q * static_cast<double>(count_);
  double seen = 0;
  for (auto&& bin : boost::histogram::indexed(hist_, boost::histogram::coverage::all)) {
    seen += *bin;
    if (seen >= target && *bin > 0) {
      const int i = bin.index();
      if (i < 0) return min_;
      if (i >= static_cast<int>(kBins)) return max_;
      // Interpolated within the bin (log-uniform): the rank's place among the bin's samples,
      // so adjacent quantiles do not snap to the same 2 % step.
      const double in_bin = static_cast<double>(*bin);
      const double f = std::clamp((target - (seen - in_bin)) / in_bin, 0.0, 1.0);
      const double lo = bin.bin().lower(), hi = bin.bin().upper();
      return std::clamp(lo * std::pow(hi / lo, f), min_, max_);
    }
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
  hist_ += other.hist_;
  sum_ += other.sum_;
  min_ = count_ == 0 ? other.min_ : std::min(min_, other.min_);
  max_ = count_ == 0 ? other.max_ : std::max(max_, other.max_);
  count_ += other.count_;
}

}  // namespace txbatch
