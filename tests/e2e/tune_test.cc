// txbatch tune end to end: answers that do not depend on the machine's speed — a link-bound
// e1000 needs no batching, an impossible latency budget gets no recommendation — and bad input.
#include <gtest/gtest.h>

#include <string>

#include "tests/e2e/run_helper.h"

namespace txbatch::test {
namespace {

TEST(Tune, ALinkBoundLinkNeedsNoBatching) {
  const auto run = RunTxbatch("tune --batch 1,8,32 --rounds 2 --duration 0.15 --warmup 0.05");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto& t = run.doc["tune"];
  ASSERT_TRUE(t.is_object());
  EXPECT_EQ(t["points"].size(), 3u);
  EXPECT_TRUE(t["refined"].empty());  // nothing between "no batching" and itself
  EXPECT_TRUE(t["recommendation"]["found"].get<bool>());
  EXPECT_EQ(t["recommendation"]["batch"], 1);
  EXPECT_NE(run.out.find("recommendation: batch 1:"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("batching is not needed"), std::string::npos) << run.out;
  for (const auto& rec : run.doc["records"])
    EXPECT_TRUE(rec["results"]["accounting"]["balanced"].get<bool>());
}

TEST(Tune, AnImpossibleLatencyBudgetGetsNoRecommendationAndSaysWhy) {
  const auto run =
      RunTxbatch("tune --batch 1,8 --rounds 2 --duration 0.1 --warmup 0.05 --p99-max 1ns");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_FALSE(run.doc["tune"]["recommendation"]["found"].get<bool>());
  EXPECT_NE(run.out.find("no recommendation: no batch reaching 95 % of peak keeps p99 within"),
            std::string::npos)
      << run.out;
}

// Issue 44, item 2: nothing receives on net_null0, so no p99 is measured; the recommendation
// (by throughput alone) says the budget was not applied instead of reading as if it were met.
TEST(Tune, ABudgetWhereNothingReceivesIsSaidNotApplied) {
  const auto run = RunTxbatch(
      "tune --driver ethdev:net_null0 --proto udp --size 18 --batch 1,2 --rounds 2 "
      "--duration 0.1 --warmup 0.05 --p99-max 1ms");
  ASSERT_EQ(run.status, 0) << run.err;
  const auto& t = run.doc["tune"];
  ASSERT_TRUE(t.is_object());
  for (const auto& p : t["points"]) EXPECT_TRUE(p["p99_ns"].is_null()) << p;
  const std::string said = "p99 not measured: the --p99-max budget was not applied";
  EXPECT_NE(t["recommendation"]["reason"].get<std::string>().find(said), std::string::npos)
      << t["recommendation"];
  EXPECT_NE(run.out.find(said), std::string::npos) << run.out;
}

TEST(Tune, BadInputIsOneSentence) {
  for (const char* args : {"tune --target 10", "tune --p99-max 5parsecs", "tune --procs 1,8",
                           "tune --qdisc none --policy buffer:8"}) {
    const auto run = RunTxbatch(args);
    EXPECT_EQ(run.status, 2) << args << ": " << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << args << ": " << run.err;
    EXPECT_TRUE(run.out.empty()) << args;
  }
}

}  // namespace
}  // namespace txbatch::test
