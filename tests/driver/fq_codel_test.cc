// --qdisc fq_codel end to end on the emulated e1000: what it drops after queueing (CoDel's head
// drops, its overflow batches) is in the books, and is exactly what the receiver finds missing.
#include <gtest/gtest.h>

#include <string>

#include "tests/driver/run_helper.h"

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
  ASSERT_EQ(run.status, 0) << run.err << run.out;
  ASSERT_EQ(run.doc["records"].size(), 2u);
  for (const json& rec : run.doc["records"]) {
    const json& r = rec["results"];
    const json& a = r["accounting"];
    const std::string cell = rec["config"].dump();
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
