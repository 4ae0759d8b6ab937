#include "batching/dql.h"

#include <algorithm>

namespace txbatch {
namespace {

// max(a - b, 0)
uint64_t PosDiff(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

}  // namespace

DynamicQueueLimits::DynamicQueueLimits(Tsc hold_tsc, uint32_t min_limit, uint32_t max_limit,
                                       DqlStart start)
    : limit_(start == DqlStart::kZero ? 0 : min_limit),
      hold_tsc_(hold_tsc),
      min_limit_(min_limit),
      max_limit_(max_limit) {
  adj_limit_ = limit_;
}

void DynamicQueueLimits::Completed(uint32_t bytes, Tsc now) {
  const uint64_t queued = num_queued_;
  const uint64_t completed = num_completed_ + std::min<uint64_t>(bytes, in_flight());
  uint64_t limit = limit_;
  uint64_t ovlimit = PosDiff(queued - num_completed_, limit);
  const uint64_t inprogress = queued - completed;
  const uint64_t prev_inprogress = PosDiff(prev_num_queued_, num_completed_);
  const bool all_prev_completed = completed >= prev_num_queued_;

  if ((ovlimit && !inprogress) || (prev_ovlimit_ && all_prev_completed)) {
    // Starved: the queue was over the limit and has run dry (or everything queued before the
    // last completion is done while it was over): the limit was too small for this latency.
    // Grow it by what completed beyond the previous queue level, plus the previous overshoot.
    limit += PosDiff(completed, prev_num_queued_) + prev_ovlimit_;
    slack_start_ = now;
    lowest_slack_ = UINT32_MAX;
  } else if (inprogress && prev_inprogress && !all_prev_completed) {
    // Not starved: the slack is what stayed queued beyond what two completion intervals need.
    // Keep the lowest slack seen; once slack persisted for the hold time, give it back.
    uint64_t slack = PosDiff(limit + prev_ovlimit_, 2 * (completed - num_completed_));
    const uint64_t slack_last_objs = prev_ovlimit_ ? PosDiff(prev_last_obj_, prev_ovlimit_) : 0;
    slack = std::max(slack, slack_last_objs);
    lowest_slack_ = static_cast<uint32_t>(std::min<uint64_t>(lowest_slack_, slack));
    if (now > slack_start_ + hold_tsc_) {
      limit = PosDiff(limit, lowest_slack_);
      slack_start_ = now;
      lowest_slack_ = UINT32_MAX;
    }
  }
  limit = std::clamp<uint64_t>(limit, min_limit_, max_limit_);
  if (limit != limit_) {
    limit_ = static_cast<uint32_t>(limit);
    ovlimit = 0;
  }
  adj_limit_ = limit_ + completed;
  prev_ovlimit_ = static_cast<uint32_t>(std::min<uint64_t>(ovlimit, UINT32_MAX));
  prev_last_obj_ = last_obj_;
  num_completed_ = completed;
  prev_num_queued_ = queued;
}

}  // namespace txbatch
