// fq_codel (dataplane/fq_codel.h) against traces worked by hand from Linux 6.x
// net/sched/sch_fq_codel.c and include/net/codel_impl.h: the DRR order of flows of different
// sizes, CoDel's drop times (its control law's Newton steps included) and fq_codel_drop's batch.
#include "dataplane/fq_codel.h"

#include <gtest/gtest.h>
#include <rte_ether.h>
#include <rte_ip.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "dataplane/frame.h"
#include "tests/unit/test_eal.h"

namespace txbatch {
namespace {

// A clock of 1 GHz: a TSC reading is ns, and CoDel's time is ns >> 10.
constexpr double kHz = 1e9;
constexpr unsigned kMtu = 1514;  // psched_mtu of a 1500-byte Ethernet device

// Frames of a few flows (FrameBuilder's flow id picks the UDP ports, so the hash).
class Frames {
 public:
  rte_mbuf* Make(uint16_t flow, unsigned frame_bytes) {
    auto it = builders_.find(flow);
    if (it == builders_.end())
      it = builders_.emplace(flow, FrameBuilder(Proto::kUdp, flow, false)).first;
    rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
    EXPECT_NE(m, nullptr);
    it->second.Build(m, frame_bytes - FrameBytes(Proto::kUdp, 0), 1);
    flow_of_[m] = flow;
    return m;
  }
  uint16_t FlowOf(rte_mbuf* m) const { return flow_of_.at(m); }

