#pragma once
// Latency histogram: a log axis from 1 ns to 10 s (Boost.Histogram) whose bins are 1 % wide
// (2316 bins, 18 KiB), so a percentile interpolated within its bin is within 1 % of the true
// value; exact min, max and sum are kept apart. Fixed memory, no stored list.

#include <boost/histogram.hpp>
#include <cstdint>
#include <optional>
#include <vector>

namespace txbatch {

struct LatencySummary {
  double min = 0, avg = 0, p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0;  // ns
  uint64_t count = 0;
};

class LatencyHistogram {
 public:
  LatencyHistogram();
  // Records one latency in ns, `n` times (frames that share one stamp: one bin lookup, one
  // logarithm). A value equal to the last one recorded reuses its bin: no logarithm (the wire
  // time of equal frames repeats; the simulation engine spent a quarter of its time in log()).
  // Not thread-safe.
  void Record(double ns, uint64_t n = 1) {
    if (n == 0) return;
    if (ns != last_ns_) {
      last_ns_ = ns;
      last_bin_ = hist_.axis().index(ns);
    }
    hist_.at(last_bin_) += n;
    sum_ += ns * static_cast<double>(n);
    if (count_ == 0 || ns < min_) min_ = ns;
    if (count_ == 0 || ns > max_) max_ = ns;
    count_ += n;
  }
  uint64_t count() const { return count_; }
  // Value below which a fraction `q` (0..1) of the samples fall.
  double Quantile(double q) const;
  // nullopt when nothing was recorded.
  std::optional<LatencySummary> Summary() const;
  void Merge(const LatencyHistogram& other);

 private:
  using Axis = boost::histogram::axis::regular<double, boost::histogram::axis::transform::log>;
  // Fixed 64-bit counters: the default storage grows bins (reallocating) on the hot path.
  using Hist =
      boost::histogram::histogram<std::tuple<Axis>, boost::histogram::dense_storage<uint64_t>>;
  Hist hist_;
  double last_ns_ = -1;  // the value recorded last, and its bin (-1: underflow)
  boost::histogram::axis::index_type last_bin_ = 0;
  double sum_ = 0, min_ = 0, max_ = 0;
  uint64_t count_ = 0;
};

}  // namespace txbatch
