// GSO frames (dataplane/gso.h): how a TCP stream's writes become them, how they are cut into
// segments — each exactly the frame the producer would have built without offload — and how the
// emulated NIC sends one with TSO.
#include "dataplane/gso.h"

#include <gtest/gtest.h>
#include <rte_ip.h>
#include <rte_tcp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <vector>

#include "batching/batch.h"
#include "batching/flush_policy.h"
#include "dataplane/frame.h"
#include "dataplane/netdev_queue.h"
#include "dataplane/run_window.h"
#include "dataplane/rx_sink.h"
#include "dataplane/tx_queue.h"
#include "dataplane/workload.h"
#include "drivers/emu/emu.h"
#include "tests/unit/complete_all.h"
#include "tests/unit/test_eal.h"

namespace txbatch {
namespace {

constexpr unsigned kMss = 1448;  // MaxPayload(tcp, 1500)

// A GSO frame of `payload` bytes in ceil(payload / kMss) fresh mbufs, built by `b`.
rte_mbuf* BuildGso(FrameBuilder& b, unsigned payload, Tsc tsc) {
  const unsigned slices = (payload + kMss - 1) / kMss;
  std::array<rte_mbuf*, kMaxGsoSegs> chain;
  EXPECT_EQ(rte_pktmbuf_alloc_bulk(test::Pool(), chain.data(), slices), 0);
  b.BuildGso({chain.data(), slices}, payload, kMss, tsc);
  return chain[0];
}

TEST(Gso, TheSizeGoalIsTcpsWholeMssUnderGsoMaxSize) {
  // tcp_xmit_size_goal: (65536 - 1 - MAX_TCP_HEADER 320) / mss whole segments.
  EXPECT_EQ(MaxPayload(Proto::kTcp, 1500), kMss);
  EXPECT_EQ(GsoSizeGoal(kMss), 45u * kMss);
  EXPECT_EQ(GsoSizeGoal(MaxPayload(Proto::kTcp, 9000)), 7u * 8948);
  EXPECT_EQ(GsoSizeGoal(100), kMaxGsoSegs * 100);  // capped (gso.h)
  EXPECT_EQ(GsoSizeGoal(70000), 70000u);           // at least one segment
}

TEST(Gso, AStreamGoesAsFramesOfTheSizeGoal) {
  // At full speed (deferring): frames of the size goal only; 4096-byte writes fill one in 16.
  Segmenter small(Proto::kTcp, 4096, 1500, /*gso=*/true);
  std::vector<unsigned> got;
  for (int w = 0; w < 16; ++w) small.Write([&](unsigned p) { got.push_back(p); });
  EXPECT_EQ(got, (std::vector<unsigned>{45 * kMss}));  // 65536 - 65160 = 376 left
  // 65536-byte writes never leave a runt: what is short of the goal joins the next write's.
  Segmenter big(Proto::kTcp, 65536, 1500, /*gso=*/true);
  got.clear();
  for (int w = 0; w < 200; ++w) big.Write([&](unsigned p) { got.push_back(p); });
  EXPECT_EQ(got.size(), 201u);  // 200 x 65536 = 201 x 65160 + 10040
  EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](unsigned p) { return p == 45 * kMss; }));
  got.clear();
  big.Flush([&](unsigned p) { got.push_back(p); });
  EXPECT_EQ(got, (std::vector<unsigned>{10040}));  // 7 slices, the last one partial
  // A last slice shorter than the txbatch header is padded to it (as a lone frame always was).
  Segmenter odd(Proto::kTcp, 2 * kMss + 5, 1500, /*gso=*/true);
  got.clear();
  odd.Write([&](unsigned p) { got.push_back(p); });
  odd.Flush([&](unsigned p) { got.push_back(p); });
  EXPECT_EQ(got, (std::vector<unsigned>{2 * kMss + 18}));
  Segmenter tiny(Proto::kTcp, 5, 1500, /*gso=*/false);
  got.clear();
  tiny.Write([&](unsigned p) { got.push_back(p); });
  tiny.Flush([&](unsigned p) { got.push_back(p); });
  EXPECT_EQ(got, (std::vector<unsigned>{18}));
  // Paced (not deferring): each write's full segments at once, the sub-MSS rest corked.
  Segmenter paced(Proto::kTcp, 4096, 1500, /*gso=*/true, /*defer=*/false);
  got.clear();
  for (int w = 0; w < 3; ++w) paced.Write([&](unsigned p) { got.push_back(p); });
  EXPECT_EQ(got, (std::vector<unsigned>{2 * kMss, 3 * kMss, 3 * kMss}));  // 12288 = 8 x 1448 + 704
  Segmenter bigger(Proto::kTcp, 200000, 1500, /*gso=*/true, /*defer=*/false);
  got.clear();
  bigger.Write([&](unsigned p) { got.push_back(p); });
  EXPECT_EQ(got, (std::vector<unsigned>{45 * kMss, 45 * kMss, 45 * kMss, 3 * kMss}));
  // Without offload: MSS frames. UDP never makes GSO frames.
  Segmenter plain(Proto::kTcp, 4096, 1500, /*gso=*/false);
  got.clear();
  plain.Write([&](unsigned p) { got.push_back(p); });
  EXPECT_EQ(got, (std::vector<unsigned>{kMss, kMss}));
  Segmenter udp(Proto::kUdp, 4096, 1500, /*gso=*/true);
  got.clear();
  udp.Write([&](unsigned p) { got.push_back(p); });
  EXPECT_EQ(got, (std::vector<unsigned>{1472, 1472, 1152}));
}

