// Dynamic queue limits (BQL) on scripted byte flows with answers worked out by hand from the
// algorithm (batching/dql.h).
#include "batching/dql.h"

#include <gtest/gtest.h>

namespace txbatch {
namespace {

TEST(Dql, GrowsWhenTheQueueStarvesOverItsLimit) {
  DynamicQueueLimits dql(/*hold_tsc=*/100);
  EXPECT_EQ(dql.limit(), 0u);
  dql.Queued(1500);
  EXPECT_EQ(dql.Avail(), -1500);  // over the limit: the stack would stop the queue
  dql.Completed(1500, 10);        // over the limit and now empty: starved
  EXPECT_EQ(dql.limit(), 1500u);  // + what completed beyond the previous queue level
  EXPECT_EQ(dql.Avail(), 1500);
  dql.Queued(1500);
  dql.Queued(1500);
  EXPECT_EQ(dql.Avail(), -1500);
  dql.Completed(3000, 20);        // starved again
  EXPECT_EQ(dql.limit(), 4500u);  // 1500 + (4500 - 1500)
  EXPECT_EQ(dql.Avail(), 4500);
}

TEST(Dql, ShrinksBySlackOnlyOnceItPersistedForTheHoldTime) {
  DynamicQueueLimits dql(/*hold_tsc=*/100);
  dql.Queued(6000);
  dql.Completed(6000, 1);  // starved: limit 6000
  ASSERT_EQ(dql.limit(), 6000u);
  dql.Queued(6000);
  dql.Completed(1500, 2);  // 4500 still in flight
  // Steady state: 1500 queued and 1500 completed per interval with 4500 in flight: each interval
  // needs 2 x 1500 and the limit leaves 3000 of slack.
  Tsc t = 3;
  for (; t <= 101; ++t) {
    dql.Queued(1500);
    dql.Completed(1500, t);
    ASSERT_EQ(dql.limit(), 6000u) << "shrank before the hold time, at " << t;
  }
  dql.Queued(1500);
  dql.Completed(1500, t);
  EXPECT_EQ(dql.limit(), 3000u);  // 6000 - the lowest slack seen
}

// Brings `dql` (no bounds) to a limit of 1500 that its last completion left unchanged though the
// queue was over it by 3000. The first completion finds it starved (over a limit of 0, now
// empty): 0 + 1500 = 1500. Then 4500 more is queued and 1500 completes: queued 6000, completed
// 1500 -> 3000; 4500 was in flight against a limit of 1500, so ovlimit = 4500 - 1500 = 3000;
// 3000 still in progress (not starved: not the first arm, `ovlimit && !inprogress`); prev_ovlimit
// is 0 (the last completion changed the limit, which zeroes it), so not the second; and
// prev_inprogress = prev_num_queued 1500 - num_completed 1500 = 0, so there is no slack to judge
// either: the limit stays, and prev_ovlimit = 3000, prev_num_queued = 6000. Then `more` is
// queued and 4000 completes.
void OverrunThenQueueAndComplete(DynamicQueueLimits& dql, uint32_t more) {
  dql.Queued(1500);
  dql.Completed(1500, 1);
  ASSERT_EQ(dql.limit(), 1500u);
  dql.Queued(4500);
  dql.Completed(1500, 2);
  ASSERT_EQ(dql.limit(), 1500u);
  dql.Queued(more);
  dql.Completed(4000, 3);
}

TEST(Dql, GrowthAddsTheOvershootOfACompletionThatLeftTheLimitUnchanged) {
  DynamicQueueLimits dql(/*hold_tsc=*/100);
  ASSERT_NO_FATAL_FAILURE(OverrunThenQueueAndComplete(dql, 1000));
  // 1000 queued, 4000 completed: everything queued before the last completion (6000) is done,
  // and it was over the limit:
  // old + (completed - prev_queued) + prev_ovlimit = 1500 + (7000 - 6000) + 3000. (The queue
  // also ran dry here, so the first starvation arm fires too; the next test has only the second.)
  EXPECT_EQ(dql.limit(), 5500u);
}

// The kernel's second starvation arm (lib/dynamic_queue_limits.c, dql_completed):
// `dql->prev_ovlimit && all_prev_completed` — the queue was over the limit at the previous
// completion and everything queued by then has completed, so it may have run dry between that
// completion and the next enqueue, even though more has been queued since and is in flight now
// (the first arm, `ovlimit && !inprogress`, does not see that).
TEST(Dql, GrowsWhenThePreviousIntervalOverranAndAllOfItCompletedThoughMoreIsInFlight) {
  DynamicQueueLimits dql(/*hold_tsc=*/100);
  ASSERT_NO_FATAL_FAILURE(OverrunThenQueueAndComplete(dql, 2000));
  // 2000 queued, 4000 completed: queued 8000, completed 3000 -> 7000: inprogress = 1000 (not dry:
  // the first arm is false), all_prev_completed = 7000 >= 6000 and prev_ovlimit = 3000: the second
  // arm grows it by POSDIFF(completed, prev_num_queued) + prev_ovlimit = (7000 - 6000) + 3000:
  // 1500 + 1000 + 3000 = 5500. Without the second arm the slack branch is skipped too
  // (!all_prev_completed is false) and the limit would stay 1500.
  EXPECT_EQ(dql.limit(), 5500u);
  EXPECT_EQ(dql.in_flight(), 1000u);
  // adj_limit = limit + completed = 12500, less the 8000 queued.
  EXPECT_EQ(dql.Avail(), 5500 - 1000);
}

TEST(Dql, StaysWithinItsBounds) {
  DynamicQueueLimits dql(/*hold_tsc=*/100, /*min_limit=*/1000, /*max_limit=*/2000);
  EXPECT_EQ(dql.limit(), 1000u);
  dql.Queued(5000);
  dql.Completed(5000, 1);  // starvation would grow it to 6000
  EXPECT_EQ(dql.limit(), 2000u);
  EXPECT_EQ(dql.in_flight(), 0u);
}

// dql_reset before upstream 3a17f23f7c36 (2025) set the limit to 0 whatever limit_min said
// (3.18's `dql->limit = 0`); the first completion's clamp brings it into [min, max]. Since, it
// starts at limit_min. A pinned 3000-byte limit: the 2014 start lets one 1000-byte frame stop
// the queue (avail -1000), the 2025 start three frames without a stop.
TEST(Dql, StartsAtZeroBefore2025AndAtLimitMinSince) {
  DynamicQueueLimits old(/*hold_tsc=*/100, 3000, 3000, DqlStart::kZero);
  DynamicQueueLimits now(/*hold_tsc=*/100, 3000, 3000, DqlStart::kMinLimit);
  EXPECT_EQ(old.limit(), 0u);
  EXPECT_EQ(now.limit(), 3000u);
  old.Queued(1000);
  EXPECT_EQ(old.Avail(), -1000);
  old.Completed(1000, 1);  // starved (1000 + 0), then clamped to the minimum
  EXPECT_EQ(old.limit(), 3000u);
  EXPECT_EQ(old.Avail(), 3000);
  for (int i = 0; i < 3; ++i) now.Queued(1000);
  EXPECT_EQ(now.Avail(), 0);
}

}  // namespace
}  // namespace txbatch