 private:
  std::map<uint16_t, FrameBuilder> builders_;
  std::map<rte_mbuf*, uint16_t> flow_of_;
};

// Dequeues one frame at `now` (a bulk of 1); null when nothing is left.
rte_mbuf* One(FqCodel& q, Tsc now) {
  Batch b;
  q.DequeueBulk(b, DequeueBudget{1}, now);
  return b.size() == 0 ? nullptr : b.frames()[0];
}

// Three flows of different frame sizes in distinct buckets (flow ids picked so), quantum 1514.
std::vector<uint16_t> ThreeFlowsInDistinctBuckets(FqCodel& q, Frames& f) {
  std::vector<uint16_t> ids;
  std::set<uint32_t> buckets;
  for (uint16_t id = 0; ids.size() < 3; ++id) {
    rte_mbuf* m = f.Make(id, 64);
    if (buckets.insert(q.Classify(m)).second) ids.push_back(id);
    rte_pktmbuf_free(m);
  }
  return ids;
}

TEST(FqCodel, ServesFlowsByDeficitRoundRobinNewFlowsFirst) {
  QdiscCounters c;
  FqCodel q(FqCodelParams{}, kMtu, kHz, c);
  Frames f;
  const auto ids = ThreeFlowsInDistinctBuckets(q, f);
  const uint16_t a = ids[0], b = ids[1], cc = ids[2];
  // A: 4 x 1514 bytes, B: 4 x 764, C: 8 x 64, queued in that order at t = 0 (no CoDel: every
  // sojourn is below target).
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(q.Enqueue(f.Make(a, 1514), 0, 0));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(q.Enqueue(f.Make(b, 764), 0, 0));
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(q.Enqueue(f.Make(cc, 64), 0, 0));
  EXPECT_EQ(c.new_flow_count.Get(), 3u);
  EXPECT_EQ(q.new_flows_len(), 3u);
  // fq_codel_dequeue by hand, deficits starting at quantum 1514 on new_flows = [A, B, C]:
  //  A 1514: A1 -> 0; spent: +1514, to old = [A].   B 1514: B1 -> 750, B2 -> -14; spent:
  //  +1514 = 1500, old = [A, B].   C 1514: C1..C8 -> 1002; empty, from new_flows with old ones
  //  waiting: to old = [A, B, C].   A 1514: A2 -> 0; +1514, old = [B, C, A].   B 1500: B3 ->
  //  736, B4 -> -28; +1514 = 1486, old = [C, A, B].   C: empty, from old_flows: off the lists.
  //  A: A3 -> 0; +1514, old = [B, A].   B: empty: off.   A: A4; +1514; then empty: off.
  std::string order;
  for (rte_mbuf* m; (m = One(q, 1)) != nullptr; rte_pktmbuf_free(m))
    order += f.FlowOf(m) == a ? 'A' : f.FlowOf(m) == b ? 'B' : 'C';
  EXPECT_EQ(order, "ABBCCCCCCCCABBAA");
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.new_flows_len() + q.old_flows_len(), 0u);
  EXPECT_EQ(c.dropped_codel.Get() + c.drop_overlimit.Get(), 0u);
}

TEST(FqCodel, CodelDropsAfterAnIntervalAboveTargetThenByItsControlLaw) {
  QdiscCounters c;
  FqCodel q(FqCodelParams{}, kMtu, kHz, c);
  Frames f;
  // One flow of 40 full frames, all queued at t = 0: a frame's sojourn is the dequeue's time.
  std::vector<rte_mbuf*> sent;
  for (int i = 0; i < 40; ++i) {
    sent.push_back(f.Make(7, 1514));
    ASSERT_TRUE(q.Enqueue(sent.back(), 0, 0));
  }
  // CoDel's time is ns >> 10: target 5 ms = 4882, interval 100 ms = 97656.
  const auto at = [](uint64_t codel_time) { return static_cast<Tsc>(codel_time << 10); };
  size_t next = 0;  // the frame a dequeue without a drop returns
  const auto expect = [&](Tsc t, unsigned drops_before, unsigned drops_after) {
    ASSERT_EQ(c.dropped_codel.Get(), drops_before);
    rte_mbuf* m = One(q, t);
    next += drops_after - drops_before;
    ASSERT_EQ(m, sent[next]) << "at codel time " << (t >> 10);
    ++next;
    rte_pktmbuf_free(m);
    ASSERT_EQ(c.dropped_codel.Get(), drops_after) << "at codel time " << (t >> 10);
  };
  // 5859 (6 ms): above target for the first time; first_above_time = 5859 + 97656 = 103515.
  expect(at(5859), 0, 0);
  // Not yet after first_above_time (codel_time_after is strict).
  expect(at(103515), 0, 0);
  // 104492 (107 ms): above target for more than an interval: the head is dropped, the next
  // sent; count 1, rec_inv_sqrt 0xffff, drop_next = 104492 + 97656 x 0xffff0000 / 2^32 = 202146.
  expect(at(104492), 0, 1);
  expect(at(202145), 1, 1);
  // drop_next reached: count 2; one Newton step from 0xffff gives rec_inv_sqrt 0x8001 (0.50002,
  // the kernel's first step, not 1/sqrt(2) = 0.707), so drop_next += 97656 x 0x80010000 / 2^32
  // = 48829: 250975.
  expect(at(202146), 1, 2);
  expect(at(250974), 2, 2);
  expect(at(250975), 2, 3);
  // count 3: rec_inv_sqrt 0x9000 (0.5625), + 54931 = 305906.
  expect(at(305905), 3, 3);
  expect(at(305906), 3, 4);
  EXPECT_EQ(c.ecn_mark.Get(), 0u);  // txbatch's frames are not ECN-capable: dropped, not marked
  EXPECT_EQ(c.maxpacket.Get(), 1514u);
  EXPECT_EQ(q.Purge(), 40u - next);
}

TEST(FqCodel, CodelLeavesItsDroppingStateOnceTheSojournFallsBelowTarget) {
  QdiscCounters c;
  FqCodel q(FqCodelParams{}, kMtu, kHz, c);
  Frames f;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(q.Enqueue(f.Make(7, 1514), 0, 0));
  const Tsc t0 = 104492ULL << 10;
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(q.Enqueue(f.Make(7, 1514), 0, t0));
  rte_pktmbuf_free(One(q, 5859ULL << 10));
  rte_pktmbuf_free(One(q, t0));  // a drop: the dropping state begins
  ASSERT_EQ(c.dropped_codel.Get(), 1u);
  // The rest of the first ten, still at t0: dropping, but drop_next (202146) is not reached.
  for (int i = 0; i < 7; ++i) rte_pktmbuf_free(One(q, t0));
  // The first frame queued at t0 waited under target: CoDel leaves its dropping state.
  rte_pktmbuf_free(One(q, t0 + 1024));
  // At the old drop_next the rest have waited 97654 (above target) again, but that only starts
  // a new interval (first_above_time): no drop.
  for (rte_mbuf* m; (m = One(q, 202146ULL << 10)) != nullptr;) rte_pktmbuf_free(m);
  EXPECT_EQ(c.dropped_codel.Get(), 1u);
  EXPECT_TRUE(q.empty());
}

// The IPv4 header of a frame FrameBuilder wrote (Ethernet, then IPv4).
rte_ipv4_hdr* Ip(rte_mbuf* m) {
  return rte_pktmbuf_mtod_offset(m, rte_ipv4_hdr*, sizeof(rte_ether_hdr));
}

// RFC 3168's codepoints in the TOS byte's low two bits.
constexpr uint8_t kNotEct = 0, kEct1 = 1, kEct0 = 2, kCe = 3;

// Sets the frame's ECN codepoint, its header checksum written again as a sender's stack would.
void SetEcn(rte_mbuf* m, uint8_t ecn) {
  rte_ipv4_hdr* ip = Ip(m);
  ip->type_of_service = static_cast<uint8_t>((ip->type_of_service & ~3u) | ecn);
  ip->hdr_checksum = 0;
  ip->hdr_checksum = rte_ipv4_cksum(ip);
}

// RFC 1071 by hand (not DPDK's): a header whose checksum is right sums to 0xffff.
bool HeaderChecksumValid(rte_mbuf* m) {
  const auto* b = reinterpret_cast<const uint8_t*>(Ip(m));
  const unsigned len = (b[0] & 0xfu) * 4u;
  uint32_t sum = 0;
  for (unsigned i = 0; i < len; i += 2) sum += (uint32_t{b[i]} << 8) | b[i + 1];
  while (sum >> 16) sum = (sum & 0xffffu) + (sum >> 16);
  return sum == 0xffffu;
}

// CoDel's verdict on an ECN-capable frame under `ecn` (the default): IP_ECN_set_ce marks it CE
// and it is sent, counted in ecn_mark, not dropped; a not-ECT frame is dropped as ever; a frame
// already CE counts as marked. The times are CodelDropsAfterAnInterval...'s: the same state.
TEST(FqCodel, UnderEcnCodelMarksEctFramesCeAndDropsNotEctOnes) {
  QdiscCounters c;
  FqCodel q(FqCodelParams{}, kMtu, kHz, c);
  Frames f;
  std::vector<rte_mbuf*> sent;
  const uint8_t ecn_of[] = {kNotEct, kEct0, kEct1, kNotEct, kNotEct, kCe};
  for (int i = 0; i < 40; ++i) {
    sent.push_back(f.Make(7, 1514));
    SetEcn(sent.back(), i < 6 ? ecn_of[i] : kNotEct);
    ASSERT_TRUE(HeaderChecksumValid(sent.back()));
    ASSERT_TRUE(q.Enqueue(sent.back(), 0, 0));
  }
  const uint8_t tos_before = Ip(sent[1])->type_of_service & ~3u;
  const auto at = [](uint64_t codel_time) { return static_cast<Tsc>(codel_time << 10); };
  const auto ecn = [](rte_mbuf* m) { return Ip(m)->type_of_service & 3u; };
  rte_mbuf* m = One(q, at(5859));  // above target for the first time: no verdict yet
  ASSERT_EQ(m, sent[0]);
  rte_pktmbuf_free(m);
  // Each later head: CoDel's verdict at `codel_time` on the frame sent[`sent`] behind it, the ECN
  // field that frame leaves with, and the marks and drops counted by then.
  struct Step {
    uint64_t codel_time;
    int sent;
    unsigned ecn;
    uint64_t marks, drops;
  };
  for (const Step& s : {
           // 104492: the dropping state begins on an ECT(0) head: marked CE and sent, not dropped.
           Step{104492, 1, kCe, 1, 0},
           // 202146: the control law's next verdict, on an ECT(1) head: marked too.
           Step{202146, 2, kCe, 2, 0},
           // 250975: a not-ECT head under ecn is dropped; the next is sent, untouched.
           Step{250975, 4, kNotEct, 2, 1},
           // 305906: a head already CE counts as marked and is sent.
           Step{305906, 5, kCe, 3, 1},
       }) {
    SCOPED_TRACE(s.codel_time);
    m = One(q, at(s.codel_time));
    ASSERT_EQ(m, sent[s.sent]);
    EXPECT_EQ(ecn(m), s.ecn);
    EXPECT_EQ(Ip(m)->type_of_service & ~3u, tos_before);  // only the ECN field changed
    EXPECT_TRUE(HeaderChecksumValid(m));
    EXPECT_EQ(c.ecn_mark.Get(), s.marks);
    EXPECT_EQ(c.dropped_codel.Get(), s.drops);
    rte_pktmbuf_free(m);
  }
  EXPECT_EQ(q.Purge(), 40u - 6u);
}

// noecn: an ECT frame gets CoDel's drop as any other, and its header is left alone.
TEST(FqCodel, UnderNoecnCodelDropsEctFramesUnmarked) {
  QdiscCounters c;
  FqCodel q(FqCodelParams{.ecn = false}, kMtu, kHz, c);
  Frames f;
  std::vector<rte_mbuf*> sent;
  for (int i = 0; i < 10; ++i) {
    sent.push_back(f.Make(7, 1514));
    SetEcn(sent.back(), kEct0);
    ASSERT_TRUE(q.Enqueue(sent.back(), 0, 0));
  }
  rte_pktmbuf_free(One(q, 5859ULL << 10));
  rte_mbuf* m = One(q, 104492ULL << 10);
  ASSERT_EQ(m, sent[2]);  // sent[1] dropped
  EXPECT_EQ(Ip(m)->type_of_service & 3u, kEct0);
  EXPECT_TRUE(HeaderChecksumValid(m));
  EXPECT_EQ(c.dropped_codel.Get(), 1u);
  EXPECT_EQ(c.ecn_mark.Get(), 0u);
  rte_pktmbuf_free(m);
  EXPECT_EQ(q.Purge(), 7u);
}

TEST(FqCodel, OverItsLimitDropsHalfTheFattestFlowFromItsHeadAtMostABatch) {
  for (const uint32_t batch : {64u, 16u}) {
    QdiscCounters c;
    FqCodel q(FqCodelParams{.limit = 100, .drop_batch = batch}, kMtu, kHz, c);
    Frames f;
    const auto ids = ThreeFlowsInDistinctBuckets(q, f);
    std::vector<rte_mbuf*> fat;
    for (int i = 0; i < 80; ++i) {
      fat.push_back(f.Make(ids[0], 1514));
      ASSERT_TRUE(q.Enqueue(fat.back(), 0, 0));
    }
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(q.Enqueue(f.Make(ids[1], 64), 0, 0));
    ASSERT_EQ(c.drop_overlimit.Get(), 0u);
    // The 101st frame (the thin flow's) takes q.qlen over 100: the fat flow holds 80 x 1514 =
    // 121120 bytes, half is 60560 = 40 frames, so 40 of its oldest go (at most drop_batch).
    ASSERT_TRUE(q.Enqueue(f.Make(ids[1], 64), 0, 0));
    const unsigned dropped = std::min(40u, batch);
    EXPECT_EQ(c.drop_overlimit.Get(), dropped) << "drop_batch " << batch;
    EXPECT_EQ(c.drop_overmemory.Get(), 0u);
    EXPECT_EQ(q.backlog(), 101u - dropped);
    // What is left of the fat flow starts after the dropped head.
    bool seen_fat = false;
    unsigned left = 0;
    for (rte_mbuf* m; (m = One(q, 1)) != nullptr; rte_pktmbuf_free(m), ++left) {
      if (!seen_fat && f.FlowOf(m) == ids[0]) {
        EXPECT_EQ(m, fat[dropped]);
        seen_fat = true;
      }
    }
    EXPECT_EQ(left, 101u - dropped);
  }
}

TEST(FqCodel, OverItsMemoryLimitDropsAsOverItsLimitAndSaysSo) {
  QdiscCounters c;
  // Ten full frames' truesize (1514 + 1280 each) is 27940 bytes: the tenth goes over 26000.
  FqCodel q(FqCodelParams{.memory_limit = 26000}, kMtu, kHz, c);
  Frames f;
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(q.Enqueue(f.Make(3, 1514), 0, 0));
  EXPECT_EQ(c.drop_overlimit.Get(), 0u);
  ASSERT_TRUE(q.Enqueue(f.Make(3, 1514), 0, 0));
  // Half of the one flow's 10 frames.
  EXPECT_EQ(c.drop_overlimit.Get(), 5u);
  EXPECT_EQ(c.drop_overmemory.Get(), 5u);
  EXPECT_EQ(q.Purge(), 5u);
  EXPECT_EQ(q.memory_usage(), 0u);
}

TEST(FqCodel, RequeuedFramesComeFirstAndCountTowardsTheLimit) {
  QdiscCounters c;
  FqCodel q(FqCodelParams{.limit = 4}, kMtu, kHz, c);
  Frames f;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(q.Enqueue(f.Make(1, 1514), 0, 0));
  Batch b;
  q.DequeueBulk(b, DequeueBudget{2}, 1);
  ASSERT_EQ(b.size(), 2u);
  q.Requeue(b.frames(), false);
  EXPECT_EQ(q.backlog(), 3u);
  ASSERT_TRUE(q.Enqueue(f.Make(1, 1514), 0, 0));  // 4: at the limit, nothing dropped
  EXPECT_EQ(c.drop_overlimit.Get(), 0u);
  // A fifth, with 2 of the 5 requeued, is over the limit: the bucket (3 frames, 4542 bytes)
  // loses its head until half its bytes went — 2 frames (3028 >= 2271).
  ASSERT_TRUE(q.Enqueue(f.Make(1, 1514), 0, 0));
  EXPECT_EQ(c.drop_overlimit.Get(), 2u);
  EXPECT_EQ(q.backlog(), 3u);
  rte_mbuf* first = b.frames()[0];
  Batch again;
  q.DequeueBulk(again, DequeueBudget{4}, 1);
  ASSERT_EQ(again.size(), 3u);
  EXPECT_EQ(again.frames()[0], first);
  rte_pktmbuf_free_bulk(again.frames().data(), again.size());
  EXPECT_TRUE(q.empty());
}

TEST(FqCodel, TcWordsParseAndReadBack) {
  std::string err;
  const auto p = ParseFqCodel("target 2ms interval 40ms limit 500 quantum 300 noecn flows 64 "
                              "memory_limit 4Mb drop_batch 8",
                              &err);
  ASSERT_TRUE(p) << err;
  EXPECT_EQ(p->target_us, 2000u);
  EXPECT_EQ(p->interval_us, 40000u);
  EXPECT_EQ(p->limit, 500u);
  EXPECT_EQ(p->quantum, 300u);
  EXPECT_FALSE(p->ecn);
  EXPECT_EQ(p->flows, 64u);
  EXPECT_EQ(p->memory_limit, 4u << 20);
  EXPECT_EQ(p->drop_batch, 8u);
  const auto back = ParseFqCodel(DescribeFqCodel(*p), &err);
  ASSERT_TRUE(back) << err;
  EXPECT_EQ(*back, *p);
  EXPECT_EQ(DescribeFqCodel(FqCodelParams{}),
            "limit 10240p flows 1024 target 5ms interval 100ms memory_limit 32Mb ecn "
            "drop_batch 64");
  EXPECT_EQ(*ParseFqCodel("", &err), FqCodelParams{});
  // tc's units in any case, its microseconds truncated.
  EXPECT_EQ(ParseFqCodel("target 5MS", &err)->target_us, 5000u);
  EXPECT_EQ(ParseFqCodel("interval 2.9us", &err)->interval_us, 2u);
}

TEST(FqCodel, BadWordsAreOneSentence) {
  for (const char* bad : {"target 0", "target 1us", "target 5xs", "interval", "limit 0",
                          "flows 65537", "flows 0", "flows 64p", "quantum 100", "quantum 1048577",
                          "quantum 4294967295", "memory_limit -1", "memory_limit 3gb", "bogus 3",
                          "drop_batch 0", "limit 12x", "limit 99999999999"}) {
    std::string err;
    EXPECT_FALSE(ParseFqCodel(bad, &err)) << bad;
    EXPECT_NE(err.find("fq_codel"), std::string::npos) << bad << ": " << err;
    EXPECT_EQ(err.find('\n'), std::string::npos) << err;
  }
}

}  // namespace
}  // namespace txbatch
