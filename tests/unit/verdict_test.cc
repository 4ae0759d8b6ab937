// The A/B verdict on synthetic rounds with known answers, and the rows judged with it.
#include "results/verdict.h"

#include <gtest/gtest.h>

#include <charconv>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "results/summary.h"
#include "tests/unit/says.h"

namespace txbatch {
namespace {

using test::Says;

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
  const auto e = EstimateRatio(Rounds(10, 100, 0.005, 1), Rounds(10, 100, 0.005, 2));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->rounds, 10);
  EXPECT_EQ(Judge(*e, true), Verdict::kEquivalent);
  EXPECT_GE(e->ci_lo, 0.98);
  EXPECT_LE(e->ci_hi, 1.02);
  EXPECT_TRUE(Says(DescribeVerdict(*e, Verdict::kEquivalent, "Mpps"), "equivalent: within ±2%"));
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
  EXPECT_TRUE(Says(s, "x Mpps (95% CI "));
}

TEST(Verdict, WideNoiseIsInconclusive) {
  const auto e = EstimateRatio(Rounds(5, 100, 0.2, 5), Rounds(5, 100, 0.2, 6));
  ASSERT_TRUE(e);
  EXPECT_EQ(Judge(*e, true), Verdict::kInconclusive);
  EXPECT_LT(e->ci_lo, 0.98);
  EXPECT_GT(e->ci_hi, 1.02);
  EXPECT_TRUE(Says(DescribeVerdict(*e, Verdict::kInconclusive, "Mpps"), "run more rounds"));
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
  const RatioEstimate below{.rounds = 6, .ratio = 1 / 1.017, .ci_lo = 1 / 1.03, .ci_hi = 1 / 1.005};
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

// The interval a verdict sentence prints after "CI ": its two bounds as printed.
std::pair<double, double> PrintedInterval(const std::string& text) {
  const size_t at = text.find("CI ");
  EXPECT_NE(at, std::string::npos) << text;
  const char* p = text.data() + at + 3;
  const char* end = text.data() + text.size();
  double lo = 0, hi = 0;
  p = std::from_chars(p, end, lo).ptr;
  const std::string_view dash = "–";
  EXPECT_EQ(std::string_view(p, dash.size()), dash) << text;
  std::from_chars(p + dash.size(), end, hi);
  return {lo, hi};
}

TEST(Verdict, ThePrintedIntervalGivesTheSameVerdictAsTheInterval) {
  // A lower bound of 1.0204 is worse for a cost, 1.0196 inconclusive: printed as "1.02" both
  // read as the edge and the two lines seem to disagree.
  const RatioEstimate past{.rounds = 5, .ratio = 1.025, .ci_lo = 1.0204, .ci_hi = 1.031};
  ASSERT_EQ(Judge(past, false), Verdict::kWorse);
  EXPECT_EQ(DescribeVerdict(past, Verdict::kWorse, "cycles/pkt"),
            "worse: 1.02x cycles/pkt (95% CI 1.0204–1.031)");
  const RatioEstimate short_of{.rounds = 5, .ratio = 1.025, .ci_lo = 1.0196, .ci_hi = 1.031};
  ASSERT_EQ(Judge(short_of, false), Verdict::kInconclusive);
  EXPECT_EQ(DescribeVerdict(short_of, Verdict::kInconclusive, "cycles/pkt"),
            "inconclusive: CI 1.0196–1.031 spans ±2%, run more rounds");
  // Far from the band three digits do, as before.
  const RatioEstimate far{.rounds = 5, .ratio = 1.83, .ci_lo = 1.7912, .ci_hi = 1.8843};
  EXPECT_EQ(DescribeVerdict(far, Verdict::kBetter, "Mpps"),
            "better: 1.83x Mpps (95% CI 1.79–1.88)");
  // Every interval 0.011 wide sliding across the band: judged on the printed bounds, the same.
  for (int k = 0; k < 470; ++k) {
    RatioEstimate e{.rounds = 5, .ratio = 1, .ci_lo = 0.9701 + k * 0.00013, .ci_hi = 0};
    e.ci_hi = e.ci_lo + 0.011;
    e.ratio = std::sqrt(e.ci_lo * e.ci_hi);
    for (bool higher_is_better : {true, false}) {
      const Verdict v = Judge(e, higher_is_better);
      const std::string text = DescribeVerdict(e, v, "Mpps");
      const auto [lo, hi] = PrintedInterval(text);
      RatioEstimate printed = e;
      printed.ci_lo = lo;
      printed.ci_hi = hi;
      EXPECT_EQ(Judge(printed, higher_is_better), v)
          << text << " for " << e.ci_lo << "–" << e.ci_hi;
    }
  }
}

}  // namespace
}  // namespace txbatch

namespace txbatch {
namespace {

// Rounds of two cells, batching off (count:1) and a kernel policy, on the same grid shape.
std::vector<CellRecord> TwoCells(bool sync_auto, bool policy_nolock) {
  std::vector<CellRecord> out;
  for (int round = 1; round <= 3; ++round)
    for (int cell = 0; cell < 2; ++cell) {
      CellRecord r;
      r.cell = cell;
      r.round = round;
      r.config.driver = "emu:ixgbe";
      r.config.policy = *ParsePolicySpec(cell == 0 ? "count:1" : "linux-2025");
      r.config.shape.nolock = cell == 1 && policy_nolock;
      r.config.sync_auto = sync_auto;
      r.result.mb_per_s = cell == 0 ? 100 + round : 200 + round;
      r.result.cycles_per_pkt = cell == 0 ? 800 + round : 400 + round;
      out.push_back(r);
    }
  return out;
}

// With --sync auto each policy runs on its kernel's qdisc, and is still judged against batching
// off in its grid's shape: linux-2025 (lock-free) against count:1 (root-locked). Two syncs given
// on the command line are two shapes, each judged against its own batching off.
TEST(Summary, AutoSyncJudgesAPolicyAgainstBatchingOffWhateverSyncEachGot) {
  const auto autos = TwoCells(/*sync_auto=*/true, /*policy_nolock=*/true);
  const auto rows = Summarise(autos, *ParsePolicySpec("count:1"));
  ASSERT_EQ(rows.size(), 2u);
  ASSERT_TRUE(rows[1].bw_vs_off.has_value());
  EXPECT_EQ(rows[1].bw_verdict, Verdict::kBetter);
  EXPECT_EQ(rows[1].cycles_verdict, Verdict::kBetter);
  const auto given = TwoCells(/*sync_auto=*/false, /*policy_nolock=*/true);
  EXPECT_FALSE(Summarise(given, *ParsePolicySpec("count:1"))[1].bw_vs_off.has_value());
}

}  // namespace
}  // namespace txbatch
