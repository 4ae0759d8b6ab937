// The A/B verdict on synthetic rounds with known answers.
#include "tools/verdict.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace txbatch {
namespace {

// `rounds` values around `level`, each scaled by a log-normal factor of spread `sigma`
// (deterministic: a fixed seed per series).
std::vector<double> Rounds(int rounds, double level, double sigma, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> noise(0, sigma);
  std::vector<double> v;
  for (int i = 0; i < rounds; ++i) v.push_back(level * std::exp(noise(gen)));
  return v;
}

TEST(Verdict, IdenticalDistributionsAreEquivalent) {
  const auto a = Rounds(10, 100, 0.005, 1), b = Rounds(10, 100, 0.005, 2);
  const auto e = EstimateRatio(a, b);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->rounds, 10);
  EXPECT_EQ(Judge(*e, true), Verdict::kEquivalent);
  EXPECT_GE(e->ci_lo, 0.98);
  EXPECT_LE(e->ci_hi, 1.02);
  EXPECT_NE(DescribeVerdict(*e, Verdict::kEquivalent, "Mpps").find("equivalent: within ±2%"),
            std::string::npos);
}

TEST(Verdict, ATwofoldShiftIsBetterWithTwoInsideTheInterval) {
  const auto a = Rounds(10, 100, 0.03, 3), b = Rounds(10, 200, 0.03, 4);
  const auto e = EstimateRatio(a, b);
  ASSERT_TRUE(e);
  EXPECT_EQ(Judge(*e, /*higher_is_better=*/true), Verdict::kBetter);
  EXPECT_LE(e->ci_lo, 2.0);
  EXPECT_GE(e->ci_hi, 2.0);
  EXPECT_NEAR(e->ratio, 2.0, 0.1);
  // The same shift in a cost (cycles per frame) is worse; halving it is better.
  EXPECT_EQ(Judge(*e, /*higher_is_better=*/false), Verdict::kWorse);
  const auto half = EstimateRatio(b, a);
  EXPECT_EQ(Judge(*half, false), Verdict::kBetter);
  const std::string s = DescribeVerdict(*e, Verdict::kBetter, "Mpps");
  EXPECT_EQ(s.rfind("better: 2", 0), 0u) << s;
  EXPECT_NE(s.find("x Mpps (95% CI "), std::string::npos) << s;
}

TEST(Verdict, WideNoiseIsInconclusive) {
  const auto a = Rounds(5, 100, 0.2, 5), b = Rounds(5, 100, 0.2, 6);
  const auto e = EstimateRatio(a, b);
  ASSERT_TRUE(e);
  EXPECT_EQ(Judge(*e, true), Verdict::kInconclusive);
  EXPECT_LT(e->ci_lo, 0.98);
  EXPECT_GT(e->ci_hi, 1.02);
  EXPECT_NE(DescribeVerdict(*e, Verdict::kInconclusive, "Mpps").find("run more rounds"),
            std::string::npos);
}

TEST(Verdict, RoundsWithoutAValueAreLeftOutAndOneRoundGivesNoInterval) {
  const std::vector<double> a = {100, 0, 100, -1}, b = {110, 120, 0, 130};
  const auto e = EstimateRatio(a, b);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->rounds, 1);
  EXPECT_DOUBLE_EQ(e->ratio, 1.1);
  EXPECT_EQ(Judge(*e, true), Verdict::kInconclusive);
  EXPECT_FALSE(EstimateRatio(std::vector<double>{0, 0}, std::vector<double>{1, 1}));
}

TEST(Verdict, PairingCancelsDriftThatHitsBothSides) {
  // The machine slows down by 3x over the rounds; B is 5 % faster than A in every round.
  std::vector<double> a, b;
  for (int i = 0; i < 8; ++i) {
    const double level = 100.0 / (1 + 0.3 * i);
    a.push_back(level);
    b.push_back(level * 1.05);
  }
  const auto e = EstimateRatio(a, b);
  ASSERT_TRUE(e);
  EXPECT_EQ(Judge(*e, true), Verdict::kBetter);
  EXPECT_NEAR(e->ratio, 1.05, 1e-9);
}

TEST(Verdict, TheIntervalIsExpOfTheMeanPlusMinusStudentT975TimesTheStandardError) {
  // Log ratios 0.01, 0.03, 0.02, 0.04: mean 0.025, squared deviations sum to 0.0005, so
  // s = sqrt(0.0005 / 3) and s / sqrt(4) = 0.0064549722; t(0.975, 3) = 3.1824463053 (tables).
  const std::vector<double> a = {100, 100, 100, 100};
  const std::vector<double> b = {100 * std::exp(0.01), 100 * std::exp(0.03), 100 * std::exp(0.02),
                                 100 * std::exp(0.04)};
  const auto e = EstimateRatio(a, b);
  ASSERT_TRUE(e);
  const double se = std::sqrt(0.0005 / 3) / 2, t = 3.182446305284263;
  EXPECT_NEAR(e->ratio, std::exp(0.025), 1e-12);
  EXPECT_NEAR(e->ci_lo, std::exp(0.025 - t * se), 1e-9);  // 1.004468
  EXPECT_NEAR(e->ci_hi, std::exp(0.025 + t * se), 1e-9);  // 1.046595
  // Two rounds: t(0.975, 1) = 12.7062047362; log ratios 0 and 0.02, s / sqrt(2) = 0.01.
  const auto two = EstimateRatio(std::vector<double>{1, 1}, std::vector<double>{1, std::exp(0.02)});
  ASSERT_TRUE(two);
  EXPECT_NEAR(two->ci_lo, std::exp(0.01 - 12.706204736174698 * 0.01), 1e-9);
  EXPECT_NEAR(two->ci_hi, std::exp(0.01 + 12.706204736174698 * 0.01), 1e-9);
}

TEST(Verdict, AnIntervalOnOneSideOfOneButReachingIntoTheMarginIsInconclusive) {
  // 1.005-1.03 lies above 1 but not wholly beyond +2 %: neither better nor worse, and not
  // within the band either. So for its mirror, 1/1.03-1/1.005.
  const RatioEstimate above{.rounds = 6, .ratio = 1.017, .ci_lo = 1.005, .ci_hi = 1.03};
  const RatioEstimate below{
      .rounds = 6, .ratio = 1 / 1.017, .ci_lo = 1 / 1.03, .ci_hi = 1 / 1.005};
  for (const RatioEstimate& e : {above, below}) {
    EXPECT_EQ(Judge(e, /*higher_is_better=*/true), Verdict::kInconclusive) << e.ci_lo;
    EXPECT_EQ(Judge(e, /*higher_is_better=*/false), Verdict::kInconclusive) << e.ci_lo;
  }
  // Wholly beyond the margin it is a verdict; wholly inside, equivalent.
  EXPECT_EQ(Judge({.rounds = 6, .ratio = 1.03, .ci_lo = 1.021, .ci_hi = 1.04}, true),
            Verdict::kBetter);
  EXPECT_EQ(Judge({.rounds = 6, .ratio = 0.97, .ci_lo = 0.96, .ci_hi = 0.979}, true),
            Verdict::kWorse);
  EXPECT_EQ(Judge({.rounds = 6, .ratio = 1.01, .ci_lo = 1.005, .ci_hi = 1.019}, true),
            Verdict::kEquivalent);
}

}  // namespace
}  // namespace txbatch
