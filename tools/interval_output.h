#pragma once
// One output of a polling loop's --stats intervals (the table on standard output, or the
// --stats-json stream): the reporter that writes it, and where its last interval written ended.
// An interval the reporter had no room for (a reader that stalled) is not lost: the next one
// posted starts where the last one written ended and carries what accumulated since, so the
// intervals written always add up to the totals. Control plane; Post is called from one thread
// (the loop's), the write runs on the reporter's.

#include <functional>
#include <memory>
#include <utility>
#include <variant>

#include "tools/reporter.h"

namespace txbatch {

// `Counts`: the running totals an interval is the difference of (copied into each interval).
// `Unwritten`: what the loop accumulates between intervals and hands over whole (the bridge: each
// direction's latency histogram), reset to its initial value once an interval carrying it is
// posted.
template <typename Counts, typename Unwritten = std::monostate>
class IntervalOutput {
 public:
  struct Interval {
    double from_s, at_s;  // where the last interval written ended, and this one's end
    Counts before, now;   // the totals at each
    Unwritten unwritten;  // what accumulated from `from_s` to `at_s`
  };
  using Write = std::function<void(const Interval&)>;

  // `write` writes an interval to this output (on the reporter's thread). The first interval
  // starts at 0 with `start`'s totals.
  explicit IntervalOutput(Write write, Counts start = {}, Unwritten empty = {})
      : write_(std::move(write)), last_(std::move(start)), empty_(empty), unwritten_(empty) {}

  // What the next interval written carries: merge into it what arrives meanwhile.
  Unwritten& unwritten() { return unwritten_; }

  // Hands the interval from the last one written up to `at_s` (totals `now`) to the reporter.
  // Returns whether it was taken; where it was not (`droppable` and no room), the next one posted
  // covers it too. Not `droppable`: taken past the reporter's bound (a loop's last interval).
  bool Post(double at_s, const Counts& now, bool droppable) {
    auto t = std::make_shared<const Interval>(Interval{last_at_s_, at_s, last_, now, unwritten_});
    behind_ = !reporter_.Post([t, write = write_] { write(*t); }, droppable);
    if (behind_) return false;
    last_ = now;
    last_at_s_ = at_s;
    unwritten_ = empty_;
    return true;
  }

  // Whether the last interval posted was not taken (one more is owed before the loop ends).
  bool behind() const { return behind_; }
  Reporter& reporter() { return reporter_; }

 private:
  const Write write_;
  Counts last_;
  double last_at_s_ = 0;
  const Unwritten empty_;
  Unwritten unwritten_;
  bool behind_ = false;
  Reporter reporter_;  // last: destroyed first, its jobs run while the rest still stands
};

}  // namespace txbatch
