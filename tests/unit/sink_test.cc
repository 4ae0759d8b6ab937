// The sink's latency split: stages from the timestamps frames carry (TxMeta), positions in the
// driver call, and frames whose field is not theirs left out.
#include <gtest/gtest.h>

#include <vector>

#include "dataplane/frame.h"
#include "dataplane/rx_sink.h"
#include "dataplane/tx_meta.h"
#include "tests/unit/test_eal.h"
#include "tools/sink_cmd.h"

namespace txbatch {
namespace {

constexpr double kHz = 1e9;  // 1 TSC = 1 ns, so the numbers below read as ns

TEST(RxSink, SplitsLatencyIntoStagesAndByPosition) {
  ASSERT_GE(TxMetaOffset(), 0) << "no room for the stage field in the mbuf";
  RunWindow window;
  window.start.store(0);
  window.end.store(kNever);
  RxSink sink(window, kHz, 1);
  FrameBuilder b(Proto::kUdp, 0);
  std::vector<rte_mbuf*> frames(4);
  std::vector<Tsc> arrival;
  for (uint16_t i = 0; i < 4; ++i) {
    frames[i] = rte_pktmbuf_alloc(test::Pool());
    ASSERT_NE(frames[i], nullptr);
    b.Build(frames[i], 100, 1000);  // stamped at 1000
    TxMeta* t = MetaOf(frames[i], TxMetaOffset());
    t->to_handover = 500 + 100 * i;  // handed to the driver at 1500 + 100 i
    t->position = i;
    t->to_wire = 2000;
    t->flags = kMetaWireKnown;
    arrival.push_back(1000 + t->to_handover + 2000 + 300);  // 300 on the wire
  }
  // A frame whose field belongs to another frame (a copying path) is left out of the stages.
  rte_mbuf* stale = rte_pktmbuf_alloc(test::Pool());
  b.Build(stale, 100, 5000);
  MetaOf(stale, TxMetaOffset())->stamp = 42;
  frames.push_back(stale);
  arrival.push_back(9000);

  sink.Receive(frames, arrival);
  EXPECT_EQ(sink.latency().Summary()->count, 5u);
  ASSERT_TRUE(sink.before_driver().Summary());
  EXPECT_EQ(sink.before_driver().Summary()->count, 4u);
  EXPECT_EQ(sink.before_driver().Summary()->min, 500);
  EXPECT_EQ(sink.before_driver().Summary()->max, 800);
  EXPECT_EQ(sink.driver_ring().Summary()->min, 2000);
  EXPECT_EQ(sink.driver_ring().Summary()->max, 2000);
  EXPECT_EQ(sink.wire().Summary()->min, 300);
  EXPECT_EQ(sink.wire().Summary()->max, 300);
  // Positions 0, 1, 2-3 (two frames).
  EXPECT_EQ(sink.by_position()[0].Summary()->count, 1u);
  EXPECT_EQ(sink.by_position()[1].Summary()->count, 1u);
  EXPECT_EQ(sink.by_position()[2].Summary()->count, 2u);
  EXPECT_EQ(sink.by_position()[0].Summary()->min, 500 + 2000 + 300);
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

TEST(RxSink, WithoutAModelledWireTheDriverStageRunsToReceive) {
  RunWindow window;
  window.start.store(0);
  window.end.store(kNever);
  RxSink sink(window, kHz, 1);
  FrameBuilder b(Proto::kUdp, 0);
  rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
  ASSERT_NE(m, nullptr);
  b.Build(m, 100, 1000);
  MetaOf(m, TxMetaOffset())->to_handover = 10;
  const Tsc at = 1000 + 10 + 777;
  sink.Receive({&m, 1}, {&at, 1});
  EXPECT_EQ(sink.driver_ring().Summary()->min, 777);
  EXPECT_FALSE(sink.wire().Summary());
}

// Per flow (issue 20, item 7): each flow's gaps, refills, repeats and latency are its own, add up
// to the totals, and survive Absorb (a cell's queues, each with its own flows, into one).
TEST(RxSink, CountsEachFlowApartAndTheFlowsAddUpToTheTotals) {
  RunWindow window;
  window.start.store(0);
  window.end.store(kNever);
  RxSink sink(window, kHz, 4, 0, false, true, /*flow_latency=*/true);
  RxSink other(window, kHz, 4, 0, false, true, /*flow_latency=*/true);
  // Flow 0: 0 1 2 3 in order. Flow 1: 0 2 (1 lost), then 4 3 (3 reordered after 4), 4 again
  // (duplicated). Flow 2: 0 1 on the other queue. Flow 3: nothing.
  std::vector<std::vector<rte_mbuf*>> by_flow(3);
  for (uint16_t f = 0; f < 3; ++f) {
    FrameBuilder b(Proto::kUdp, f);
    for (int i = 0; i < 5; ++i) {
      rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
      ASSERT_NE(m, nullptr);
      b.Build(m, 100, 1000);  // stamped at 1000, sequence i
      by_flow[f].push_back(m);
    }
  }
  rte_mbuf* dup = rte_pktmbuf_copy(by_flow[1][4], test::Pool(), 0, UINT32_MAX);
  ASSERT_NE(dup, nullptr);
  std::vector<rte_mbuf*> frames = {by_flow[0][0], by_flow[1][0], by_flow[0][1],
                                   by_flow[1][2], by_flow[0][2], by_flow[1][4],
                                   by_flow[1][3], by_flow[0][3], dup};
  for (rte_mbuf* unsent :
       {by_flow[0][4], by_flow[1][1], by_flow[2][2], by_flow[2][3], by_flow[2][4]})
    rte_pktmbuf_free(unsent);  // never arrive
  std::vector<Tsc> arrival;
  for (size_t i = 0; i < frames.size(); ++i) arrival.push_back(2000 + 1000 * i);
  sink.Receive(frames, arrival);
  std::vector<rte_mbuf*> elsewhere = {by_flow[2][0], by_flow[2][1]};
  std::vector<Tsc> at = {30000, 31000};
  other.Receive(elsewhere, at);
  sink.Absorb(other);

  const std::vector<FlowCounts> f = sink.flow_counts();
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0].received, 4u);
  EXPECT_EQ(f[0].lost, 0u);
  EXPECT_EQ(f[1].received, 5u);
  EXPECT_EQ(f[1].lost, 1u);
  EXPECT_EQ(f[1].reordered, 1u);
  EXPECT_EQ(f[1].duplicated, 1u);
  EXPECT_EQ(f[2].received, 2u);
  EXPECT_EQ(f[3].received, 0u);
  const SinkCounts c = sink.counts();
  EXPECT_EQ(c.received, f[0].received + f[1].received + f[2].received);
  EXPECT_EQ(c.lost, f[1].lost);
  EXPECT_EQ(c.reordered, f[1].reordered);
  EXPECT_EQ(c.duplicated, f[1].duplicated);
  // Latency (stamped at 1000): flow 0 arrived at 2000, 4000, 6000, 9000.
  ASSERT_TRUE(sink.flow_latency(0));
  EXPECT_EQ(sink.flow_latency(0)->count, 4u);
  EXPECT_EQ(sink.flow_latency(0)->min, 1000);
  EXPECT_EQ(sink.flow_latency(0)->max, 8000);
  EXPECT_EQ(sink.flow_latency(1)->count, 5u);
  ASSERT_TRUE(sink.flow_latency(2));  // through Absorb
  EXPECT_EQ(sink.flow_latency(2)->min, 29000);
  EXPECT_FALSE(sink.flow_latency(3));
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

// Issue 44, item 21: one stray or forged txbatch frame claiming sequence 2^48 - 1 added 2^48 - 1
// frames to `lost`. A sequence more than kMaxSeqJump (2^32) past its flow's expected is counted
// foreign (out_of_sequence) and changes nothing else; a jump of exactly kMaxSeqJump is still a
// loss of that many (the bound itself).
TEST(RxSink, AFrameFarAheadOfItsFlowIsForeignNotAHugeLoss) {
  RunWindow window;
  window.start.store(0);
  window.end.store(kNever);
  RxSink sink(window, kHz, 2, 0, false, true);
  const auto one = [&](uint16_t flow, uint64_t seq) {
    FrameBuilder b(Proto::kUdp, flow, true, seq);
    rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
    EXPECT_NE(m, nullptr);
    b.Build(m, 100, 1000);
    return m;
  };
  std::vector<rte_mbuf*> frames = {one(0, 0), one(0, (uint64_t{1} << 48) - 1), one(0, 1),
                                   one(1, kMaxSeqJump)};
  const std::vector<Tsc> arrival = {2000, 3000, 4000, 5000};
  sink.Receive(frames, arrival);
  const SinkCounts c = sink.counts();
  EXPECT_EQ(c.received, 3u);
  EXPECT_EQ(c.foreign, 1u);
  EXPECT_EQ(c.foreign_by_status[static_cast<size_t>(ParseStatus::kOutOfSequence)], 1u);
  EXPECT_EQ(c.lost, kMaxSeqJump);  // flow 1's first frame came kMaxSeqJump late: that many lost
  EXPECT_EQ(sink.flow_counts()[0].lost, 0u);  // flow 0 went on 0, 1 as if nothing came between
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

// Issue 44 item 15: a frame stamped kNoTxStamp (0: its --no-timing sender read no clock) has no
// latency — measured from 0 it was the receiver's uptime, 126 111 s on the machine that showed
// it — so it is counted as unstamped and left out, of the flow's latency too; a stamped frame
// beside it is measured as before (stamped at 1000, arriving 500 later: 500 ns at 1 TSC = 1 ns).
TEST(RxSink, FramesWithoutATxStampAreCountedAndLeftOutOfLatency) {
  RunWindow window;
  window.start.store(0);
  window.end.store(kNever);
  constexpr Tsc kUptime = 126'111'000'000'000;  // the report's 126 111 s, in TSC (1 GHz)
  const auto receive = [&](RxSink& sink, std::vector<Tsc> stamps) {
    FrameBuilder b(Proto::kUdp, 0);
    std::vector<rte_mbuf*> frames;
    std::vector<Tsc> arrival;
    for (const Tsc stamp : stamps) {
      frames.push_back(rte_pktmbuf_alloc(test::Pool()));
      ASSERT_NE(frames.back(), nullptr);
      b.Build(frames.back(), 100, stamp);
      arrival.push_back(stamp == kNoTxStamp ? kUptime : stamp + 500);
    }
    sink.Receive(frames, arrival);
  };
  RxSink mixed(window, kHz, 1, 0, false, true, /*flow_latency=*/true);
  receive(mixed, {kNoTxStamp, 1000, kNoTxStamp, kNoTxStamp});
  EXPECT_EQ(mixed.counts().received, 4u);
  EXPECT_EQ(mixed.counts().unstamped, 3u);
  ASSERT_TRUE(mixed.latency().Summary());
  EXPECT_EQ(mixed.latency().Summary()->count, 1u);
  EXPECT_EQ(mixed.latency().Summary()->max, 500);
  ASSERT_TRUE(mixed.flow_latency(0));
  EXPECT_EQ(mixed.flow_latency(0)->max, 500);
  // None stamped: no latency at all, and the sink says why in one sentence.
  RxSink none(window, kHz, 1, 0, false, true, /*flow_latency=*/true);
  receive(none, {kNoTxStamp, kNoTxStamp});
  EXPECT_FALSE(none.latency().Summary());
  EXPECT_FALSE(none.flow_latency(0));
  EXPECT_EQ(none.counts().unstamped, 2u);
  const std::string why = SinkLatencyWhyNone(/*clocks_synchronised=*/true, none.counts());
  EXPECT_NE(why.find("none of the 2 frames carried a TX stamp"), std::string::npos) << why;
  EXPECT_NE(why.find("--no-timing"), std::string::npos) << why;
  EXPECT_EQ(SinkLatencyWhyNone(true, mixed.counts()), "");
  EXPECT_NE(SinkLatencyWhyNone(false, mixed.counts()).find("--clocks-synchronised"),
            std::string::npos);
  EXPECT_EQ(SinkLatencyWhyNone(true, SinkCounts{}), "no txbatch frame arrived");
  SinkOutcome o;
  o.counts = none.counts();
  o.latency_why = why;
  const nlohmann::json rec = SinkRecord("net_null0", 1, std::nullopt, o);
  EXPECT_TRUE(rec["results"]["latency_ns"].is_null());
  EXPECT_EQ(rec["results"]["latency_why"], why);
  EXPECT_EQ(rec["results"]["unstamped"], 2);
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

}  // namespace
}  // namespace txbatch
