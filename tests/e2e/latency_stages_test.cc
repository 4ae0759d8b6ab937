// Where latency goes, end to end: a buffer:N batch makes its first frame wait for the others
// (DPDK's warning about bursts, measured), count:N never waits to fill, and a qdisc's wait is
// reported as such. Relations between stages, never absolute times.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "tests/e2e/run_helper.h"

namespace txbatch::test {
namespace {

using nlohmann::json;

// One paced producer's cells, count:1 and buffer:32 under --qdisc none, on either engine.
const std::string kCountAndBuffer =
    "--driver emu:ixgbe --qdisc none --policy count:1,buffer:32 --proto udp --size 64 --procs 1 "
    "--rate 200kpps --duration 0.3 --warmup 0.05";

TEST(LatencyStages, ABufferedBatchMakesItsFirstFrameWaitAndCountNeverWaits) {
  const auto run = RunTxbatch("run " + kCountAndBuffer);
  ASSERT_TRUE(WroteCells(run, 2));
  const json& off = Results(run, 0);
  const json& on = Results(run, 1);
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

// The same cells on the simulation's virtual clock, where pacing is exact and the numbers are
// the arithmetic's: at 200 kpps a frame is built every 5 us, so under buffer:32 the first frame
// of each batch waits for the 31 after it, 31 x 5 us = 155 us, the second 150 us, and each batch
// goes whole (0.3 s x 200 kpps = 60 000 frames in the window, 1875 batches). What comes after
// the fill (the driver call and a 64-byte frame's wire time on ixgbe) is ~0.2 us. (On the real
// clock the producer's wake-ups are late by tens of us and it catches up in bursts, which only
// shortens a batch's fill: position 0's p50 there was 137-154 us in three runs.)
TEST(LatencyStages, OnTheVirtualClockABatchsFirstFrameWaitsExactly31FrameIntervals) {
  const auto run = RunTxbatch("run --engine sim " + kCountAndBuffer);
  ASSERT_TRUE(WroteCells(run, 2));
  const json& off = Results(run, 0);
  const json& on = Results(run, 1);
  // count:1 sends each frame as it is built: it never waits to fill, every frame position 0.
  ASSERT_EQ(off["latency_by_position_ns"].size(), 1u) << off["latency_by_position_ns"];
  EXPECT_LT(off["latency_stages_ns"]["batch_fill"]["p50"].get<double>(), 1e3);
  const json& pos = on["latency_by_position_ns"];
  ASSERT_EQ(pos.size(), 6u) << pos;  // 0, 1, 2-3, 4-7, 8-15, 16-31
  for (const auto& [i, wait_us] : {std::pair{0, 155.0}, std::pair{1, 150.0}}) {
    const json& p = pos[i];
    EXPECT_EQ(p["positions"], std::to_string(i));
    EXPECT_EQ(p["count"], 1875) << p;
    // Every batch alike: its least and its most are the fill and ~0.2 us.
    EXPECT_GE(p["min"].get<double>(), wait_us * 1e3) << p;
    EXPECT_LE(p["max"].get<double>(), wait_us * 1e3 + 1e3) << p;
  }
  // Positions 16-31 wait 15 .. 0 intervals, 75 .. 0 us, then for the descriptors written before
  // theirs in the batch's one driver call (~0.1 us each: ~1.9 us at most here).
  EXPECT_EQ(pos[5]["positions"], "16-31");
  EXPECT_EQ(pos[5]["count"], 1875 * 16);
  EXPECT_GE(pos[5]["max"].get<double>(), 75e3) << pos[5];
  EXPECT_LE(pos[5]["max"].get<double>(), 75e3 + 5e3) << pos[5];
  EXPECT_LE(pos[5]["min"].get<double>(), 5e3) << pos[5];
}

TEST(LatencyStages, AQdiscWaitIsReportedAsSuchAndNothingWhereNothingReceives) {
  const auto qdisc = RunTxbatch(
      "run --driver emu:e1000 --proto udp --size 1000 --procs 1 --batch 32 --duration 0.2 "
      "--warmup 0.05");
  ASSERT_EQ(qdisc.status, 0) << qdisc.err;
  const json& st = Results(qdisc, 0)["latency_stages_ns"];
  ASSERT_TRUE(st.is_object());
  EXPECT_FALSE(st["qdisc"].is_null());
  EXPECT_TRUE(st["batch_fill"].is_null());

  const auto null = RunTxbatch(
      "run --driver ethdev:net_null0 --proto udp --size 64 --procs 1 "
      "--batch 32 --duration 0.1 --warmup 0.05");
  ASSERT_EQ(null.status, 0) << null.err;
  EXPECT_TRUE(Results(null, 0)["latency_stages_ns"].is_null());
  EXPECT_TRUE(Results(null, 0)["latency_by_position_ns"].empty());
}

// --latency-sample 32: one frame in each block of 32 of the producer carries a stamp, block j's
// at offset j mod 32 — so the latency is the sample's and, under buffer:32 (batches of 32, a
// size dividing N), every position of the batch is in it. The bound on the sample's size: a
// window of M frames (`packets`) holds M/32 blocks, and the blocks cut at its two ends hold one
// stamped frame or none each: M/32 - 2 .. M/32 + 2; on the real clock a batch (32 frames, one
// stamp) in flight at each end of the window may count on one side for the wire and on the
// other for the receiver: 2 more. Every frame still counts: the books close and none is lost.
TEST(LatencyStages, ASampleOfOneFrameIn32TimesEveryPositionOfTheBatch) {
  for (const std::string engine : {"sim", "real"}) {
    SCOPED_TRACE(engine);
    const auto run = RunTxbatch("run --engine " + engine + " " + kCountAndBuffer +
                                " --latency-sample 32");
    ASSERT_TRUE(WroteCells(run, 2));
    EXPECT_NE(run.out.find("latency on a sample, one frame in 32 of each producer"),
              std::string::npos)
        << run.out;
    const double slack = engine == "sim" ? 2 : 4;
    for (const auto& [rec, r, a, cell] : Cells(run)) {
      EXPECT_EQ(rec["config"]["latency_sample"], 32) << cell;
      ExpectDeliveredOnce(rec);
      const double sample = r["packets"].get<double>() / 32;
      const double count = r["latency_ns"]["count"];
      EXPECT_GE(count, sample - slack) << cell;
      EXPECT_LE(count, sample + slack) << cell;
      uint64_t by_position = 0;
      for (const json& p : r["latency_by_position_ns"]) by_position += p["count"].get<uint64_t>();
      EXPECT_EQ(by_position, count) << cell;
    }
    // count:1: every frame alone, at position 0; buffer:32: every bucket of the 32 positions.
    EXPECT_EQ(Results(run, 0)["latency_by_position_ns"].size(), 1u);
    const json& pos = Results(run, 1)["latency_by_position_ns"];
    if (engine == "sim") {
      ASSERT_EQ(pos.size(), 6u) << pos;  // 0, 1, 2-3, 4-7, 8-15, 16-31
      for (const json& p : pos) EXPECT_GT(p["count"].get<uint64_t>(), 0u) << p;
    }
  }
}

}  // namespace
}  // namespace txbatch::test
