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

TEST(Dql, GrowthAddsTheOvershootOfACompletionThatLeftTheLimitUnchanged) {
  DynamicQueueLimits dql(/*hold_tsc=*/100);
  dql.Queued(1500);
  dql.Completed(1500, 1);  // starved: limit 1500
  ASSERT_EQ(dql.limit(), 1500u);
  dql.Queued(4500);
  // 3000 left in flight against a limit of 1500: over it by 3000, not starved (still queued),
  // and with nothing in progress before this completion there is no slack to judge: unchanged.
  dql.Completed(1500, 2);
  ASSERT_EQ(dql.limit(), 1500u);
  dql.Queued(1000);
  // Everything queued before the last completion (6000) is done, and it was over the limit:
  // old + (completed - prev_queued) + prev_ovlimit = 1500 + (7000 - 6000) + 3000.
  dql.Completed(4000, 3);
  EXPECT_EQ(dql.limit(), 5500u);
}

TEST(Dql, StaysWithinItsBounds) {
  DynamicQueueLimits dql(/*hold_tsc=*/100, /*min_limit=*/1000, /*max_limit=*/2000);
  EXPECT_EQ(dql.limit(), 1000u);
  dql.Queued(5000);
  dql.Completed(5000, 1);  // starvation would grow it to 6000
  EXPECT_EQ(dql.limit(), 2000u);
  EXPECT_EQ(dql.in_flight(), 0u);
}

}  // namespace
}  // namespace txbatch
