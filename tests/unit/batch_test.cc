#include "batching/batch.h"

#include <gtest/gtest.h>

#include <vector>

#include "batching/flush_policy.h"
#include "tests/unit/test_eal.h"

namespace txbatch {
namespace {

std::vector<rte_mbuf*> Alloc(unsigned n, unsigned len) {
  std::vector<rte_mbuf*> v(n);
  EXPECT_EQ(rte_pktmbuf_alloc_bulk(test::Pool(), v.data(), n), 0);
  for (auto* m : v) {
    m->pkt_len = len;
    m->data_len = static_cast<uint16_t>(len);
  }
  return v;
}

TEST(Batch, PushCountsFramesAndBytes) {
  auto frames = Alloc(3, 100);
  Batch b;
  EXPECT_TRUE(b.empty());
  for (auto* m : frames) b.Push(m);
  EXPECT_EQ(b.size(), 3);
  EXPECT_EQ(b.bytes(), 300u);
  EXPECT_EQ(b.frames()[1], frames[1]);
  rte_pktmbuf_free_bulk(frames.data(), 3);
}

TEST(Batch, ConsumeFrontKeepsTheRestInOrder) {
  auto frames = Alloc(5, 64);
  frames[4]->pkt_len = 1000;
  Batch b;
  for (auto* m : frames) b.Push(m);
  b.ConsumeFront(2);
  ASSERT_EQ(b.size(), 3);
  EXPECT_EQ(b.frames()[0], frames[2]);
  EXPECT_EQ(b.frames()[2], frames[4]);
  EXPECT_EQ(b.bytes(), 64u + 64u + 1000u);
  rte_pktmbuf_free_bulk(frames.data(), 5);
}

TEST(Batch, FillsToCapacity) {
  auto frames = Alloc(kMaxBatch, 60);
  Batch b;
  for (auto* m : frames) b.Push(m);
  EXPECT_TRUE(b.full());
  EXPECT_EQ(b.size(), kMaxBatch);
  b.Clear();
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(b.bytes(), 0u);
  rte_pktmbuf_free_bulk(frames.data(), kMaxBatch);
}

TEST(CountPolicy, ParsesValidSpecs) {
  auto p = ParsePolicySpec("count:32");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->frames, 32);
  EXPECT_EQ(p->ToString(), "count:32");
  EXPECT_TRUE(p->batching());
  auto off = ParsePolicySpec("count:1");
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->batching());
  auto policy = MakeFlushPolicy(*p);
  EXPECT_EQ(policy->Budget().frames, 32);
}

TEST(CountPolicy, RejectsBadSpecsWithTheValidForm) {
  for (const char* bad :
       {"count:0", "count:513", "count:", "count:x", "count:3x", "bql", "", "32"}) {
    auto p = ParsePolicySpec(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.error().message.find("valid: count:N with N in 1..512"), std::string::npos)
        << p.error().message;
  }
}

}  // namespace
}  // namespace txbatch
