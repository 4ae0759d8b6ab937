// TCP Small Queues (dataplane/tsq.h): the ledger a stream producer and the completing driver
// share, and what it does to a run — on the simulation's virtual clock, where it is exact.
#include "dataplane/tsq.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "drivers/factory.h"
#include "engine/sim_engine.h"
#include "tests/unit/test_eal.h"

namespace txbatch {
namespace {

TEST(Tsq, AFlowOverItsLimitWaitsUntilAReleaseBringsItBack) {
  TsqLedger tsq(2, 3000);
  EXPECT_FALSE(tsq.Throttled(0));
  tsq.Charge(0, 2000);
  tsq.Charge(0, 2000);  // a flow with room sends its next frame whole: 4000 below now
  EXPECT_TRUE(tsq.Throttled(0));
  EXPECT_FALSE(tsq.Throttled(1));  // flows are apart
  std::atomic<bool> returned{false};
  std::thread producer([&] {
    EXPECT_TRUE(tsq.WaitForRoom(0));
    returned = true;
  });
  while (tsq.sleeps(0) < 1) std::this_thread::yield();  // asleep, over the limit
  tsq.Release(0, 500);  // 3500: still over: it wakes, looks, and sleeps again
  while (tsq.sleeps(0) < 2) std::this_thread::yield();
  EXPECT_FALSE(returned.load());
  tsq.Release(0, 500);  // 3000: at the limit, it may send
  producer.join();
  EXPECT_TRUE(returned.load());
  EXPECT_EQ(tsq.Below(0), 3000);
  EXPECT_FALSE(tsq.WaitForRoom(0));  // not throttled: no wait
}

// tcp_small_queue_check throttles when `refcount_read(&sk->sk_wmem_alloc) > limit`: a flow with
// exactly its limit below it still sends; one byte more and it waits.
TEST(Tsq, AFlowAtExactlyItsLimitIsNotThrottled) {
  TsqLedger tsq(1, 3000);
  tsq.Charge(0, 1500);
  tsq.Charge(0, 1500);
  ASSERT_EQ(tsq.Below(0), 3000);
  EXPECT_FALSE(tsq.Throttled(0)) << "3000 below against a limit of 3000 is not over it";
  EXPECT_FALSE(tsq.WaitForRoom(0));  // the producer's wait agrees: no sleep at the limit
  EXPECT_EQ(tsq.sleeps(0), 0u);
  tsq.Charge(0, 1);
  EXPECT_TRUE(tsq.Throttled(0)) << "3001 below is over the limit";
  tsq.Release(0, 1);
  EXPECT_FALSE(tsq.Throttled(0)) << "back at the limit: it may send again";
}

TEST(Tsq, AbortReleasesEveryWaitingProducer) {
  TsqLedger tsq(1, 100);
  tsq.Charge(0, 1000);
  std::thread producer([&] { tsq.WaitForRoom(0); });
  while (tsq.sleeps(0) < 1) std::this_thread::yield();
  tsq.Abort();
  producer.join();  // returns although nothing was released
  EXPECT_EQ(tsq.Below(0), 1000);
}

TEST(Tsq, TheDriverReleasesAFramesPayloadByItsFlow) {
  TsqLedger tsq(4, 1 << 20);
  FrameBuilder b(Proto::kTcp, 3);
  rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
  b.Build(m, 1448, 0);
  EXPECT_EQ(FlowOf(m), 3);
  tsq.Charge(3, 1448);
  tsq.Release(m);
  EXPECT_EQ(tsq.Below(3), 0);
  rte_pktmbuf_free(m);
}

CellConfig TcpCell(uint64_t tsq, unsigned procs, Offload offload) {
  CellConfig c;
  c.driver = "emu:e1000";
  c.driver_spec = *ParseDriverSpec(c.driver);
  c.policy = *ParsePolicySpec("count:1");
  c.proto = Proto::kTcp;
  c.size = 65536;
  c.procs = procs;
  c.offload = offload;
  c.tsq = tsq;
  c.engine = Engine::kSim;
  c.duration_s = 0.05;
  c.warmup_s = 0.05;
  return c;
}

// On the simulated e1000 (1 Gb/s, a 256-descriptor ring), one stream: without TSQ it fills its
// 1000-frame band and waits there (~12 ms of queue); with a 128 KiB limit (3.6-4.6's) it never
// reaches the qdisc's limit, waits on TSQ instead, and its frames see the ring and at most ~128
// KiB ahead of them: ~1.2 ms. The wire stays full either way. With TSO the same limit holds two
// GSO frames and a part.
TEST(Tsq, ItKeepsAStreamsQueueShortAndTheWireFull) {
  for (const Offload o : {Offload::kNone, Offload::kTso}) {
    SCOPED_TRACE(OffloadName(o));
    auto off = SimulateCell(TcpCell(0, 1, o), test::Pool());
    auto on = SimulateCell(TcpCell(131072, 1, o), test::Pool());
    ASSERT_TRUE(off.ok() && on.ok());
    EXPECT_TRUE(off->books.balanced && on->books.balanced);
    ASSERT_TRUE(off->ceiling_mpps && on->ceiling_mpps);
    EXPECT_NEAR(on->mpps, *on->ceiling_mpps, *on->ceiling_mpps * 2e-3);
    EXPECT_EQ(off->tsq_waits, 0u);
    EXPECT_GT(on->tsq_waits, 0u);
    EXPECT_EQ(on->producer_waits, 0u);  // never at the qdisc's limit
    ASSERT_TRUE(off->latency && on->latency);
    // 128 KiB of payload and a ring's worth at 1 Gb/s: ~1.1 ms + ~2.9 ms with TSO's ring.
    EXPECT_LT(on->latency->p99, 4.5e6);
    EXPECT_GT(off->latency->p50, 2 * on->latency->p99);
  }
}

// Under --qdisc none a producer's own batch is its own until it hands it over: TSQ charges it
// then. (Charged as it was built, a batch of 8 GSO frames was over a 128 KiB limit after 3, and
// the producer slept on bytes nothing would release: the drain never ended.)
TEST(Tsq, AProducersOwnBatchIsChargedWhenItGoes) {
  CellConfig c = TcpCell(131072, 1, Offload::kTso);
  c.shape.noqueue = true;
  c.policy = *ParsePolicySpec("buffer:8");
  auto r = SimulateCell(c, test::Pool());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_TRUE(r->books.balanced);
  EXPECT_GT(r->packets, 1000u);
  EXPECT_GT(r->tsq_waits, 0u);
}

// Eight streams under TSQ: each keeps its own limit, so together they hold eight times it.
TEST(Tsq, EachStreamHasItsOwnLimit) {
  auto one = SimulateCell(TcpCell(131072, 1, Offload::kTso), test::Pool());
  auto four = SimulateCell(TcpCell(131072, 4, Offload::kTso), test::Pool());
  ASSERT_TRUE(one.ok() && four.ok());
  ASSERT_TRUE(one->latency && four->latency);
  EXPECT_GT(four->latency->p50, 2 * one->latency->p50);
}

}  // namespace
}  // namespace txbatch
