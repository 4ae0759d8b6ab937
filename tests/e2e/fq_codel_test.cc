// --qdisc fq_codel end to end: what it drops after queueing (CoDel's head drops, its overflow
// batches) is in the books and is exactly what the receiver finds missing; and the bufferbloat
// experiment's shape (--probe beside a TCP load, pfifo_fast against fq_codel, BQL off and on).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "tests/e2e/run_helper.h"

namespace txbatch::test {
namespace {

using nlohmann::json;

// Two datagram producers of full frames offer far more than e1000's 1 Gb/s (81 kframes/s of
// 1514 bytes; a producer builds and enqueues one in a few microseconds), so the qdisc stays
// full: 1000 frames are 12.3 ms of wire, above the 1 ms target for longer than the 5 ms
// interval many times over in 0.3 s, so CoDel drops; and it cannot hold unresponsive flows, so
// the limit drops too.
TEST(FqCodelRun, WhatItDropsAfterQueueingIsInTheBooksAndIsWhatTheReceiverMisses) {
  const auto run = RunTxbatch(
      "run --driver emu:e1000 --qdisc 'fq_codel target 1ms interval 5ms limit 1000',pfifo_fast "
      "--proto udp --size 1472 --procs 2 --batch 32 --duration 0.3 --warmup 0.05");
  ASSERT_TRUE(WroteCells(run, 2));
  for (const auto& [rec, r, a, cell] : Cells(run)) {
    ExpectBooksClosed(rec);
    // Nothing is lost past the qdisc on an emulated wire without a link: the receiver's gaps
    // are the frames the qdisc dropped after queueing them, frame for frame.
    EXPECT_EQ(a["lost"], a["dropped_queued"]) << cell << a.dump();
    EXPECT_EQ(a["received"], a["sent"]) << cell << a.dump();
    if (rec["config"]["qdisc"] != "fq_codel") {
      EXPECT_EQ(a["dropped_queued"], 0) << cell;
      EXPECT_TRUE(r["fq_codel"].is_null()) << cell;
      EXPECT_TRUE(rec["config"]["qdisc_params"].is_null()) << cell;
      continue;
    }
    EXPECT_EQ(rec["config"]["qdisc_params"],
              "limit 1000p flows 1024 target 1ms interval 5ms memory_limit 32Mb ecn drop_batch "
              "64");
    const json& f = r["fq_codel"];
    ASSERT_TRUE(f.is_object()) << r.dump();
    EXPECT_GT(f["dropped_codel"].get<uint64_t>(), 0u) << f.dump();
    EXPECT_EQ(a["dropped_queued"].get<uint64_t>(),
              f["dropped_codel"].get<uint64_t>() + f["drop_overlimit"].get<uint64_t>())
        << f.dump();
    EXPECT_EQ(r["drops"]["codel"], f["dropped_codel"]);
    EXPECT_EQ(r["drops"]["overlimit"], f["drop_overlimit"]);
    EXPECT_EQ(f["maxpacket"], 1514);
    EXPECT_EQ(f["ecn_mark"], 0);  // txbatch's frames are not ECN-capable
  }
}

}  // namespace
}  // namespace txbatch::test

