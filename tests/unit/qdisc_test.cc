#include "dataplane/qdisc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <span>
#include <thread>
#include <vector>

#include "dataplane/lockfree_pfifo.h"
#include "tests/unit/test_eal.h"

namespace txbatch {
namespace {

std::vector<rte_mbuf*> Alloc(unsigned n) {
  std::vector<rte_mbuf*> v(n);
  EXPECT_EQ(rte_pktmbuf_alloc_bulk(test::Pool(), v.data(), n), 0);
  for (auto* m : v) m->pkt_len = m->data_len = 60;
  return v;
}

// Whether `q` took every one of `frames` on `band`.
template <class Q>
bool EnqueueAll(Q& q, std::span<rte_mbuf* const> frames, int band = 1) {
  for (rte_mbuf* m : frames)
    if (!q.Enqueue(m, band)) return false;
  return true;
}

// `frames` into `q` on band 1, then `n` of them dequeued into `b`, as handed to a driver: whether
// `q` took them all and gave back `n`.
template <class Q>
bool EnqueueThenHand(Q& q, std::span<rte_mbuf* const> frames, uint16_t n, Batch& b) {
  return EnqueueAll(q, frames) && q.DequeueBulk(b, n) == n;
}

template <class Q>
std::vector<rte_mbuf*> DequeueAll(Q& q, uint16_t per_batch = kMaxBatch) {
  std::vector<rte_mbuf*> out;
  Batch b;
  while (!q.empty()) {
    b.Clear();
    q.DequeueBulk(b, per_batch);
    out.insert(out.end(), b.frames().begin(), b.frames().end());
  }
  return out;
}

// Both synchronisations of pfifo_fast (root lock, lock-free bands) obey the same contract.
template <class Q>
class Pfifo : public ::testing::Test {};
using Qdiscs = ::testing::Types<PfifoFast, LockfreePfifo>;
TYPED_TEST_SUITE(Pfifo, Qdiscs);

TYPED_TEST(Pfifo, ServesBandsInStrictPriorityFifoWithin) {
  TypeParam q(10);
  auto f = Alloc(6);
  const int bands[] = {2, 1, 0, 1, 2, 0};
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(q.Enqueue(f[i], bands[i]));
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

// 4.16 on, the lock-free pfifo_fast: a ring of tx_queue_len per band (pfifo_fast_init's
// skb_array_init per band; the enqueue fails only when its band's ring is full).
template <class Q>
void ExpectEachBandBounded(Q& q) {
  auto f = Alloc(5);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(q.Enqueue(f[i], 1));
  EXPECT_TRUE(q.band_full(1));
  EXPECT_FALSE(q.Enqueue(f[3], 1));  // the caller keeps it
  EXPECT_TRUE(q.Enqueue(f[4], 0));   // another band still has room
  EXPECT_EQ(q.backlog(), 4u);
  EXPECT_EQ(q.Purge(), 4u);
  rte_pktmbuf_free(f[3]);
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

TEST(LockfreePfifo, DropsTailAtTheLimitPerBand) {
  LockfreePfifo q(3);
  ExpectEachBandBounded(q);
}

// A band is a ring as the kernel's ptr_ring: a band at its limit has room for exactly what a
// bulk dequeue took once it returns (its taken slots emptied by then, in batches of 16 inside
// it), and order holds across the ring's wrap — at a limit that is not a multiple of the batch
// (the last batch before the wrap is shorter) and one under 32 (a batch of one).
TEST(LockfreePfifo, ABandAtItsLimitHasRoomForWhatEachDequeueTook) {
  for (const unsigned limit : {64u, 50u, 20u}) {
    LockfreePfifo q(limit);
    std::vector<rte_mbuf*> in, out;
    const auto fill = [&] {
      while (true) {
        rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
        ASSERT_NE(m, nullptr);
        if (!q.Enqueue(m, 1)) {
          rte_pktmbuf_free(m);
          return;
        }
        in.push_back(m);
      }
    };
    fill();
    EXPECT_EQ(q.backlog(), limit);
    for (const uint16_t k : {15, 1, 16, 40, 3, 33}) {
      Batch b;
      const uint16_t n = q.DequeueBulk(b, std::min<uint16_t>(k, static_cast<uint16_t>(limit)));
      out.insert(out.end(), b.frames().begin(), b.frames().end());
      rte_pktmbuf_free_bulk(b.frames().data(), n);
      const size_t before = in.size();
      fill();
      EXPECT_EQ(in.size() - before, n) << "limit " << limit << " after taking " << k;
      EXPECT_TRUE(q.band_full(1));
    }
    for (rte_mbuf* m : DequeueAll(q)) out.push_back(m);
    EXPECT_EQ(out, in) << limit;
    EXPECT_TRUE(q.empty());
    for (size_t i = out.size() - limit; i < out.size(); ++i) rte_pktmbuf_free(out[i]);
    EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
  }
}

TEST(PfifoFast, BoundsEachBandWhereAskedAsTheLockfreeOne) {
  PfifoFast q(3, kPfifoBands, QdiscLimit::kPerBand);
  ExpectEachBandBounded(q);
}

// Before 4.16, pfifo_fast_enqueue checks the qdisc's length, every band together
// (`skb_queue_len(&qdisc->q) < qdisc_dev(qdisc)->tx_queue_len`, 3.18): a band with room is
// refused once the others hold the limit.
TEST(PfifoFast, DropsTailAtTheLimitOfAllBandsTogether) {
  PfifoFast q(3);
  auto f = Alloc(4);
  EXPECT_TRUE(q.Enqueue(f[0], 1));
  EXPECT_TRUE(q.Enqueue(f[1], 1));
  EXPECT_TRUE(q.Enqueue(f[2], 0));
  EXPECT_TRUE(q.band_full(2)) << "an empty band, full with the qdisc";
  EXPECT_FALSE(q.Enqueue(f[3], 2));
  EXPECT_EQ(q.Purge(), 3u);
  rte_pktmbuf_free(f[3]);
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

TYPED_TEST(Pfifo, BulkDequeueTakesOnlyWhatIsQueuedUpToTheBudget) {
  TypeParam q(100);
  auto f = Alloc(5);
  ASSERT_TRUE(EnqueueAll(q, f));
  Batch b;
  EXPECT_EQ(q.DequeueBulk(b, 3), 3);
  EXPECT_EQ(q.DequeueBulk(b, 32), 2);  // never waits for more
  EXPECT_EQ(b.size(), 5);
  EXPECT_EQ(q.DequeueBulk(b, 32), 0);
  rte_pktmbuf_free_bulk(f.data(), 5);
}

TYPED_TEST(Pfifo, RequeuedFramesComeBackFirstInTheirOrder) {
  TypeParam q(100);
  auto f = Alloc(6);
  Batch b;  // f0 f1 f2 handed to a driver that accepts one
  ASSERT_TRUE(EnqueueThenHand(q, std::span(f).first(4), 3, b));
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

// Requeued frames on the lock-free qdisc wait in q->gso_skb, outside the bands' rings: they
// take no band's room.
TEST(LockfreePfifo, RequeueIsNotCountedAgainstTheLimit) {
  LockfreePfifo q(2);
  auto f = Alloc(3);
  ASSERT_TRUE(q.Enqueue(f[0], 1));
  Batch b;
  q.DequeueBulk(b, 1);
  ASSERT_TRUE(EnqueueAll(q, std::span(f).subspan(1)));
  q.Requeue(b.frames());
  EXPECT_EQ(q.backlog(), 3u);
  EXPECT_EQ(DequeueAll(q), (std::vector<rte_mbuf*>{f[0], f[1], f[2]}));
  rte_pktmbuf_free_bulk(f.data(), 3);
}

// On a root-locked qdisc they are still part of its length (dev_requeue_skb: "it's still part
// of the queue", q->q.qlen++): one each (4.x on), or one for the whole list 3.18 kept in
// q->gso_skb.
TEST(PfifoFast, RequeuedFramesCountTowardsTheLengthOneEachOrOneForAList) {
  PfifoFast q(4);
  auto f = Alloc(6);
  Batch b;
  ASSERT_TRUE(EnqueueThenHand(q, std::span(f).first(3), 3, b));
  ASSERT_TRUE(q.Enqueue(f[3], 1));
  q.Requeue(b.frames());  // one each: 3 + 1 = the limit
  EXPECT_EQ(q.length(), 4u);
  EXPECT_TRUE(q.band_full(1));
  EXPECT_FALSE(q.Enqueue(f[4], 1));
  b.Clear();
  ASSERT_EQ(q.DequeueBulk(b, 3), 3);
  q.Requeue(b.frames(), /*as_list=*/true);  // 3.18: the list is one entry
  EXPECT_EQ(q.length(), 2u);
  EXPECT_EQ(q.backlog(), 4u);
  EXPECT_TRUE(q.Enqueue(f[4], 1));
  EXPECT_TRUE(q.Enqueue(f[5], 1));
  EXPECT_TRUE(q.band_full(1));
  EXPECT_EQ(DequeueAll(q), (std::vector<rte_mbuf*>{f[0], f[1], f[2], f[3], f[4], f[5]}));
  rte_pktmbuf_free_bulk(f.data(), 6);
}

// A frame's test tag, shared between a producer and the consumer.
std::atomic_ref<uint64_t> Tag(rte_mbuf* m) { return std::atomic_ref<uint64_t>(m->tx_offload); }

TEST(LockfreePfifo, ConcurrentProducersLoseNothingAndKeepTheirOwnOrder) {
  // Four producers race into one band while one consumer (the run-flag holder) dequeues: every
  // frame comes out exactly once, each producer's in the order it enqueued them, and the limit
  // holds throughout.
  constexpr unsigned kPerProducer = 5000, kProducers = 4, kLimit = 64;
  LockfreePfifo q(kLimit);
  std::vector<std::vector<rte_mbuf*>> sent(kProducers);
  for (auto& v : sent) v = Alloc(256);  // recycled: frames are told apart by a tag
  std::vector<std::thread> producers;
  for (unsigned p = 0; p < kProducers; ++p)
    producers.emplace_back([&, p] {
      for (unsigned i = 0; i < kPerProducer; ++i) {
        rte_mbuf* m = sent[p][i % 256];
        // The tag is written here and read and cleared by the consumer: atomically, since the
        // producer spins on it (ThreadSanitizer caught the plain accesses as a race).
        Tag(m).store((uint64_t{p} << 32) | i, std::memory_order_relaxed);
        while (!q.Enqueue(m, 1)) std::this_thread::yield();
        // Wait for it to come out before reusing its slot 256 frames later.
        if (i % 256 == 255)
          while (Tag(m).load(std::memory_order_acquire) != ~uint64_t{0}) std::this_thread::yield();
      }
    });
  std::vector<uint32_t> next(kProducers, 0);
  unsigned got = 0, max_backlog = 0, out_of_order = 0;
  Batch b;
  while (got < kPerProducer * kProducers) {
    b.Clear();
    max_backlog = std::max(max_backlog, q.backlog());
    if (q.DequeueBulk(b, 32) == 0) std::this_thread::yield();
    for (rte_mbuf* m : b.frames()) {
      const uint64_t tag = Tag(m).load(std::memory_order_relaxed);
      const auto p = static_cast<unsigned>(tag >> 32);
      const auto i = static_cast<uint32_t>(tag);
      if (i != next[p]) ++out_of_order;
      next[p] = i + 1;
      Tag(m).store(~uint64_t{0}, std::memory_order_release);
      ++got;
    }
  }
  for (auto& t : producers) t.join();
  EXPECT_EQ(out_of_order, 0u);
  EXPECT_LE(max_backlog, kLimit);
  EXPECT_TRUE(q.empty());
  for (auto& v : sent) rte_pktmbuf_free_bulk(v.data(), static_cast<unsigned>(v.size()));
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

}  // namespace
}  // namespace txbatch
