// The sink's latency split: stages from the timestamps frames carry (TxMeta), positions in the
// driver call, and frames whose field is not theirs left out.
#include <gtest/gtest.h>

#include <vector>

#include "dataplane/frame.h"
#include "dataplane/rx_sink.h"
#include "dataplane/tx_meta.h"
#include "tests/unit/test_eal.h"

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

}  // namespace
}  // namespace txbatch
