// --link end to end on the emulated e1000: netem's impairments behind the wire, and the books
// that close with them — the link's own count of frames lost equals the receiver's sequence
// gaps, every corrupted frame is rejected at the receiver, reordered frames are not lost.
#include <gtest/gtest.h>

#include <boost/math/distributions/binomial.hpp>
#include <cstdint>
#include <string>
#include <utility>

#include "tests/e2e/run_helper.h"

namespace txbatch::test {
namespace {

using nlohmann::json;

// Where a Binomial(n, p) count lies but with probability 1e-6 (5e-7 each side, rounded outwards):
// a correct link fails a check on one once in a million runs.
std::pair<double, double> BinomialBounds(uint64_t n, double p) {
  const boost::math::binomial_distribution<> dist(static_cast<double>(n), p);
  return {boost::math::quantile(dist, 5e-7),
          boost::math::quantile(boost::math::complement(dist, 5e-7))};
}

// `what` (a count) lies inside BinomialBounds(n, p).
void ExpectBinomial(const char* what, uint64_t count, uint64_t n, double p,
                    const std::string& context) {
  const auto [lo, hi] = BinomialBounds(n, p);
  EXPECT_GE(static_cast<double>(count), lo)
      << what << " " << count << " of " << n << " at p " << p << ": below " << lo << context;
  EXPECT_LE(static_cast<double>(count), hi)
      << what << " " << count << " of " << n << " at p " << p << ": above " << hi << context;
}

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
  ASSERT_TRUE(WroteCells(run, 2));
  for (const auto& [rec, r, a, cell] : Cells(run)) {
    const json& l = r["link"];
    EXPECT_NE(rec["config"]["link"].get<std::string>().find("distribution normal"),
              std::string::npos);
    EXPECT_TRUE(a["balanced"].get<bool>()) << cell << a.dump() << l.dump();
    EXPECT_EQ(a["link_lost"], a["lost"]) << l.dump();  // the link's count = the receiver's gaps
    EXPECT_EQ(l["receiver_corrupt"], l["corrupted"]);  // every corrupted frame rejected
    EXPECT_GT(l["receiver_reordered"].get<uint64_t>(), 0u);  // late, not lost
    EXPECT_EQ(l["dropped_limit"], 0);
    EXPECT_EQ(l["dup_failed"], 0);
    // Each impairment's count against its rate (dataplane/link_model.cc's Enqueue), from the
    // frames offered: each draws duplicate (D, 1 %) then loss (L, 2 %), independently.
    //  * lost: L without D (0.99 x 0.02), or D without L and then the copy's own loss draw
    //    (0.01 x 0.98 x 0.02); never both: lost ~ Binomial(offered, 0.019996).
    //  * duplicated: D without L: Binomial(offered, 0.01 x 0.98).
    //  * corrupted (0.5 %) is drawn by every frame that got in: the originals and copies not
    //    lost, m = offered + duplicated - lost: Binomial(m, 0.005).
    //  * reordered (5 % gap 10): after each reordered frame (and at the start) 9 frames go in
    //    order undrawn, then each frame draws until one is reordered: the draws are the m frames
    //    less 9 per reordered one (and at most 9 more), so reordered ~ Binomial(m - 9 x reordered
    //    (within 9), 0.05). Half-rate or doubled impairments all land far outside.
    const uint64_t offered = l["offered"].get<uint64_t>(), lost = l["lost"].get<uint64_t>(),
                   duplicated = l["duplicated"].get<uint64_t>(),
                   reordered = l["reordered"].get<uint64_t>();
    ASSERT_GT(offered, 1000u) << cell << l.dump();  // ~40 000 here; enough for the bounds to bite
    const uint64_t m = offered + duplicated - lost;
    ExpectBinomial("lost", lost, offered, 0.99 * 0.02 + 0.01 * 0.98 * 0.02, cell + l.dump());
    ExpectBinomial("duplicated", duplicated, offered, 0.01 * 0.98, cell + l.dump());
    ExpectBinomial("corrupted", l["corrupted"].get<uint64_t>(), m, 0.005, cell + l.dump());
    ExpectBinomial("reordered", reordered, m - 9 * reordered, 0.05, cell + l.dump());
    EXPECT_EQ(r["mbufs_in_use_at_exit"], 0);
  }
}

// The link's delay shows in latency (2 ms +- 0.5 ms normal jitter, plus the queue before).
//  * The wire stage (first bit out to arrival: the frame time and the link's delay) has the
//    delay's median, 2 ms (netem's normal table is symmetric; 25 % correlation keeps the
//    marginal): its sample median over ~30 000 frames has a standard error of ~4 us (1.25 x
//    0.5 ms / sqrt(30 000), x1.3 for the correlation); seen ~18 us under (the table's own
//    median). Within 0.1 ms of 2 ms, plus the frame time.
//  * Every frame's latency is at least its delay: p50 above 1.9 ms too. At most: the table's
//    reach, 2 ms + 0.5 ms x 32767 / 8192 = 4 ms, after a full qdisc (txqueuelen 1000) and a full
//    ring (256) at the wire's frame time (1 / its ceiling, ~8.5 us): ~14.7 ms, where the
//    producers keep the band full (p50 ~11.5 ms here); only a frame held between its stamp and
//    its enqueue (a producer preempted) goes over, never half of them.
// A
// test of its own (issue 44, item 7: it was an `if` ThreadSanitizer's build skipped silently):
// under TSan the 8-producer cell has left the window without a departure (CI on 94fc5b6; 5 of
// ~50 runs here, 2026-12-02; no race reported), so scripts/tsan.sh runs the books above
// (Link.Impairments*), not this.
TEST(Link, TheDelayShowsInLatency) {
  const TxbatchRun& run = ImpairedRun();
  ASSERT_EQ(run.status, 0) << run.err;
  for (const auto& [rec, r, a, cell] : Cells(run)) {
    ASSERT_TRUE(r["latency_ns"].is_object())
        << "no frame arrived in the window: " << rec["config"].dump();
    const double frame_ns = 1e3 / r["link_ceiling"]["mpps"].get<double>();
    ASSERT_TRUE(r["latency_stages_ns"]["wire"].is_object()) << r["latency_stages_ns"].dump();
    const double wire_p50 = r["latency_stages_ns"]["wire"]["p50"].get<double>();
    EXPECT_GT(wire_p50, 1.9e6) << rec["config"].dump();
    EXPECT_LT(wire_p50, 2.1e6 + frame_ns) << rec["config"].dump();
    const double p50 = r["latency_ns"]["p50"].get<double>();
    EXPECT_GT(p50, 1.9e6) << rec["config"].dump();
    EXPECT_LT(p50, 4e6 + (rec["config"]["txqueuelen"].get<double>() + 256) * frame_ns)
        << "frame time " << frame_ns << " ns; " << rec["config"].dump();
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