namespace txbatch::test {
namespace {

// The bufferbloat experiment (doc/experiments.md) on the simulation, where it is exact: eight TCP
// streams of MSS frames on e1000 with TCP Small Queues, and a 60-byte probe frame 1000 times a
// second. A FIFO (pfifo_fast; and the ring, where all of the backlog sits without BQL) makes
// the probe wait what the load's frames wait: its p50 is the load's within the difference of
// their own serialization (1538 - 84 bytes at 8 ns, 11.6 us; 13 us allowed). fq_codel serves
// it first (a new flow), so with BQL (linux-2025) it waits only for the bytes BQL lets into the
// ring and the frame on the wire: (bql.limit + 2 x 1538) bytes at 1 Gb/s. Without BQL
// (count:32) fq_codel holds nothing to reorder: BQL moves the queue into the qdisc, where
// fq_codel can act. The bulk's throughput is the wire's in all four.
TEST(FqCodelRun, TheProbeWaitsForBqlsBytesUnderFqCodelAndTheWholeBacklogUnderPfifoFast) {
  const auto run = RunTxbatch(
      "run --engine sim --driver emu:e1000 --proto tcp --offload none --size 65536 --procs 8 "
      "--policy count:32,linux-2025 --qdisc pfifo_fast,fq_codel --probe 1000pps --duration 0.3 "
      "--warmup 0.05");
  ASSERT_TRUE(WroteCells(run, 4));
  std::map<std::string, double> p50;  // "qdisc policy" -> the probe's p50 (ns)
  std::map<std::string, const json*> results;
  for (const auto& [rec, r, a, cell] : Cells(run)) {
    ExpectBooksClosed(rec);
    const std::string key =
        rec["config"]["qdisc"].get<std::string>() + " " + rec["config"]["policy"].get<std::string>();
    ASSERT_TRUE(r["probe"].is_object()) << key;
    EXPECT_EQ(r["probe"]["flow"], 8) << key;  // the last flow, after the 8 producers'
    EXPECT_EQ(r["probe"]["lost"], 0) << key;
    // 1000 frames a second over the 0.05 + 0.3 s the probe ran, the drain's few beside.
    EXPECT_NEAR(r["probe"]["received"].get<double>(), 350, 5) << key;
    EXPECT_GT(r["link_utilisation"].get<double>(), 0.99) << key;
    p50[key] = r["probe"]["latency_ns"]["p50"].get<double>();
    results[key] = &r;
  }
  const double fq_bql = p50.at("fq_codel linux-2025");
  const double bql_limit = (*results.at("fq_codel linux-2025"))["bql"]["limit"].get<double>();
  // Behind BQL's bytes and the frame on the wire, at 8 ns a byte (this is also far inside the
  // issue's bound, 3 x fq_codel's 5 ms target and the probe's own serialization).
  EXPECT_LT(fq_bql, (bql_limit + 2 * 1538) * 8) << "BQL limit " << bql_limit;
  for (const char* fifo : {"pfifo_fast count:32", "pfifo_fast linux-2025", "fq_codel count:32"}) {
    const double load = (*results.at(fifo))["latency_ns"]["p50"].get<double>();
    EXPECT_NEAR(p50.at(fifo), load, 13e3) << fifo;
  }
  // The shape: pfifo_fast's probe over 5 x fq_codel's (6.2 x here: ~52 frames of the
  // load ahead against BQL's ~10).
  EXPECT_GT(p50.at("pfifo_fast linux-2025"), 5 * fq_bql);
}

// --probe on the real engine: one more flow, the last, paced at its own rate beside a paced
// load, its frames counted as --per-flow counts each flow. Its pace never runs ahead: its k-th
// frame is due k intervals of 5 ms after its thread started, itself after the cell's clock
// began, and it builds frames until generation stops, at the record's stopped_at_s on that
// clock — so it builds at most stopped_at_s x 200, and one more: a pacing sleep that ends after
// the stop still sends its frame. (Not 0.05 + 0.3 s x 200: the stop comes after the window's
// snapshots, 72 frames' worth under ASan once.) How many it sends on a busy machine depends on
// when it gets a CPU (26 to 71 here with a CI run beside it): the rate itself is checked on the
// simulation (SimEngine.TheProbeIsTheLastFlowAtItsRateAndReadsBack).
TEST(FqCodelRun, TheProbeIsAFlowOfItsOwnAtItsOwnRate) {
  const auto run = RunTxbatch(
      "run --driver emu:e1000 --proto udp --size 1472 --procs 1 --rate 500mbit --probe 200pps "
      "--per-flow --batch 1 --duration 0.3 --warmup 0.05");
  ASSERT_TRUE(WroteCells(run, 1));
  const json& rec = run.doc["records"][0];
  ExpectDeliveredOnce(rec);
  const json& r = rec["results"];
  EXPECT_EQ(rec["config"]["probe"], "200pps");
  ASSERT_TRUE(r["probe"].is_object()) << r.dump();
  EXPECT_EQ(r["probe"]["flow"], 1);
  EXPECT_GT(r["probe"]["generated"].get<uint64_t>(), 0u);
  const double stopped_at_s = r["model_checks"]["stopped_at_s"].get<double>();
  EXPECT_LE(static_cast<double>(r["probe"]["generated"].get<uint64_t>()),
            std::floor(stopped_at_s * 200) + 1)
      << "stopped at " << stopped_at_s << " s";
  EXPECT_EQ(r["probe"]["received"], r["probe"]["generated"]);  // nothing lost on the way
  ASSERT_EQ(r["per_flow"].size(), 2u);
  EXPECT_EQ(r["per_flow"][1], r["probe"]);
  // The load: 500 Mbit/s of 1538-byte wire frames is 40 600 a second, far more than the probe.
  EXPECT_GT(r["per_flow"][0]["received"].get<uint64_t>(), r["probe"]["received"].get<uint64_t>());
  EXPECT_NE(run.out.find("Probe (200pps"), std::string::npos) << run.out;
}

}  // namespace
}  // namespace txbatch::test
