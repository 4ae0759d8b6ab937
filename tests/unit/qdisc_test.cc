#include "dataplane/qdisc.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/unit/test_eal.h"

namespace txbatch {
namespace {

std::vector<rte_mbuf*> Alloc(unsigned n) {
  std::vector<rte_mbuf*> v(n);
  EXPECT_EQ(rte_pktmbuf_alloc_bulk(test::Pool(), v.data(), n), 0);
  for (auto* m : v) m->pkt_len = m->data_len = 60;
  return v;
}

std::vector<rte_mbuf*> DequeueAll(PfifoFast& q, uint16_t per_batch = kMaxBatch) {
  std::vector<rte_mbuf*> out;
  Batch b;
  while (!q.empty()) {
    b.Clear();
    q.DequeueBulk(b, per_batch);
    out.insert(out.end(), b.frames().begin(), b.frames().end());
  }
  return out;
}

TEST(PfifoFast, ServesBandsInStrictPriorityFifoWithin) {
  PfifoFast q(10);
  auto f = Alloc(6);
  ASSERT_TRUE(q.Enqueue(f[0], 2));
  ASSERT_TRUE(q.Enqueue(f[1], 1));
  ASSERT_TRUE(q.Enqueue(f[2], 0));
  ASSERT_TRUE(q.Enqueue(f[3], 1));
  ASSERT_TRUE(q.Enqueue(f[4], 2));
  ASSERT_TRUE(q.Enqueue(f[5], 0));
  EXPECT_EQ(q.backlog(), 6u);
  const auto out = DequeueAll(q);
  EXPECT_EQ(out, (std::vector<rte_mbuf*>{f[2], f[5], f[1], f[3], f[0], f[4]}));
  rte_pktmbuf_free_bulk(f.data(), 6);
}

TEST(PfifoFast, Prio2BandMatchesLinux) {
  EXPECT_EQ(BandForPriority(0), 1);  // TC_PRIO_BESTEFFORT
  EXPECT_EQ(BandForPriority(2), 2);  // TC_PRIO_BULK
  EXPECT_EQ(BandForPriority(6), 0);  // TC_PRIO_INTERACTIVE
  EXPECT_EQ(BandForPriority(7), 0);  // TC_PRIO_CONTROL
}

TEST(PfifoFast, DropsTailAtTheLimitPerBand) {
  PfifoFast q(3);
  auto f = Alloc(5);
  EXPECT_TRUE(q.Enqueue(f[0], 1));
  EXPECT_TRUE(q.Enqueue(f[1], 1));
  EXPECT_TRUE(q.Enqueue(f[2], 1));
  EXPECT_TRUE(q.band_full(1));
  EXPECT_FALSE(q.Enqueue(f[3], 1));  // the caller keeps it
  EXPECT_TRUE(q.Enqueue(f[4], 0));   // another band still has room
  EXPECT_EQ(q.backlog(), 4u);
  EXPECT_EQ(q.Purge(), 4u);
  rte_pktmbuf_free(f[3]);
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

TEST(PfifoFast, BulkDequeueTakesOnlyWhatIsQueuedUpToTheBudget) {
  PfifoFast q(100);
  auto f = Alloc(5);
  for (auto* m : f) ASSERT_TRUE(q.Enqueue(m, 1));
  Batch b;
  EXPECT_EQ(q.DequeueBulk(b, 3), 3);
  EXPECT_EQ(q.DequeueBulk(b, 32), 2);  // never waits for more
  EXPECT_EQ(b.size(), 5);
  EXPECT_EQ(q.DequeueBulk(b, 32), 0);
  rte_pktmbuf_free_bulk(f.data(), 5);
}

TEST(PfifoFast, RequeuedFramesComeBackFirstInTheirOrder) {
  PfifoFast q(100);
  auto f = Alloc(6);
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(q.Enqueue(f[i], 1));
  Batch b;
  ASSERT_EQ(q.DequeueBulk(b, 3), 3);  // f0 f1 f2 handed to a driver that accepts one
  b.ConsumeFront(1);
  q.Requeue(b.frames());            // f1 f2 back at the head
  ASSERT_TRUE(q.Enqueue(f[4], 0));  // even a higher band waits behind requeued frames
  EXPECT_EQ(q.requeued(), 2u);
  EXPECT_EQ(q.backlog(), 4u);
  const auto out = DequeueAll(q, 2);
  EXPECT_EQ(out, (std::vector<rte_mbuf*>{f[1], f[2], f[4], f[3]}));
  rte_pktmbuf_free_bulk(f.data(), 5);
  rte_pktmbuf_free(f[5]);
}

TEST(PfifoFast, RequeueIsNotCountedAgainstTheLimit) {
  PfifoFast q(2);
  auto f = Alloc(3);
  ASSERT_TRUE(q.Enqueue(f[0], 1));
  Batch b;
  q.DequeueBulk(b, 1);
  ASSERT_TRUE(q.Enqueue(f[1], 1));
  ASSERT_TRUE(q.Enqueue(f[2], 1));
  q.Requeue(b.frames());
  EXPECT_EQ(q.backlog(), 3u);
  EXPECT_EQ(DequeueAll(q), (std::vector<rte_mbuf*>{f[0], f[1], f[2]}));
  rte_pktmbuf_free_bulk(f.data(), 3);
}

}  // namespace
}  // namespace txbatch
