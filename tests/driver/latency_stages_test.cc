// Where latency goes, end to end: a buffer:N batch makes its first frame wait for the others
// (DPDK's warning about bursts, measured), count:N never waits to fill, and a qdisc's wait is
// reported as such. Relations between stages, never absolute times.
#include <gtest/gtest.h>

#include <string>

#include "tests/driver/run_helper.h"

namespace txbatch::test {
namespace {

using nlohmann::json;

TEST(LatencyStages, ABufferedBatchMakesItsFirstFrameWaitAndCountNeverWaits) {
  const auto run = RunTxbatch(
      "run --driver emu:ixgbe --qdisc none --policy count:1,buffer:32 --proto udp --size 64 "
      "--procs 1 --rate 200kpps --duration 0.3 --warmup 0.05");
  ASSERT_EQ(run.status, 0) << run.err;
  ASSERT_EQ(run.doc["records"].size(), 2u);
  const json& off = run.doc["records"][0]["results"];
  const json& on = run.doc["records"][1]["results"];
  for (const json* r : {&off, &on}) {
    const json& st = (*r)["latency_stages_ns"];
    ASSERT_TRUE(st.is_object()) << r->dump();
    EXPECT_TRUE(st["qdisc"].is_null());  // no qdisc under --qdisc none
    ASSERT_FALSE(st["batch_fill"].is_null());
    ASSERT_FALSE(st["driver_ring"].is_null());
    ASSERT_FALSE(st["wire"].is_null());  // the emulated NIC models its wire
  }
  const double fill_off = off["latency_stages_ns"]["batch_fill"]["p50"];
  const double fill_on = on["latency_stages_ns"]["batch_fill"]["p50"];
  EXPECT_LT(10 * fill_off, fill_on) << fill_off << " vs " << fill_on;
  const json& pos = on["latency_by_position_ns"];
  ASSERT_GE(pos.size(), 2u);
  EXPECT_EQ(pos.front()["positions"], "0");
  EXPECT_GT(pos.front()["p50"].get<double>(), pos.back()["p50"].get<double>())
      << "the first frame of a 32-frame batch waits for the other 31";
  EXPECT_NE(run.out.find("Where the latency goes"), std::string::npos);
}

TEST(LatencyStages, AQdiscWaitIsReportedAsSuchAndNothingWhereNothingReceives) {
  const auto qdisc = RunTxbatch(
      "run --driver emu:e1000 --proto udp --size 1000 --procs 1 --batch 32 --duration 0.2 "
      "--warmup 0.05");
  ASSERT_EQ(qdisc.status, 0) << qdisc.err;
  const json& st = qdisc.doc["records"][0]["results"]["latency_stages_ns"];
  ASSERT_TRUE(st.is_object());
  EXPECT_FALSE(st["qdisc"].is_null());
  EXPECT_TRUE(st["batch_fill"].is_null());

  const auto null = RunTxbatch(
      "run --driver ethdev:net_null0 --proto udp --size 64 --procs 1 "
      "--batch 32 --duration 0.1 --warmup 0.05");
  ASSERT_EQ(null.status, 0) << null.err;
  EXPECT_TRUE(null.doc["records"][0]["results"]["latency_stages_ns"].is_null());
  EXPECT_TRUE(null.doc["records"][0]["results"]["latency_by_position_ns"].empty());
}

}  // namespace
}  // namespace txbatch::test
