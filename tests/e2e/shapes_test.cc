// Every qdisc shape (pfifo_fast with each sync and runner, and none) with procs 1 and 8, on a
// loopback port whose TX ring is single-producer (net_ring0: concurrent tx_burst without the
// TX lock would corrupt it) and on the emulated e1000 (wire-limited: the ring stops, frames
// requeue, the txirq restarts it). Books balance, the drain completes, nothing leaks, and every
// frame that was sent comes back exactly once, in order per flow.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <string>
#include <tuple>

#include "tests/e2e/run_helper.h"

namespace txbatch::test {
namespace {

using nlohmann::json;

struct Shape {
  const char* name;
  const char* args;
};

constexpr Shape kShapes[] = {
    {"RootlockInline", "--qdisc pfifo_fast --sync rootlock --runner inline"},
    {"RootlockDedicated", "--qdisc pfifo_fast --sync rootlock --runner dedicated"},
    {"NolockInline", "--qdisc pfifo_fast --sync nolock --runner inline"},
    {"NolockDedicated", "--qdisc pfifo_fast --sync nolock --runner dedicated"},
    {"Noqueue", "--qdisc none"},
};

using Case = std::tuple<Shape, std::string>;  // shape, driver

class ShapeRun : public ::testing::TestWithParam<Case> {};

// Each case's run, made once for the tests that read it (the books, the window).
const TxbatchRun& ShapeRunOf(const Case& c) {
  static std::map<std::string, TxbatchRun> runs;
  const auto& [shape, driver] = c;
  const std::string args = "run " + std::string(shape.args) + " --driver " + driver +
                           " --proto udp --size 1000 --procs 1,8 --batch 32 "
                           "--duration 0.3 --warmup 0.1";
  auto it = runs.find(args);
  if (it == runs.end()) it = runs.emplace(args, RunTxbatch(args)).first;
  return it->second;
}

TEST_P(ShapeRun, BooksBalanceDrainCompletesAndEveryFrameArrivesOnce) {
  const auto& [shape, driver] = GetParam();
  const bool noqueue = std::string(shape.args) == "--qdisc none";
  const TxbatchRun& run = ShapeRunOf(GetParam());
  ASSERT_TRUE(WroteCells(run, 2));
  for (const auto& [rec, r, a, cell] : Cells(run)) {
    ExpectBooksClosed(rec);
    EXPECT_GT(a["sent"].get<uint64_t>(), 0u) << cell;  // over the whole cell, drain included
    EXPECT_EQ(a["received"], a["sent"]) << cell;       // nothing corrupted or lost on the way ...
    EXPECT_EQ(a["lost"], 0) << cell;                   // ... in order per flow ...
    EXPECT_EQ(a["duplicated"], 0) << cell;             // ... exactly once
    EXPECT_EQ(r["foreign_frames"], 0) << cell;
    // A qdisc never drops a stream producer's frame; noqueue drops what the driver refuses.
    if (!noqueue) {
      EXPECT_EQ(a["dropped"], 0) << cell;
    }
    EXPECT_EQ(a["dropped"], r["drops_total"]) << cell;
  }
}

// The window counted frames. A test of its own (issue 44, item 7: it was an `if` that
// ThreadSanitizer's build skipped silently): under TSan eight producers on 2 CPUs, each ~10x
// slower, have left a 0.3-s window without a frame (CI, 2026-12-01, NolockInline_e1000; no race
// reported), so scripts/tsan.sh, which names the cases it runs, runs the books above, not this.
TEST_P(ShapeRun, TheWindowCountsFrames) {
  const TxbatchRun& run = ShapeRunOf(GetParam());
  ASSERT_EQ(run.status, 0) << run.err << run.out;
  for (const json& rec : run.doc["records"])
    EXPECT_GT(rec["results"]["packets"].get<uint64_t>(), 0u) << rec["config"].dump();
}

// The empty-qdisc bypass (on by default for an inline runner) against --no-bypass, on both
// syncs, with one producer and eight, on the emulated e1000 offered 50 kpps (below its 1 Gb/s
// wire, so the qdisc is empty when a lone producer sends; eight still meet each other's runs):
// the books close and every frame arrives once either way; with it, frames that found the qdisc
// empty bypassed it, without it none did.
TEST(Bypass, ChangesNoCountOnEitherSync) {
  for (const bool off : {false, true}) {
    const auto run = RunTxbatch(std::string("run --sync rootlock,nolock --driver emu:e1000 ") +
                                "--proto udp --size 1000 --procs 1,8 --batch 32 --rate 50kpps " +
                                "--duration 0.3 --warmup 0.1" + (off ? " --no-bypass" : ""));
    ASSERT_TRUE(WroteCells(run, 4));
    for (const auto& [rec, r, a, cell] : Cells(run)) {
      ExpectDeliveredOnce(rec);
      EXPECT_EQ(rec["config"]["bypass"], !off) << cell;
      if (off) {
        EXPECT_EQ(r["bypassed"], 0) << cell;
      } else if (rec["config"]["procs"] == 1) {
        EXPECT_GT(r["bypassed"].get<uint64_t>(), 0u) << cell;
        EXPECT_LE(r["bypassed"].get<uint64_t>(), r["accounting"]["sent"].get<uint64_t>()) << cell;
      }
    }
  }
}

// --no-timing: throughput only. Frames carry no stamp and the sink keeps no latency (the
// record's latency fields are null), on a qdisc and without one; the books close and every frame
// arrives once as with timing.
TEST(NoTiming, KeepsTheBooksAndLeavesOnlyTheLatencyOut) {
  const auto run = RunTxbatch(
      "run --qdisc pfifo_fast,none --driver emu:e1000 --proto udp --size 1000 --procs 2 "
      "--batch 32 --duration 0.3 --warmup 0.1 --no-timing");
  ASSERT_TRUE(WroteCells(run, 2));
  for (const auto& [rec, r, a, cell] : Cells(run)) {
    ExpectDeliveredOnce(rec);
    EXPECT_EQ(rec["config"]["timing"], false) << cell;
    EXPECT_TRUE(r["latency_ns"].is_null()) << cell;
    EXPECT_TRUE(r["latency_stages_ns"].is_null()) << cell;
    EXPECT_GT(r["packets"].get<uint64_t>(), 0u) << cell;
  }
}

// Overload: datagram producers flat out on every shape, 1 and 8 of them. On the emulated e1000
// they offer many times what its 1 Gb/s wire takes: the excess is dropped with its reason (a full
// band, or what the ring refused under --qdisc none), never lost from the books; queueing alone
// never exhausts the pool; the run ends on time and drains.
TEST_P(ShapeRun, DatagramOverloadDropsWithAReasonAndEndsOnTime) {
  const auto& [shape, driver] = GetParam();
  double wall_s = 0;
  const auto run = RunTxbatchTimed("run " + std::string(shape.args) + " --driver " + driver +
                                       " --proto udp --size 1000 --procs 1,8 --batch 32 "
                                       "--producer datagram --duration 0.3 --warmup 0.1",
                                   &wall_s);
  ASSERT_TRUE(WroteCells(run, 2));
  // Two cells of 0.4 s, EAL start-up and the drains: far less than this on time.
  EXPECT_LT(wall_s, 15.0);
  const bool wire_bound = driver.starts_with("emu");
  for (const auto& [rec, r, a, cell] : Cells(run)) {
    ExpectBooksClosed(rec);
    ExpectDropsHaveReasons(rec);
    EXPECT_EQ(a["dropped"], r["drops_total"]) << cell;
    if (wire_bound) {
      EXPECT_GT(a["dropped"].get<uint64_t>(), a["sent"].get<uint64_t>() / 10)
          << cell << ": offered far more than the wire takes";
    }
  }
}

// Overload where nothing limits but the software: net_null frees what it accepts, so datagram and
// stream producers flat out on every shape meet the runner's own speed.
class NullOverload : public ::testing::TestWithParam<std::tuple<Shape, const char*>> {};

TEST_P(NullOverload, BooksBalanceDropsHaveReasonsAndTheRunEndsOnTime) {
  const auto& [shape, producer] = GetParam();
  double wall_s = 0;
  const auto run = RunTxbatchTimed("run " + std::string(shape.args) +
                                       " --driver ethdev:net_null0 --proto udp --size 1000 "
                                       "--procs 1,8 --batch 32 --producer " +
                                       producer + " --duration 0.3 --warmup 0.1",
                                   &wall_s);
  ASSERT_TRUE(WroteCells(run, 2));
  EXPECT_LT(wall_s, 15.0);
  for (const auto& [rec, r, a, cell] : Cells(run)) {
    ExpectBooksClosed(rec);
    ExpectDropsHaveReasons(rec);
    if (std::string(producer) == "stream") {
      EXPECT_EQ(r["drops_total"], 0) << cell;  // stream producers wait
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryShape, NullOverload,
                         ::testing::Combine(::testing::ValuesIn(kShapes),
                                            ::testing::Values("stream", "datagram")),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param).name) + "_" +
                                  std::get<1>(info.param);
                         });

INSTANTIATE_TEST_SUITE_P(EveryShape, ShapeRun,
                         ::testing::Combine(::testing::ValuesIn(kShapes),
                                            ::testing::Values("ethdev:net_ring0", "emu:e1000")),
                         [](const auto& info) {
                           const std::string driver = std::get<1>(info.param);
                           return std::string(std::get<0>(info.param).name) +
                                  (driver.starts_with("emu") ? "_e1000" : "_net_ring");
                         });

}  // namespace
}  // namespace txbatch::test
