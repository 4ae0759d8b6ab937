// --link end to end on the emulated e1000: netem's impairments behind the wire, and the books
// that close with them — the link's own count of frames lost equals the receiver's sequence
// gaps, every corrupted frame is rejected at the receiver, reordered frames are not lost.
#include <gtest/gtest.h>

#include <string>

#include "tests/driver/run_helper.h"

namespace txbatch::test {
namespace {

using nlohmann::json;

// The impaired link's run, made once for the tests that read it.
const TxbatchRun& ImpairedRun() {
  static const TxbatchRun run = RunTxbatch(
      "run --driver emu:e1000 --proto udp --size 1000 --procs 1,8 --batch 32 --duration 0.3 "
      "--warmup 0.05 --link \"delay 2ms 500us 25% distribution normal loss random 2% duplicate "
      "1% reorder 5% gap 10 corrupt 0.5% seed 7 limit 100000\"");
  return run;
}

TEST(Link, ImpairmentsAreCountedAndTheBooksClose) {
  const TxbatchRun& run = ImpairedRun();
  ASSERT_EQ(run.status, 0) << run.err;
  ASSERT_EQ(run.doc["records"].size(), 2u);
  for (const json& rec : run.doc["records"]) {
    const json& r = rec["results"];
    const json& a = r["accounting"];
    const json& l = r["link"];
    const std::string cell = rec["config"].dump();
    EXPECT_NE(rec["config"]["link"].get<std::string>().find("distribution normal"),
              std::string::npos);
    EXPECT_TRUE(a["balanced"].get<bool>()) << cell << a.dump() << l.dump();
    EXPECT_EQ(a["link_lost"], a["lost"]) << l.dump();  // the link's count = the receiver's gaps
    EXPECT_GT(l["lost"].get<uint64_t>(), 0u);
    EXPECT_GT(l["duplicated"].get<uint64_t>(), 0u);
    EXPECT_GT(l["corrupted"].get<uint64_t>(), 0u);
    EXPECT_EQ(l["receiver_corrupt"], l["corrupted"]);  // every corrupted frame rejected
    EXPECT_GT(l["reordered"].get<uint64_t>(), 0u);
    EXPECT_GT(l["receiver_reordered"].get<uint64_t>(), 0u);  // late, not lost
    EXPECT_EQ(l["dropped_limit"], 0);
    EXPECT_EQ(r["mbufs_in_use_at_exit"], 0);
  }
}

// The link's delay shows in latency (2 ms +- 0.5 ms normal jitter, plus the queue before). A
// test of its own (issue 44, item 7: it was an `if` ThreadSanitizer's build skipped silently):
// under TSan the 8-producer cell has left the window without a departure (CI on 94fc5b6; 5 of
// ~50 runs here, 2026-12-02; no race reported), so scripts/tsan.sh runs the books above
// (Link.Impairments*), not this.
TEST(Link, TheDelayShowsInLatency) {
  const TxbatchRun& run = ImpairedRun();
  ASSERT_EQ(run.status, 0) << run.err;
  for (const json& rec : run.doc["records"]) {
    const json& r = rec["results"];
    ASSERT_TRUE(r["latency_ns"].is_object())
        << "no frame arrived in the window: " << rec["config"].dump();
    EXPECT_GT(r["latency_ns"]["p50"].get<double>(), 1.5e6);
  }
}

// Issue 16 (item 6): a delay longer than the drain's 5-s slack was reported as a wedged drain
// ("this is a txbatch bug", exit 1, nothing written). The drain waits for what the link holds,
// says so, and the books close.
TEST(Link, TheDrainWaitsForALongDelayAndSaysSo) {
  const auto run = RunTxbatch(
      "run --driver emu:ixgbe --proto udp --size 64 --procs 1 --batch 32 --rate 20kpps "
      "--duration 0.05 --warmup 0.01 --link \"delay 5500ms\"");
  ASSERT_EQ(run.status, 0) << run.err;
  EXPECT_NE(run.err.find("the drain waits up to"), std::string::npos) << run.err;
  ASSERT_EQ(run.doc["records"].size(), 1u);
  const json& rec = run.doc["records"][0];
  ExpectBooksClosed(rec);
  EXPECT_GT(rec["results"]["accounting"]["received"].get<uint64_t>(), 0u);
}

TEST(Link, BadWordsAndPortsAreOneSentence) {
  // A link that would hold frames for hours after the window (1 bit/s behind a queue of 1000
  // frames) is refused up front rather than drained for hours.
  for (const char* args : {"run --link \"slot 1ms\"", "run --link \"loss 150%\"",
                           "run --driver ethdev:net_null0 --link \"delay 1ms\"",
                           "run --link \"rate 1bit\"", "run --link \"delay 3600s rate 3kbit\""}) {
    const auto run = RunTxbatch(args);
    EXPECT_EQ(run.status, 2) << args << ": " << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << args << ": " << run.err;
    EXPECT_NE(run.err.find("--link"), std::string::npos) << run.err;
    EXPECT_TRUE(run.out.empty());
  }
}

}  // namespace
}  // namespace txbatch::test
