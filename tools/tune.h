#pragma once
// `txbatch tune`: the smallest batch limit that reaches a share of the best throughput (default
// 95 %) while p99 latency stays within an optional budget. The search is a coarse sweep over
// powers of two, then the batch limits between the knee and the coarse point below it.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace txbatch {

// Share of the peak that counts as "as good as the best": 95 % leaves room for noise without
// recommending batches that buy nothing.
inline constexpr double kDefaultTuneTarget = 0.95;

struct TunePoint {
  unsigned batch = 1;
  double mpps = 0;               // median over rounds
  std::optional<double> p99_ns;  // null where nothing receives
  bool emulator_bound = false;   // most rounds' rate was txbatch's own (CellResult::emulator_bound)
};

struct TuneAdvice {
  bool found = false;
  unsigned batch = 0;
  double share_of_peak = 0;  // this batch's Mpps / the best Mpps measured
  std::optional<double> p99_ns;
  std::string reason;  // the evidence, in one sentence
};

// The smallest batch whose throughput is >= `target` x the best of `points` and whose p99 is
// within `p99_max_ns` (when given). `points` in any order, batches distinct. A point without a
// p99 is not within a budget; where no point has one (nothing receives) the budget cannot be
// applied, and the recommendation is by throughput alone and says so. The reason names what
// the batch below the recommended one failed (its share, or its p99 against the budget) and says
// to try larger limits where the peak is at the largest one measured. Where any point was
// emulator-bound, its throughput is txbatch's, not the device's: no recommendation, and the
// reason names those batches.
TuneAdvice FindKnee(std::vector<TunePoint> points, double target, std::optional<double> p99_max_ns);

// The batch limits strictly between `below` and `knee` worth measuring to refine the knee: all of
// them when there are at most `max_points`, else that many spread evenly.
std::vector<unsigned> RefineBetween(unsigned below, unsigned knee, unsigned max_points = 4);

}  // namespace txbatch
