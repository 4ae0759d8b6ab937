// The emulator's self-check (engine/emulator_check.h) on scripted counters with known answers,
// and what compare and tune do with a cell it marks; what the machine did beside the run
// (CellResult::machine, base/cpu_times.h).
#include "engine/emulator_check.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/cpu_times.h"
#include "engine/cell.h"
#include "tests/unit/says.h"
#include "tools/compare.h"
#include "tools/tune.h"

namespace txbatch {
namespace {

using test::Says;

// One producer paced at 1 Mpps for a 1 s window that made `generated` frames.
EmulatorCheckInput Paced(uint64_t generated, uint64_t held = 0) {
  EmulatorCheckInput in;
  in.window_s = 1.0;
  in.offered_pps = {1e6};
  in.producers = {{generated, held}};
  return in;
}

TEST(EmulatorCheck, APacedProducerShortOfItsRateWithNothingHoldingItBackIsBound) {
  const EmulatorCheck c = CheckEmulator(Paced(500'000));
  EXPECT_TRUE(c.bound);
  EXPECT_TRUE(Says(c.why, "producer 0 made 0.5 of the 1 Mpps it was offered (50.00 %)"));
  ASSERT_TRUE(c.least_rate_share);
  EXPECT_DOUBLE_EQ(*c.least_rate_share, 0.5);
}

TEST(EmulatorCheck, TheBoundIsOnePercentOfTheOfferedRate) {
  // 1 % short of 1e6 in 1 s is 10 000 frames: 990 001 keeps up, 989 999 does not.
  EXPECT_FALSE(CheckEmulator(Paced(990'001)).bound);
  EXPECT_TRUE(CheckEmulator(Paced(989'999)).bound);
  EXPECT_FALSE(CheckEmulator(Paced(1'000'000)).bound);
  EXPECT_TRUE(CheckEmulator(Paced(1'000'000)).why.empty());
}

TEST(EmulatorCheck, AProducerHeldBackByTheStackIsTheDevicesPaceNotTheEmulators) {
  // TCP Small Queues or an empty pool held it (its own count), or a full qdisc blocked a stream
  // producer (the queue's): the device or the model set the pace.
  EXPECT_FALSE(CheckEmulator(Paced(500'000, /*held=*/3)).bound);
  EmulatorCheckInput blocked = Paced(500'000);
  blocked.queue_waits = 1;
  EXPECT_FALSE(CheckEmulator(blocked).bound);
  // The share is reported all the same.
  EXPECT_DOUBLE_EQ(*CheckEmulator(blocked).least_rate_share, 0.5);
}

TEST(EmulatorCheck, AProducerHeldBackByTheModelsOwnCostsIsTheDevicesPace) {
  // The emulated NIC's descriptor writes and doorbells, spent by the calling producer: at 991 ns
  // a frame (over 99 % of the 1 us interval) the model alone leaves no room for 1 Mpps.
  EmulatorCheckInput in = Paced(500'000);
  in.modelled_ns_per_frame = 991;
  EXPECT_FALSE(CheckEmulator(in).bound);
  // At 980 ns it would have: the other half is txbatch's.
  in.modelled_ns_per_frame = 980;
  EXPECT_TRUE(CheckEmulator(in).bound);
  // Four producers at 250 kpps each on one queue pay its costs for a million frames a second
  // between them (the TX lock's holder spends them): 991 ns a frame leaves none of them room.
  in.offered_pps = {250e3, 250e3, 250e3, 250e3};
  in.producers = {{100'000, 0}, {100'000, 0}, {100'000, 0}, {100'000, 0}};
  in.queue_offered_pps = {1e6, 1e6, 1e6, 1e6};
  in.modelled_ns_per_frame = 991;
  EXPECT_FALSE(CheckEmulator(in).bound);
  // On four queues of their own, 250 kpps each leaves each room: they fell short themselves.
  in.queue_offered_pps = {250e3, 250e3, 250e3, 250e3};
  EXPECT_TRUE(CheckEmulator(in).bound);
}

TEST(EmulatorCheck, AWindowOfFewFramesForgivesTwo) {
  // A probe at 200 pps in a 0.25 s window is offered 50: one or two short is the pace's phase,
  // not 2 % or 4 % of a rate; three are.
  EmulatorCheckInput in;
  in.window_s = 0.25;
  in.offered_pps = {200};
  in.producers = {{48, 0}};
  EXPECT_FALSE(CheckEmulator(in).bound);
  in.producers = {{47, 0}};
  EXPECT_TRUE(CheckEmulator(in).bound);
}

TEST(EmulatorCheck, FlatOutProducersAreNeverShortOfAPace) {
  EmulatorCheckInput in = Paced(10);
  in.offered_pps = {0};
  const EmulatorCheck c = CheckEmulator(in);
  EXPECT_FALSE(c.bound);
  EXPECT_FALSE(c.least_rate_share);
}

TEST(EmulatorCheck, TheSlowestOfSeveralProducersIsNamedAndTheProbeCounts) {
  EmulatorCheckInput in;
  in.window_s = 2.0;
  in.offered_pps = {1e6, 1e6, 1e3};  // two load producers and the probe
  in.producers = {{2'000'000, 0}, {1'600'000, 0}, {1'000, 0}};
  const EmulatorCheck c = CheckEmulator(in);
  EXPECT_TRUE(c.bound);
  EXPECT_TRUE(Says(c.why, "producer 2 made 0.0005 of the 0.001 Mpps"));
  EXPECT_DOUBLE_EQ(*c.least_rate_share, 0.5);
}

TEST(EmulatorCheck, HostStallsOfOnePercentOfTheWindowWithALateTxirqAreTheMachines) {
  EmulatorCheckInput in = Paced(1'000'000);
  in.wire_stalled_us = 10'000;  // 1 % of the 1 s window
  in.wire_max_idle_us = 2'000;
  in.irq_max_late_us = 2'000;  // the longest idle: frames waited for a txirq that late
  const EmulatorCheck c = CheckEmulator(in);
  EXPECT_TRUE(c.bound);
  EXPECT_TRUE(Says(c.why, "the wire sat idle 10.0 ms of the 1000 ms window in stalls of 1 ms or "
                          "more, the longest 2.0 ms while the txirq was served 2.0 ms late"));
  // Just under 1 %.
  in.wire_stalled_us = 9'999;
  EXPECT_FALSE(CheckEmulator(in).bound);
  // A txirq at least half as late as the idle still is (a producer may ring a little after the
  // txirq wakes); one under half is not: the wire idled for want of frames (a load below line
  // rate, a buffer filling), not because the machine kept frames from it.
  in.wire_stalled_us = 10'000;
  in.irq_max_late_us = 1'000;
  EXPECT_TRUE(CheckEmulator(in).bound);
  in.irq_max_late_us = 999;
  EXPECT_FALSE(CheckEmulator(in).bound);
}

TEST(EmulatorCheck, TuneDrawsNoRecommendationFromAnEmulatorBoundPoint) {
  std::vector<TunePoint> points = {{1, 1.0, std::nullopt}, {8, 4.0, std::nullopt},
                                   {32, 5.0, std::nullopt}};
  EXPECT_TRUE(FindKnee(points, 0.95, std::nullopt).found);
  points[2].emulator_bound = true;
  const TuneAdvice a = FindKnee(points, 0.95, std::nullopt);
  EXPECT_FALSE(a.found);
  EXPECT_TRUE(Says(a.reason, "batch 32 ran emulator-bound"));
}

TEST(EmulatorCheck, CompareWithholdsTheThroughputVerdictsOnly) {
  std::vector<CellResult> a(3), b(3);
  for (size_t i = 0; i < 3; ++i) {
    a[i].mpps = 1.0 + 0.01 * static_cast<double>(i), a[i].mb_per_s = 64 * a[i].mpps;
    b[i].mpps = 2.0 + 0.01 * static_cast<double>(i), b[i].mb_per_s = 64 * b[i].mpps;
    a[i].cycles_per_pkt = 200, b[i].cycles_per_pkt = 100 + static_cast<double>(i);
    a[i].emulator_bound = b[i].emulator_bound = false;
  }
  const auto judged = [](const std::vector<MetricComparison>& ms, const std::string& name) {
    for (const auto& m : ms)
      if (m.name == name) return !m.withheld;
    ADD_FAILURE() << name;
    return false;
  };
  EXPECT_TRUE(judged(CompareMetrics(a, b), "Mpps"));
  EXPECT_TRUE(EmulatorCheckNote("B", b).empty());
  // One round of three: the median is not txbatch's; the verdict stands and the note says so.
  b[1].emulator_bound = true;
  b[1].emulator_bound_why = "producer 0 made 2 of the 4 Mpps it was offered";
  EXPECT_TRUE(judged(CompareMetrics(a, b), "Mpps"));
  EXPECT_TRUE(Says(EmulatorCheckNote("B", b), "B was emulator-bound in 1 of 3 rounds (producer 0 "
                                              "made 2 of the 4 Mpps it was offered): half or "
                                              "fewer, so its median stands"));
  // Two of three: the median is txbatch's rate.
  b[2].emulator_bound = true;
  const auto ms = CompareMetrics(a, b);
  EXPECT_FALSE(judged(ms, "Mpps"));
  EXPECT_FALSE(judged(ms, "MB/s"));
  EXPECT_TRUE(judged(ms, "cycles/pkt"));  // what a frame cost is still measured
  EXPECT_TRUE(Says(EmulatorCheckNote("B", b), "B was emulator-bound in 2 of 3 rounds"));
  EXPECT_TRUE(Says(EmulatorCheckNote("B", b), "no throughput verdict is drawn"));
  EXPECT_EQ(ComparisonChecks(CellConfig{}, CellConfig{}, a, b).size(), 1u);
}

// What the machine did to a window beside the run (CellResult::machine): /proc/stat's lines for
// the run's CPUs, idle time (idle, iowait) and steal, in ticks of USER_HZ.
TEST(MachineShares, ProcStatsCpuLinesAreReadForTheRunsCpus) {
  const std::string stat =
      "cpu  4007936 1258538 698807 3285962 4454 0 17376 1564 0 0\n"
      "cpu0 100 10 20 5000 7 3 2 50 0 0\n"
      "cpu1 200 0 40 4000 1 0 10 25 9 0\n"
      "cpu10 1 1 1 1 1 1 1 1 0 0\n"
      "intr 12345\n";
  const std::vector<int> both = {0, 1};
  auto t = ParseCpuTimes(stat, both, 100);
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_DOUBLE_EQ(t->idle_s, (5000 + 7 + 4000 + 1) / 100.0);
  EXPECT_DOUBLE_EQ(t->steal_s, 0.75);
  const std::vector<int> one = {1};
  t = ParseCpuTimes(stat, one, 100);  // cpu1, not cpu10
  ASSERT_TRUE(t);
  EXPECT_DOUBLE_EQ(t->steal_s, 0.25);
  const std::vector<int> missing = {2};
  EXPECT_FALSE(ParseCpuTimes(stat, missing, 100));
  EXPECT_FALSE(ParseCpuTimes("cpu0 1 2 3 4 5 6 7\n", std::vector<int>{0}, 100));  // no steal
  // This machine's own file reads, stamped.
  const auto here = ReadCpuTimes(std::vector<int>{0});
  ASSERT_TRUE(here) << here.error().message;
  EXPECT_GT(here->at_s, 0);
}

// Shares of the CPUs' time between the reads: steal, and what was neither idle, stolen nor the
// run's own threads' (never below 0: the kernel counts in whole ticks).
TEST(MachineShares, OthersAreTheTimeNeitherIdleStolenNorTheRunsOwn) {
  // 0.2 s on 2 CPUs (0.4 CPU-s): 0.15 idle, 0.02 stolen, the run's own 0.13: others 0.1.
  const CpuTimes a{10.0, 1.0, 100.0}, b{10.15, 1.02, 100.2};
  const auto m = MachineOf(a, b, /*own_cpu_s=*/0.13, 2);
  ASSERT_TRUE(m);
  EXPECT_NEAR(m->steal_share, 0.02 / 0.4, 1e-12);
  EXPECT_NEAR(m->others_share, 0.1 / 0.4, 1e-12);
  EXPECT_EQ(m->cpus, 2u);
  EXPECT_DOUBLE_EQ(MachineOf(a, b, 0.35, 2)->others_share, 0);
  EXPECT_FALSE(MachineOf(a, a, 0.2, 2));  // no time between the reads
  EXPECT_FALSE(MachineOf(a, b, 0.2, 0));  // no CPU read
}

}  // namespace
}  // namespace txbatch
