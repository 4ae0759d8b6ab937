// --per-flow on a loopback run (issue 20, item 7): each producer's flow is counted apart by the
// run's own receiver, the flows add up to the record's books (a lossy link's gaps included), each
// has its latency, and the table shows a row per flow; without it records carry none.
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tests/driver/run_helper.h"

namespace txbatch::test {
namespace {

TEST(PerFlow, EachProducersFlowIsCountedApartAndTheFlowsAddUpToTheBooks) {
  const auto run = RunTxbatch(
      "run --driver emu:e1000 --proto udp --size 1000 --procs 3 --batch 32 --duration 0.1 "
      "--warmup 0.02 --link 'loss random 3% seed 7' --per-flow");
  ASSERT_EQ(run.status, 0) << run.err;
  ASSERT_EQ(run.doc["records"].size(), 1u);
  const auto& rec = run.doc["records"][0];
  EXPECT_EQ(rec["config"]["per_flow"], true);
  const auto& flows = rec["results"]["per_flow"];
  ASSERT_TRUE(flows.is_array()) << rec["results"];
  ASSERT_EQ(flows.size(), 3u);
  uint64_t received = 0, lost = 0;
  for (unsigned f = 0; f < 3; ++f) {
    EXPECT_EQ(flows[f]["flow"], f);
    const uint64_t got = flows[f]["received"].get<uint64_t>();
    EXPECT_GT(got, 0u) << flows[f];
    received += got;
    lost += flows[f]["lost"].get<uint64_t>();
    // Three stream producers on two CPUs share a full band unevenly: a clean CI once saw one get
    // 2 frames through in the 0.12 s (woken last each time). Losses and window latency are
    // asked of a flow that carried a thousand (no loss in 1000 at 3 %: 6e-14).
    if (got >= 1000) {
      EXPECT_GT(flows[f]["lost"].get<uint64_t>(), 0u) << flows[f];
      ASSERT_TRUE(flows[f]["latency_ns"].is_object()) << flows[f];
      EXPECT_GT(flows[f]["latency_ns"]["count"].get<uint64_t>(), 0u);
    }
    if (flows[f]["latency_ns"].is_object())  // those in the window
      EXPECT_LE(flows[f]["latency_ns"]["count"].get<uint64_t>(), got);
    EXPECT_TRUE(std::regex_search(
        run.out, std::regex("\ncount:32 +1000 +3 +0 +" + std::to_string(f) + " +" +
                            std::to_string(got) + " +" +
                            std::to_string(flows[f]["lost"].get<uint64_t>()) + " ")))
        << run.out;
  }
  EXPECT_GT(lost, 0u);  // 3 % of thousands in all
  const auto& books = rec["results"]["accounting"];
  EXPECT_EQ(received, books["received"].get<uint64_t>());
  EXPECT_EQ(lost, books["lost"].get<uint64_t>());
  EXPECT_EQ(books["balanced"], true);

  const auto plain = RunTxbatch(
      "run --driver emu:e1000 --proto udp --size 1000 --procs 3 --batch 32 --duration 0.05 "
      "--warmup 0.01");
  ASSERT_EQ(plain.status, 0) << plain.err;
  EXPECT_EQ(plain.doc["records"][0]["config"]["per_flow"], false);
  EXPECT_TRUE(plain.doc["records"][0]["results"]["per_flow"].is_null());
  EXPECT_EQ(plain.out.find("Per flow"), std::string::npos);
}

}  // namespace
}  // namespace txbatch::test
