// The knee finder of txbatch tune on synthetic curves with known answers.
#include "tools/tune.h"

#include <gtest/gtest.h>

namespace txbatch {
namespace {

std::vector<TunePoint> Saturating() {  // throughput saturates at batch 16
  return {{1, 1.0, 10e3},  {2, 1.8, 11e3},  {4, 3.0, 12e3},  {8, 4.3, 14e3},
          {16, 4.9, 20e3}, {32, 5.0, 40e3}, {64, 5.0, 80e3}, {128, 4.95, 160e3}};
}

TEST(Tune, SmallestBatchWithinTheTargetOfThePeak) {
  const TuneAdvice a = FindKnee(Saturating(), 0.95, std::nullopt);
  ASSERT_TRUE(a.found);
  EXPECT_EQ(a.batch, 16u);  // 4.9 / 5.0 = 98 %; batch 8 has 86 %
  EXPECT_NEAR(a.share_of_peak, 0.98, 1e-9);
  EXPECT_NE(a.reason.find("batch 16: 98.0 % of peak"), std::string::npos) << a.reason;
  EXPECT_NE(a.reason.find("batch 8 reaches only 86.0 %"), std::string::npos) << a.reason;
}

TEST(Tune, ALatencyBudgetCanRuleTheKneeOutOrLeaveNothing) {
  // With p99 <= 15 us, batch 16 (20 us) is out and nothing faster qualifies at 95 %.
  const TuneAdvice none = FindKnee(Saturating(), 0.95, 15e3);
  EXPECT_FALSE(none.found);
  EXPECT_NE(none.reason.find("keeps p99 within 15.0us"), std::string::npos) << none.reason;
  // At 85 % the budget is met by batch 8.
  const TuneAdvice eight = FindKnee(Saturating(), 0.85, 15e3);
  ASSERT_TRUE(eight.found);
  EXPECT_EQ(eight.batch, 8u);
}

TEST(Tune, AFlatCurveNeedsNoBatching) {
  // Link-bound: every batch gives the same throughput.
  const TuneAdvice a =
      FindKnee({{1, 0.0813, 14e6}, {32, 0.0813, 14e6}, {8, 0.0812, 14e6}}, 0.95, std::nullopt);
  ASSERT_TRUE(a.found);
  EXPECT_EQ(a.batch, 1u);
  EXPECT_NE(a.reason.find("batching is not needed"), std::string::npos) << a.reason;
}

TEST(Tune, RefinementProbesBetweenTheKneeAndTheCoarsePointBelow) {
  EXPECT_EQ(RefineBetween(8, 16), (std::vector<unsigned>{10, 11, 13, 14}));
  EXPECT_EQ(RefineBetween(2, 4), (std::vector<unsigned>{3}));
  EXPECT_TRUE(RefineBetween(1, 2).empty());
  EXPECT_EQ(RefineBetween(16, 32, 3), (std::vector<unsigned>{20, 24, 28}));
}

}  // namespace
}  // namespace txbatch