// The segments of a GSO frame are, byte for byte, the MSS frames the same flow builds without
// offload (IP ids, TCP sequence numbers, txbatch sequence numbers and stamps, checksums), but for
// PSH, which tcp_gso_segment leaves on the last segment alone.
TEST(Gso, ItsSegmentsAreTheFramesTheStreamWouldHaveBuilt) {
  for (const unsigned payload : {45 * kMss, 3 * kMss + 100, 2 * kMss}) {
    FrameBuilder gso(Proto::kTcp, 5), plain(Proto::kTcp, 5);
    rte_mbuf* head = BuildGso(gso, payload, 777 << 21);
    const unsigned n = (payload + kMss - 1) / kMss;
    ASSERT_TRUE(IsGso(head));
    EXPECT_EQ(WireFrames(head), n);
    EXPECT_EQ(rte_pktmbuf_pkt_len(head), FrameBytes(Proto::kTcp, payload));
    EXPECT_EQ(PayloadBytes(head), payload);
    std::array<rte_mbuf*, kMaxGsoSegs> seg;
    ASSERT_EQ(SegmentGso(head, seg), n);
    EXPECT_EQ(seg[0], head);
    EXPECT_EQ(gso.next_seq(), n);
    unsigned left = payload;
    for (unsigned i = 0; i < n; ++i) {
      rte_mbuf* s = seg[i];
      const unsigned take = std::min(left, kMss);
      left -= take;
      SCOPED_TRACE(testing::Message() << "payload " << payload << " segment " << i);
      EXPECT_FALSE(IsGso(s));
      EXPECT_EQ(s->nb_segs, 1);
      EXPECT_EQ(s->next, nullptr);
      ASSERT_EQ(rte_pktmbuf_pkt_len(s), FrameBytes(Proto::kTcp, take));
      EXPECT_EQ(PayloadBytes(s), take);
      const ParsedFrame f = ParseFrame(s);
      ASSERT_EQ(f.status, ParseStatus::kOk);
      EXPECT_EQ(f.seq, i);
      EXPECT_EQ(f.flow, 5);
      EXPECT_EQ(f.payload, take);
      EXPECT_TRUE(VerifyHeaders(rte_pktmbuf_mtod(s, const uint8_t*), rte_pktmbuf_data_len(s), 5));
      auto* ip = rte_pktmbuf_mtod_offset(s, rte_ipv4_hdr*, kEthHeaderBytes);
      auto* tcp = reinterpret_cast<rte_tcp_hdr*>(ip + 1);
      EXPECT_EQ(tcp->tcp_flags,
                i + 1 == n ? RTE_TCP_ACK_FLAG | RTE_TCP_PSH_FLAG : RTE_TCP_ACK_FLAG);
      EXPECT_EQ(tcp->cksum, rte_ipv4_phdr_cksum(ip, s->ol_flags));
      // The frame built without offload: the same bytes, flags aside.
      rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
      ASSERT_NE(m, nullptr);
      plain.Build(m, take, 777 << 21);
      tcp->tcp_flags = RTE_TCP_ACK_FLAG | RTE_TCP_PSH_FLAG;
      const unsigned hdr = FrameBytes(Proto::kTcp, 0) + kTxbatchHeaderBytes;
      EXPECT_EQ(std::memcmp(rte_pktmbuf_mtod(s, void*), rte_pktmbuf_mtod(m, void*), hdr), 0);
      rte_pktmbuf_free(m);
    }
    for (unsigned i = 0; i < n; ++i) rte_pktmbuf_free(seg[i]);
  }
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

TEST(Gso, ABatchIsCutInPlaceAndInOrder) {
  FrameBuilder b(Proto::kTcp, 1);
  Batch batch;
  rte_mbuf* plain = rte_pktmbuf_alloc(test::Pool());
  b.Build(plain, kMss, 0);
  batch.Push(plain);
  batch.Push(BuildGso(b, 3 * kMss, 0));
  rte_mbuf* last = rte_pktmbuf_alloc(test::Pool());
  b.Build(last, 100, 0);
  batch.Push(last);
  EXPECT_EQ(WireFrames(batch.frames()), 5u);
  EXPECT_EQ(SegmentBatch(batch), 3u);
  ASSERT_EQ(batch.size(), 5);
  for (unsigned i = 0; i < 5; ++i) EXPECT_EQ(ParseFrame(batch.frames()[i]).seq, i);
  EXPECT_EQ(batch.bytes(), 4 * FrameBytes(Proto::kTcp, kMss) + FrameBytes(Proto::kTcp, 100));
  EXPECT_EQ(SegmentBatch(batch), 0u);  // nothing left to cut
  rte_pktmbuf_free_bulk(batch.frames().data(), batch.size());
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

// A GSO frame that waited for room in the qdisc is restamped whole: every segment cut from it
// carries the new stamp.
TEST(Gso, ARestampReachesEverySlice) {
  FrameBuilder b(Proto::kTcp, 0);
  rte_mbuf* m = BuildGso(b, 3 * kMss, 100);
  RestampTx(m, 200);
  std::array<rte_mbuf*, kMaxGsoSegs> seg;
  ASSERT_EQ(SegmentGso(m, seg), 3u);
  for (unsigned i = 0; i < 3; ++i) {
    EXPECT_EQ(ParseFrame(seg[i]).tx_tsc, 200u) << i;
    rte_pktmbuf_free(seg[i]);
  }
}

// Issue 44 item 15: a frame sent without a stamp (kNoTxStamp, --no-timing) keeps none when it
// waited for room: stamping only the frames that waited handed a --clocks-synchronised sink the
// latency of those alone, as if it were every frame's.
TEST(Gso, AFrameSentWithoutAStampKeepsNoneWhenRestamped) {
  FrameBuilder b(Proto::kTcp, 0);
  rte_mbuf* m = BuildGso(b, 3 * kMss, kNoTxStamp);
  RestampTx(m, 200);
  std::array<rte_mbuf*, kMaxGsoSegs> seg;
  ASSERT_EQ(SegmentGso(m, seg), 3u);
  for (unsigned i = 0; i < 3; ++i) {
    EXPECT_EQ(ParseFrame(seg[i]).tx_tsc, kNoTxStamp) << i;
    rte_pktmbuf_free(seg[i]);
  }
}

TEST(Gso, UnbuildGivesBackEverySegmentsNumbers) {
  FrameBuilder b(Proto::kTcp, 2);
  rte_mbuf* m = BuildGso(b, 4 * kMss, 0);
  EXPECT_EQ(b.next_seq(), 4u);
  b.Unbuild(PayloadBytes(m), WireFrames(m));
  EXPECT_EQ(b.next_seq(), 0u);
  rte_pktmbuf_free(m);
  // The next frame takes the numbers (and the TCP sequence) the dropped one had.
  FrameBuilder fresh(Proto::kTcp, 2);
  rte_mbuf* x = rte_pktmbuf_alloc(test::Pool());
  rte_mbuf* y = rte_pktmbuf_alloc(test::Pool());
  b.Build(x, kMss, 0);
  fresh.Build(y, kMss, 0);
  EXPECT_EQ(
      std::memcmp(rte_pktmbuf_mtod(x, void*), rte_pktmbuf_mtod(y, void*), rte_pktmbuf_pkt_len(x)),
      0);
  rte_pktmbuf_free(x);
  rte_pktmbuf_free(y);
}

// TSO on the emulated e1000: a 45-slice GSO frame takes a context descriptor and one per 4096
// bytes, its 45 MSS frames leave back to back (1538 wire bytes each, 12.304 us at 1 Gb/s), the
// sink gets each as an ordinary frame, and the books count 45 wire frames.
// TSO needs a wire to cut on and a ring that holds the largest GSO frame (17 descriptors on
// e1000, 5 on ixgbe); a model without has none, and --offload auto gives it MSS frames.
TEST(Gso, TsoNeedsAWireAndARingThatHoldsAFrame) {
  EXPECT_EQ(emu::ParseEmuSpec("emu:e1000,ring=17,free_thresh=8")->tso_desc_bytes, 4096u);
  EXPECT_EQ(emu::ParseEmuSpec("emu:e1000,ring=16,free_thresh=8")->tso_desc_bytes, 0u);
  EXPECT_EQ(emu::ParseEmuSpec("emu:ixgbe,ring=8,free_thresh=4")->tso_desc_bytes, 16384u);
  EXPECT_EQ(emu::ParseEmuSpec("emu:ixgbe,rate_mbps=0")->tso_desc_bytes, 0u);
  EXPECT_EQ(emu::ParseEmuSpec("emu:null")->tso_desc_bytes, 0u);
  EXPECT_EQ(emu::ParseEmuSpec("emu:ipoib-qdr")->tso_desc_bytes, 0u);
}

TEST(Gso, TheEmulatedNicCutsAGsoFrameOnTheWire) {
  auto o = emu::ParseEmuSpec("emu:e1000,free_thresh=1,doorbell_ns=0,desc_ns=0");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o->tso_desc_bytes, 4096u);
  RunWindow window;
  RxSink sink(window, test::TscHz(), 1);
  auto nic = emu::CreateEmuDriver(*o, sink, window, test::TscHz());
  FrameBuilder b(Proto::kTcp, 0);
  rte_mbuf* m = BuildGso(b, 45 * kMss, Now());
  const uint32_t len = rte_pktmbuf_pkt_len(m);
  ASSERT_EQ(len, 65226u);
  const Tsc before = Now();
  ASSERT_EQ(nic->Xmit({&m, 1}), 1);
  const Tsc after = Now();
  EXPECT_EQ(nic->FreeSlots(), 256u - (1 + (65226 + 4095) / 4096));  // 17 descriptors
  EXPECT_EQ(nic->InFlight(), 45u);
  const Tsc done = nic->NextCompletion();
  const double wire_s = 45 * 1538 * 8 / 1e9;
  EXPECT_GE(done, before + static_cast<Tsc>(wire_s * test::TscHz()) - 2);
  EXPECT_LE(done, after + static_cast<Tsc>(wire_s * test::TscHz()) + 2);
  while (Now() < done) {
  }
  EXPECT_EQ(nic->Complete(done), 1u);  // one frame reclaimed: its 45 segments delivered
  EXPECT_EQ(nic->InFlight(), 0u);
  EXPECT_EQ(nic->FreeSlots(), 256u);
  EXPECT_EQ(nic->counters().completed_bytes.Get(), len);  // BQL's bytes: the frame's length
  EXPECT_EQ(nic->counters().window_frames.Get(), 0u);     // no window was open
  EXPECT_EQ(sink.counts().received, 45u);
  EXPECT_EQ(sink.counts().lost, 0u);
  EXPECT_EQ(sink.counts().foreign, 0u);
  nic.reset();
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

// A GSO frame that does not fit the descriptors left stops the queue (as a driver's
// NETDEV_TX_BUSY path does), so the completion role restarts it: with stop_slack 1 a ring of 32
// takes one 17-descriptor frame, refuses the next and stops with 15 free.
TEST(Gso, AFrameThatDoesNotFitStopsTheQueue) {
  auto o = emu::ParseEmuSpec("emu:e1000,ring=32,free_thresh=20,stop_slack=1,doorbell_ns=0");
  ASSERT_TRUE(o.ok()) << o.error().message;
  RunWindow window;
  RxSink sink(window, test::TscHz(), 1);
  auto nic = emu::CreateEmuDriver(*o, sink, window, test::TscHz());
  FrameBuilder b(Proto::kTcp, 0);
  std::array<rte_mbuf*, 2> f = {BuildGso(b, 45 * kMss, Now()), BuildGso(b, 45 * kMss, Now())};
  EXPECT_EQ(nic->Xmit(f), 1);
  EXPECT_EQ(nic->FreeSlots(), 15u);
  EXPECT_TRUE(nic->Stopped());
  EXPECT_EQ(nic->counters().stops.Get(), 1u);
  EXPECT_EQ(nic->Xmit({&f[1], 1}), 0);  // still stopped: no second stop
  EXPECT_EQ(nic->counters().stops.Get(), 1u);
  test::CompleteAll(*nic);
  EXPECT_FALSE(nic->Stopped());
  EXPECT_EQ(nic->Xmit({&f[1], 1}), 1);
  EXPECT_EQ(nic->Purge(), 45u);
  EXPECT_EQ(sink.counts().received, 45u);
  nic.reset();
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

// BQL's bytes for a GSO frame are its driver's: ixgbe_tso adds its headers once per segment
// after the first (first->bytecount += (gso_segs - 1) * hdr_len) and reports bytecount both to
// netdev_tx_sent_queue and, at the clean, to netdev_tx_completed_queue; e1000 reports skb->len
// both ways. A 45-slice frame of 65226 bytes with 66 bytes of headers (Ethernet 14, IPv4 20, TCP
// with timestamps 32): 65226 + 44 x 66 = 68130 bytes on ixgbe, 65226 on e1000, queued as the
// stack hands it over (a pinned limit's room) and completed as the NIC reclaims it (the room
// back whole). Both counted the length on ixgbe before.
TEST(Gso, EachNicModelCountsAGsoFrameForBqlAsItsDriverDoes) {
  struct Case {
    const char* spec;
    uint32_t bql_bytes;
  };
  for (const Case& c : {Case{"emu:ixgbe,doorbell_ns=0,desc_ns=0", 65226 + 44 * 66},
                        Case{"emu:e1000,doorbell_ns=0,desc_ns=0", 65226}}) {
    SCOPED_TRACE(c.spec);
    auto o = emu::ParseEmuSpec(c.spec);
    ASSERT_TRUE(o.ok()) << o.error().message;
    RunWindow window;
    RxSink sink(window, test::TscHz(), 1);
    auto nic = emu::CreateEmuDriver(*o, sink, window, test::TscHz());
    const auto policy = MakeFlushPolicy(*ParsePolicySpec("linux-2025"), test::TscHz());
    TxQueueCounters counters;
    constexpr uint32_t kLimit = 1'000'000;
    NetdevQueue dev(*nic, *policy, BqlBounds{kLimit, kLimit, 1.0}, test::TscHz(), counters);
    FrameBuilder b(Proto::kTcp, 0);
    rte_mbuf* m = BuildGso(b, 45 * kMss, Now());
    ASSERT_EQ(rte_pktmbuf_pkt_len(m), 65226u);
    ASSERT_EQ(m->l2_len + m->l3_len + m->l4_len, 66);
    ASSERT_EQ(dev.Xmit({&m, 1}, Handover::kXmitMore, /*from_qdisc=*/true, Now()).accepted, 1);
    EXPECT_EQ(dev.bql_avail(), int64_t{kLimit} - c.bql_bytes);
    EXPECT_EQ(nic->counters().accepted.Get(), 45u);  // its wire frames, in the books
    test::CompleteAll(*nic, [&dev](Tsc t) { return dev.Complete(t); });
    EXPECT_EQ(nic->counters().completed_bytes.Get(), c.bql_bytes);
    EXPECT_EQ(dev.bql_avail(), int64_t{kLimit});
    EXPECT_EQ(sink.counts().received, 45u);
  }
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

// The calls' side of a driver's counters is NetdevQueue's, the one way to a driver: a call for a
// burst, one per frame of an xmit_more chain; every frame offered; the wire frames of those
// taken (a GSO frame's segments, as the books count them). A ring of 32 takes one 17-descriptor
// frame of a burst of two and stops (AFrameThatDoesNotFitStopsTheQueue); a qdisc's bulk on the
// stopped queue is refused without a call; once drained, the second goes as a chain of one.
TEST(Gso, NetdevQueueCountsTheCallsItMakesAndTheWireFramesTaken) {
  auto o = emu::ParseEmuSpec("emu:e1000,ring=32,free_thresh=20,stop_slack=1,doorbell_ns=0");
  ASSERT_TRUE(o.ok()) << o.error().message;
  RunWindow window;
  RxSink sink(window, test::TscHz(), 1);
  auto nic = emu::CreateEmuDriver(*o, sink, window, test::TscHz());
  const auto policy = MakeFlushPolicy(*ParsePolicySpec("count:32"), test::TscHz());
  TxQueueCounters counters;
  NetdevQueue dev(*nic, *policy, BqlBounds{}, test::TscHz(), counters);
  FrameBuilder b(Proto::kTcp, 0);
  std::array<rte_mbuf*, 2> f = {BuildGso(b, 45 * kMss, Now()), BuildGso(b, 45 * kMss, Now())};
  const auto counts = [&] {
    const DriverCounters& c = nic->counters();
    return std::array<uint64_t, 3>{c.xmit_calls.Get(), c.offered.Get(), c.accepted.Get()};
  };
  EXPECT_EQ(dev.Xmit(f, Handover::kBurst, /*from_qdisc=*/false, Now()).accepted, 1);
  EXPECT_EQ(counts(), (std::array<uint64_t, 3>{1, 2, 45}));
  EXPECT_FALSE(dev.Xmit({&f[1], 1}, Handover::kBurst, /*from_qdisc=*/true, Now())
                   .offered);  // stopped: no call
  EXPECT_EQ(counts(), (std::array<uint64_t, 3>{1, 2, 45}));
  test::CompleteAll(*nic, [&dev](Tsc t) { return dev.Complete(t); });
  EXPECT_EQ(dev.Xmit({&f[1], 1}, Handover::kXmitMore, /*from_qdisc=*/true, Now()).accepted, 1);
  EXPECT_EQ(counts(), (std::array<uint64_t, 3>{2, 3, 90}));
  EXPECT_EQ(nic->Purge(), 45u);
  nic.reset();
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

// e1000's TSO admission: e1000_xmit_frame takes an skb only with `count + 2` descriptors free,
// its count the frame's descriptors and one more (the spare its sentinel workaround may take),
// else it stops the queue and returns NETDEV_TX_BUSY. A 45-slice frame takes 17 (a context one
// and 16 of 4096 bytes), so it needs 20 free, one more than the 19 (MAX_SKB_FRAGS + 2, 3.18) an
// open queue keeps: behind 237 one-descriptor frames (19 free, open) it is refused and the queue
// stops; behind 236 (20 free) it is taken, leaving 3. The emulated e1000 took it with 17 free.
TEST(Gso, AnE1000TakesAGsoFrameOnlyWithItsDriversSlackFree) {
  for (const unsigned plain : {237u, 236u}) {
    SCOPED_TRACE(plain);
    auto o = emu::ParseEmuSpec("emu:e1000,doorbell_ns=0,desc_ns=0");
    ASSERT_TRUE(o.ok()) << o.error().message;
    ASSERT_EQ(o->stop_slack, 19u);
    ASSERT_EQ(o->tso_admit_slack, 3u);
    RunWindow window;
    RxSink sink(window, test::TscHz(), 1);
    auto nic = emu::CreateEmuDriver(*o, sink, window, test::TscHz());
    FrameBuilder b(Proto::kTcp, 0);
    std::vector<rte_mbuf*> frames(plain);
    ASSERT_EQ(rte_pktmbuf_alloc_bulk(test::Pool(), frames.data(), plain), 0);
    for (rte_mbuf* f : frames) b.Build(f, kMss, 0);
    ASSERT_EQ(nic->Xmit(frames), plain);
    ASSERT_EQ(nic->FreeSlots(), 256u - plain);
    ASSERT_FALSE(nic->Stopped());
    rte_mbuf* m = BuildGso(b, 45 * kMss, 0);
    const bool taken = plain == 236;
    EXPECT_EQ(nic->Xmit({&m, 1}), taken ? 1 : 0);
    EXPECT_TRUE(nic->Stopped());
    EXPECT_EQ(nic->counters().stops.Get(), 1u);
    EXPECT_EQ(nic->FreeSlots(), taken ? 3u : 19u);
    if (!taken) rte_pktmbuf_free(m);
    EXPECT_EQ(nic->Purge(), plain + (taken ? 45 : 0));
  }
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

}  // namespace
}  // namespace txbatch
