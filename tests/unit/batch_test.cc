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
  auto policy = MakeFlushPolicy(*p, 2e9);
  EXPECT_EQ(policy->Budget({}).frames, 32);
}

TEST(CountPolicy, RejectsBadSpecsWithTheValidForm) {
  for (const char* bad :
       {"count:0", "count:4097", "count:", "count:x", "count:3x", "bql:3", "linux", "", "32"}) {
    auto p = ParsePolicySpec(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.error().message.find("valid: count:N or buffer:N[:T] with N in 1..4096"),
              std::string::npos)
        << p.error().message;
  }
}

TEST(BufferPolicy, ParsesAndFlushesOnCountOrTimeout) {
  auto p = ParsePolicySpec("buffer:32:100");
  ASSERT_TRUE(p.ok()) << p.error().message;
  EXPECT_EQ(p->kind, PolicyKind::kBuffer);
  EXPECT_EQ(p->ToString(), "buffer:32:100");
  const double hz = 1e9;  // 1 tick = 1 ns
  auto policy = MakeFlushPolicy(*p, hz);
  EXPECT_FALSE(policy->FlushNow(31, 0, 99'000, true));  // a finished write does not flush it
  EXPECT_TRUE(policy->FlushNow(32, 0, 0, false));       // N frames do
  EXPECT_TRUE(policy->FlushNow(1, 0, 100'000, false));  // so does the drain timer
  EXPECT_EQ(policy->Trigger(32, 0, 0, false), FlushTrigger::kFull);
  EXPECT_EQ(policy->Trigger(1, 0, 100'000, false), FlushTrigger::kTimer);
  EXPECT_EQ(policy->Trigger(31, 0, 99'000, true), FlushTrigger::kNone);
  EXPECT_EQ(policy->FlushBy(5), 100'005u);
  auto untimed = MakeFlushPolicy(*ParsePolicySpec("buffer:8"), hz);
  EXPECT_EQ(untimed->FlushBy(0), kNever);
  EXPECT_FALSE(untimed->FlushNow(7, 0, 1'000'000'000, false));
}

TEST(CountPolicy, FlushesWhatAWriteProducedOrNFrames) {
  auto policy = MakeFlushPolicy(*ParsePolicySpec("count:4"), 1e9);
  EXPECT_FALSE(policy->FlushNow(3, 0, 0, false));
  EXPECT_TRUE(policy->FlushNow(3, 0, 0, true));  // never waits beyond what is there
  EXPECT_EQ(policy->Trigger(3, 0, 0, true), FlushTrigger::kWriteDone);
  EXPECT_EQ(policy->Trigger(4, 0, 0, true), FlushTrigger::kFull);
  EXPECT_TRUE(policy->FlushNow(4, 0, 0, false));
  EXPECT_FALSE(policy->FlushNow(0, 0, 0, true));
  EXPECT_EQ(policy->FlushBy(0), kNever);
}

TEST(BufferPolicy, RejectsBadForms) {
  for (const char* bad : {"buffer:", "buffer:0", "buffer:4097", "buffer:8:", "buffer:8:0",
                          "buffer:8:x", "count:8:100", "buffer:8:2000000"})
    EXPECT_FALSE(ParsePolicySpec(bad).ok()) << bad;
}

TEST(KernelPolicies, ParseByNameAndSayWhatTheyRead) {
  for (const char* name : {"bql", "linux-2014", "linux-2025", "blist-2007"}) {
    auto p = ParsePolicySpec(name);
    ASSERT_TRUE(p.ok()) << name;
    EXPECT_EQ(p->ToString(), name);
    EXPECT_TRUE(p->batching());
    EXPECT_TRUE(p->needs_qdisc());
    EXPECT_EQ(p->uses_bql(), std::string_view(name) != "blist-2007") << name;
  }
  EXPECT_FALSE(ParsePolicySpec("count:8")->needs_qdisc());
  EXPECT_FALSE(ParsePolicySpec("buffer:8:100")->uses_bql());
}

TEST(KernelPolicies, BudgetsFromWhatTheRunnerKnows) {
  DequeueContext ctx;
  ctx.has_bql = true;
  ctx.bql_avail = 4500;
  ctx.free_slots = 7;
  const auto bql = MakeFlushPolicy(*ParsePolicySpec("bql"), 1e9);
  EXPECT_EQ(bql->Budget(ctx).bytes, 4500);
  EXPECT_EQ(bql->Budget(ctx).handover, Handover::kBurst);
  ctx.has_bql = false;  // a driver without BQL: the first frame alone
  EXPECT_EQ(bql->Budget(ctx).bytes, 0);
  const auto blist = MakeFlushPolicy(*ParsePolicySpec("blist-2007"), 1e9);
  EXPECT_EQ(blist->Budget(ctx).frames, 7);
  EXPECT_EQ(blist->Budget(ctx).handover, Handover::kList);
  const auto l2014 = MakeFlushPolicy(*ParsePolicySpec("linux-2014"), 1e9);
  EXPECT_EQ(l2014->Budget(ctx).bytes, 0) << "no BQL, no bulk (qdisc_avail_bulklimit is 0)";
  EXPECT_FALSE(l2014->Budget(ctx).one_packet);
  ctx.requeued = 5;
  // 3.18 dequeue_skb: the requeued list as it was, one packet for the quota.
  EXPECT_EQ(l2014->Budget(ctx).frames, 5);
  EXPECT_EQ(l2014->Budget(ctx).bytes, INT64_MAX);
  EXPECT_TRUE(l2014->Budget(ctx).one_packet);
  const auto l2025 = MakeFlushPolicy(*ParsePolicySpec("linux-2025"), 1e9);
  EXPECT_EQ(l2025->Budget(ctx).frames, 1);  // alone, a packet of its own
  EXPECT_FALSE(l2025->Budget(ctx).one_packet);
}

}  // namespace
}  // namespace txbatch
