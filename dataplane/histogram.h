#pragma once
// Latency histogram, HdrHistogram's layout: a value's bin is its power of two and the
// kSubBucketBits bits of mantissa below its leading one — read straight from the IEEE-754 double
// (one shift and a subtract, no logarithm), so recording costs about as much as a counter. 128
// linear bins an octave from 1 ns to 2^34 ns (17.2 s): a bin is at most 1/128 (0.78 %) of its
// lower edge wide, so a percentile interpolated within its bin is within 1 % of the true value;
// exact min, max and sum are kept apart. Fixed memory (4354 bins, 34 KiB), no stored list.

#include <bit>
#include <cstdint>
#include <optional>
#include <vector>

namespace txbatch {

// One bin of a histogram's export: `count` samples in [lo_ns, hi_ns).
struct HistBin {
  double lo_ns = 0, hi_ns = 0;
  uint64_t count = 0;
};

struct LatencySummary {
  double min = 0, avg = 0, p50 = 0, p90 = 0, p99 = 0, p999 = 0, max = 0;  // ns
  uint64_t count = 0;
};

class LatencyHistogram {
 public:
  static constexpr int kSubBucketBits = 7;                  // 128 bins an octave
  static constexpr int kOctaves = 34;                       // 1 ns .. 2^34 ns
  static constexpr int kBins = kOctaves << kSubBucketBits;  // in range; plus under- and overflow
  // The bin of `ns`: -1 below 1 ns (and NaN), kBins from 2^34 ns on, else 0..kBins-1.
  static int BinOf(double ns) {
    if (!(ns >= 1.0)) return -1;
    // Biased exponent and top mantissa bits; 1.0's are (1023 << kSubBucketBits).
    const uint64_t top = std::bit_cast<uint64_t>(ns) >> (52 - kSubBucketBits);
    const uint64_t bin = top - (uint64_t{1023} << kSubBucketBits);
    return bin < static_cast<uint64_t>(kBins) ? static_cast<int>(bin) : kBins;
  }
  // The lower edge of bin `bin` (0..kBins; kBins: the upper edge of the last).
  static double LowerEdge(int bin);

  LatencyHistogram() : bins_(kBins + 2, 0) {}
  // Records one latency in ns, `n` times (frames that share one stamp). Not thread-safe.
  void Record(double ns, uint64_t n = 1) {
    if (n == 0) return;
    bins_[static_cast<size_t>(BinOf(ns) + 1)] += n;
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
  // The bins that hold samples, in order, each [lo_ns, hi_ns): under 1 ns as [min(0, min), 1),
  // from 2^34 ns as [2^34, just above max).
  std::vector<HistBin> Bins() const;

 private:
  std::vector<uint64_t> bins_;  // [0]: underflow, [1 + b]: bin b, [kBins + 1]: overflow
  double sum_ = 0, min_ = 0, max_ = 0;
  uint64_t count_ = 0;
};

}  // namespace txbatch
