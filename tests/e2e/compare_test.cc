// txbatch compare end to end on the emulated NIC: verdicts and counters, never wall-clock
// numbers. Each case has a backlog (a dedicated runner, or a wire slower than the producer), so
// batch 32 really forms batches (asserted: avg_batch >= 16).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "tests/e2e/run_helper.h"

namespace txbatch::test {
namespace {

using nlohmann::json;

std::map<std::string, json> MetricsByName(const json& doc) {
  std::map<std::string, json> m;
  for (const json& x : doc["comparison"]["metrics"]) m[x["metric"].get<std::string>()] = x;
  return m;
}

void ExpectRoundsInterleavedAndBalanced(const json& doc, int rounds) {
  ASSERT_EQ(doc["records"].size(), 2u * rounds);
  for (size_t i = 0; i < doc["records"].size(); ++i) {
    const json& rec = doc["records"][i];
    EXPECT_EQ(rec["side"], i % 2 == 0 ? "A" : "B");  // A then B in every round
    EXPECT_EQ(rec["round"], static_cast<int>(i / 2) + 1);
    EXPECT_TRUE(rec["results"]["accounting"]["balanced"].get<bool>());
    if (rec["side"] == "B") {
      EXPECT_GE(rec["results"]["avg_batch"].get<double>(), 16);
    }
  }
}

TEST(Compare, SmallFramesOnIxgbeWithADoorbellCostAreBetterBatched) {
  const auto run = RunTxbatch(
      "compare --driver emu:ixgbe,doorbell_ns=150 --proto udp --size 18 --procs 2 "
      "--runner dedicated --batch 1,32 --rounds 8 --duration 0.2 --warmup 0.05");
  ASSERT_EQ(run.status, 0) << run.err;
  ExpectRoundsInterleavedAndBalanced(run.doc, 8);
  const json& c = run.doc["comparison"];
  EXPECT_EQ(c["axis"], "--batch/--policy");
  EXPECT_EQ(c["a"], "count:1");
  EXPECT_EQ(c["b"], "count:32");
  auto m = MetricsByName(run.doc);
  EXPECT_EQ(m["Mpps"]["verdict"], "better") << m["Mpps"].dump();
  EXPECT_EQ(m["doorbells/pkt"]["verdict"], "better") << m["doorbells/pkt"].dump();
  EXPECT_EQ(m["cycles/pkt"]["verdict"], "better") << m["cycles/pkt"].dump();
  EXPECT_NE(run.out.find("better: "), std::string::npos);
}

TEST(Compare, FullFramesOnE1000AreLinkBoundSoOnlyTheCostPerFrameMoves) {
  // The defaults, but MSS frames (no TSO): 32 of them a driver call, where a GSO frame is 17
  // of the ring's 256 descriptors.
  // --tsq 0: TCP Small Queues keep one stream ~50 MSS frames below its socket (its pacing
  // rate's millisecond), which the 256-descriptor ring absorbs; the qdisc backlog these
  // batches need comes from a stream without TSQ (the kernel before 3.6).
  const auto run =
      RunTxbatch("compare --offload none --tsq 0 --rounds 8 --duration 0.25 --warmup 0.05");
  ASSERT_EQ(run.status, 0) << run.err;
  ExpectRoundsInterleavedAndBalanced(run.doc, 8);
  // Every round reaches the wire, except those in which the host stalled the txirq (a vCPU
  // descheduled for milliseconds: CI once saw 16 ms late, the wire idle 13 ms of a 250 ms
  // window; CI on fce1c22 saw 3 of the 16 cells stalled): the result says so
  // (model_checks.irq_max_late_us), and then only those rounds, at most a quarter of them.
  unsigned stalled = 0;
  for (const json& rec : run.doc["records"]) {
    if (rec["results"]["link_bound"].get<bool>()) continue;
    const double late_us = rec["results"]["model_checks"]["irq_max_late_us"].get<double>();
    EXPECT_GT(late_us, 1000.0) << "not link-bound without a host stall: " << rec["results"].dump();
    ++stalled;
  }
  EXPECT_LE(stalled, 4u);
  auto m = MetricsByName(run.doc);
  // The medians agree to 1 % whatever one round did; the verdict (a confidence interval over the
  // rounds) is "equivalent" unless a stalled round widened it.
  EXPECT_NEAR(m["MB/s"]["median_b"].get<double>() / m["MB/s"]["median_a"].get<double>(), 1.0, 0.01)
      << m["MB/s"].dump();
  if (stalled == 0) {
    EXPECT_EQ(m["MB/s"]["verdict"], "equivalent") << m["MB/s"].dump();
  } else {
    EXPECT_NE(m["MB/s"]["verdict"], "better") << m["MB/s"].dump();
    EXPECT_NE(m["MB/s"]["verdict"], "worse") << m["MB/s"].dump();
  }
  EXPECT_EQ(m["doorbells/pkt"]["verdict"], "better") << m["doorbells/pkt"].dump();
  // A stalled round's CPU time per frame is the host's too: it can widen the interval past a
  // verdict (CI on fce1c22: 3 stalled, CPU ns 0.40-2.37x), never turn it.
  if (stalled == 0) {
    EXPECT_EQ(m["CPU ns/pkt"]["verdict"], "better") << m["CPU ns/pkt"].dump();
  } else {
    EXPECT_NE(m["CPU ns/pkt"]["verdict"], "worse") << m["CPU ns/pkt"].dump();
  }
  EXPECT_LT(m["CPU ns/pkt"]["median_b"].get<double>(), m["CPU ns/pkt"]["median_a"].get<double>());
}

TEST(RunRounds, TheGridRepeatsInterleavedAndLaterPoliciesGetVerdicts) {
  // --tsq 0: TCP Small Queues keep one stream ~50 MSS frames below its socket (its pacing
  // rate's millisecond), which the 256-descriptor ring absorbs; the qdisc backlog these
  // batches need comes from a stream without TSQ (the kernel before 3.6).
  const auto run = RunTxbatch(
      "run --size 65536 --procs 1 --offload none --tsq 0 --rounds 3 --duration 0.2 --warmup 0.05");
  ASSERT_TRUE(WroteCells(run, 6));
  for (size_t i = 0; i < 6; ++i) {
    const json& rec = run.doc["records"][i];
    EXPECT_EQ(rec["round"], static_cast<int>(i / 2) + 1);  // every cell once per round
    EXPECT_EQ(rec["config"]["batch"], i % 2 == 0 ? 1 : 32);
  }
  EXPECT_NE(run.out.find("3 interleaved rounds"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("BW vs off"), std::string::npos) << run.out;
  // Link-bound: bandwidth the same, the TX path's cycles per frame lower. A round in which the
  // host stalled the txirq (CI's ASan run: served 7.3 ms late, the wire idle 5.1 ms of 200)
  // widens the bandwidth's interval past ±2 %: then it is inconclusive, never better or worse.
  bool stalled = false;
  for (const json& rec : run.doc["records"])
    stalled |= rec["results"]["model_checks"]["irq_max_late_us"].get<double>() > 1000.0;
  if (!stalled) {
    EXPECT_NE(run.out.find("equiv         better 0."), std::string::npos) << run.out;
  } else {
    EXPECT_TRUE(run.out.find("equiv         better 0.") != std::string::npos ||
                run.out.find("inconcl.      better 0.") != std::string::npos)
        << run.out;
  }
}

TEST(Compare, AnythingButOneAxisWithTwoValuesIsBadInput) {
  for (const char* args : {"compare --batch 1,32 --procs 1,8", "compare --batch 32",
                           "compare --batch 1,8,32", "compare --rounds 1"}) {
    const auto run = RunTxbatch(args);
    EXPECT_EQ(run.status, 2) << args << ": " << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << args << ": " << run.err;
    EXPECT_TRUE(run.out.empty()) << args;
    EXPECT_TRUE(run.doc.is_null()) << args;
  }
  EXPECT_NE(RunTxbatch("compare --batch 1,32 --procs 1,8").err.find("--procs has 2"),
            std::string::npos);
}

}  // namespace
}  // namespace txbatch::test
