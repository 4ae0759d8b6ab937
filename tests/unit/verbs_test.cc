// The verbs driver's data path against a fake UD queue pair (fake_ud_qp.h): the work-request
// chain for every batch size, where signals go, reclaim across the send queue's wrap-around,
// a partial post at every position, completion errors, the MTU, inline sends, receive, and the
// pool full again after each test. Plus the real device path here, where there is no HCA.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <rte_ether.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include "dataplane/frame.h"
#include "dataplane/rx_sink.h"
#include "drivers/verbs/verbs_tx.h"
#include "tests/unit/fake_ud_qp.h"
#include "tests/unit/test_eal.h"
#include "tools/sink_cmd.h"

namespace txbatch::verbs::test {
namespace {

using txbatch::test::Pool;
using txbatch::test::TscHz;

VerbsOptions Options(unsigned sq_depth, unsigned signal_every, unsigned inline_max = 0) {
  VerbsOptions o;
  o.device = "fake0";
  o.qpn = 0x48;
  o.qkey = 0x11111111;
  o.lid = 3;
  o.sq_depth = sq_depth;
  o.signal_every = signal_every;
  o.inline_max = inline_max;
  return o;
}

// A driver over a fake QP, and what it needs around it.
struct Rig {
  Rig(unsigned sq_depth, unsigned signal_every, unsigned inline_max = 0, unsigned mtu = 1500,
      unsigned ipoib_mtu = 2044, unsigned rq_depth = 16)
      : avail_before(rte_mempool_avail_count(Pool())), sink(window, TscHz(), 4) {
    auto q = std::make_unique<FakeUdQueuePair>(sq_depth, rq_depth, inline_max, ipoib_mtu);
    qp = q.get();
    tx = std::make_unique<VerbsTx>(Options(sq_depth, signal_every, inline_max), std::move(q), &sink,
                                   window, TscHz());
    init = tx->Init(Pool(), mtu);
  }
  // A driver with `options` over `q` (FakeUdQueuePair::OnPort: a port the test describes).
  Rig(std::unique_ptr<FakeUdQueuePair> q, const VerbsOptions& options, unsigned mtu = 1500)
      : avail_before(rte_mempool_avail_count(Pool())), sink(window, TscHz(), 4) {
    qp = q.get();
    tx = std::make_unique<VerbsTx>(options, std::move(q), &sink, window, TscHz());
    init = tx->Init(Pool(), mtu);
  }
  ~Rig() {
    tx.reset();  // frees what it holds (flushing the fake first)
    EXPECT_EQ(rte_mempool_avail_count(Pool()), avail_before) << "mbufs did not all come home";
  }
  std::vector<rte_mbuf*> Frames(size_t n, unsigned payload = 64, uint16_t flow = 0) {
    std::vector<rte_mbuf*> v(n);
    FrameBuilder b(Proto::kUdp, flow, false, next_seq);
    for (auto& m : v) {
      m = rte_pktmbuf_alloc(Pool());
      b.Build(m, payload, Now());
    }
    next_seq = b.next_seq();
    return v;
  }
  // Eight frames whose post fails at `pos` (its index in the chain) with `err`.
  std::vector<rte_mbuf*> FramesFailingAt(unsigned pos, int err) {
    qp->fail_post_at = pos;
    qp->fail_errno = err;
    return Frames(8);
  }
  unsigned avail_before;
  RunWindow window;
  RxSink sink;
  FakeUdQueuePair* qp;
  std::unique_ptr<VerbsTx> tx;
  Status init;
  uint64_t next_seq = 0;
};

void FreeAll(std::span<rte_mbuf* const> frames) {
  for (rte_mbuf* m : frames) rte_pktmbuf_free(m);
}

// What a peer's driver posts for each of `frames` (IPoIB header + the IP packet) arrives at the
// rig's QP; the frames are freed.
void DeliverAsPeer(Rig& rig, std::span<rte_mbuf* const> frames) {
  for (rte_mbuf* m : frames) {
    const auto* d = rte_pktmbuf_mtod(m, const uint8_t*);
    std::vector<uint8_t> dgram = {d[12], d[13], 0, 0};
    dgram.insert(dgram.end(), d + kEthHeaderBytes, d + rte_pktmbuf_data_len(m));
    EXPECT_TRUE(rig.qp->Deliver(dgram));
  }
  FreeAll(frames);
}

TEST(VerbsTx, OneChainOnePostPerBatchForEveryBatchSize) {
  Rig rig(512, 16);
  ASSERT_TRUE(rig.init) << rig.init.error().message;
  unsigned since = 0;  // the rule, kept by the test: signal_every unsignalled, or a chain's last
  for (size_t n = 1; n <= 512; ++n) {
    auto frames = rig.Frames(n, 64 + n % 7);
    rig.qp->posted.clear();
    const unsigned posts = rig.qp->post_calls;
    ASSERT_EQ(rig.tx->Xmit(frames), n);
    ASSERT_EQ(rig.qp->post_calls, posts + 1) << "one ibv_post_send per batch, n " << n;
    ASSERT_EQ(rig.qp->posted.size(), n);
    for (size_t i = 0; i < n; ++i) {
      const auto& p = rig.qp->posted[i];
      ASSERT_EQ(p.last_in_chain, i + 1 == n) << "the chain is linked through next, n " << n;
      ASSERT_EQ(p.sges.size(), 2u);
      // The IPoIB header from the registered array (its bytes checked as the HCA reads them).
      EXPECT_EQ(p.sges[0].length, kIpoibHeaderBytes);
      EXPECT_EQ(p.sges[0].lkey, rig.qp->LkeyFor(reinterpret_cast<void*>(p.sges[0].addr)));
      // The IP packet in place in its mbuf: no copy.
      const auto* data = rte_pktmbuf_mtod(frames[i], const uint8_t*);
      EXPECT_EQ(p.sges[1].addr, reinterpret_cast<uintptr_t>(data + kEthHeaderBytes));
      EXPECT_EQ(p.sges[1].length, rte_pktmbuf_data_len(frames[i]) - kEthHeaderBytes);
      EXPECT_EQ(p.sges[1].lkey, rig.qp->LkeyFor(data));
      EXPECT_NE(p.sges[1].lkey, 0u);
      const bool signal = ++since >= 16 || i + 1 == n;
      if (signal) since = 0;
      ASSERT_EQ((p.flags & IBV_SEND_SIGNALED) != 0, signal) << "n " << n << " request " << i;
    }
    rig.qp->Finish();
    // What the HCA read: the frame's EtherType and 2 reserved bytes, then the IP packet.
    for (size_t i = 0; i < n; ++i) {
      const auto& bytes = rig.qp->posted[i].bytes;
      const auto* data = rte_pktmbuf_mtod(frames[i], const uint8_t*);
      ASSERT_EQ(bytes.size(), kIpoibHeaderBytes + rte_pktmbuf_data_len(frames[i]) - 14u);
      EXPECT_EQ(std::vector<uint8_t>(bytes.begin(), bytes.begin() + 4),
                (std::vector<uint8_t>{0x08, 0x00, 0x00, 0x00}));
      EXPECT_EQ(std::memcmp(bytes.data() + 4, data + kEthHeaderBytes, bytes.size() - 4), 0);
    }
    EXPECT_EQ(rig.tx->Complete(Now()), n);
    EXPECT_EQ(rig.tx->InFlight(), 0u);
  }
  EXPECT_EQ(rig.qp->violations, 0u);
  EXPECT_EQ(rig.tx->counters().doorbells.Get(), 512u);
}

// Streams frames in random batches while the "HCA" completes random amounts: the send queue
// never fills without a signalled request in it, every frame is reclaimed exactly once.
class SignalPlacement : public ::testing::TestWithParam<std::pair<unsigned, unsigned>> {};

TEST_P(SignalPlacement, TheQueueNeverFillsWithNothingToReclaimIt) {
  const auto [sq_depth, signal_every] = GetParam();
  Rig rig(sq_depth, signal_every);
  ASSERT_TRUE(rig.init);
  std::mt19937 rng(sq_depth * 31 + signal_every);
  uint64_t sent = 0;
  for (int round = 0; round < 400; ++round) {
    auto frames = rig.Frames(1 + rng() % std::min(64u, sq_depth));
    const uint16_t took = rig.tx->Xmit(frames);
    sent += took;
    if (took < frames.size()) {
      EXPECT_TRUE(rig.tx->Stopped());
      FreeAll(std::span(frames).subspan(took));  // the caller's: a qdisc would requeue them
    }
    rig.qp->Finish(rng() % (sq_depth + 1));
    (void)rig.tx->Complete(Now());
  }
  rig.qp->Finish();
  (void)rig.tx->Complete(Now());
  EXPECT_EQ(rig.tx->InFlight(), 0u);
  EXPECT_EQ(rig.qp->violations, 0u);
  EXPECT_EQ(rig.tx->verbs_counters().work_requests.Get(), sent);
  EXPECT_GE(rig.tx->verbs_counters().signalled.Get(), sent / signal_every);
}

INSTANTIATE_TEST_SUITE_P(DepthsAndIntervals, SignalPlacement,
                         ::testing::Values(std::pair{16u, 1u}, std::pair{16u, 16u},
                                           std::pair{64u, 16u}, std::pair{100u, 7u},
                                           std::pair{512u, 64u}));

TEST(VerbsTx, ReclaimAcrossTheSendQueuesWrapAround) {
  Rig rig(16, 4);
  ASSERT_TRUE(rig.init);
  for (int round = 0; round < 200; ++round) {
    auto frames = rig.Frames(5);
    const uint16_t took = rig.tx->Xmit(frames);
    FreeAll(std::span(frames).subspan(took));
    EXPECT_EQ(rig.tx->FreeSlots() + rig.tx->InFlight(), 16u);
    rig.qp->Finish(3);  // the HCA lags: slots wrap with requests in flight
    (void)rig.tx->Complete(Now());
    // Requests the HCA finished after the last signalled one are still the driver's until a
    // later signal comes: fewer than signal_every of them.
    EXPECT_GE(rig.tx->InFlight(), rig.qp->outstanding()) << "round " << round;
    EXPECT_LT(rig.tx->InFlight() - rig.qp->outstanding(), 4u) << "round " << round;
  }
  rig.qp->Finish();
  (void)rig.tx->Complete(Now());
  EXPECT_EQ(rig.tx->InFlight(), 0u);
  EXPECT_FALSE(rig.tx->Stopped());
}

TEST(VerbsTx, APartialPostReturnsTheAcceptedPrefixAtEveryPosition) {
  for (unsigned pos = 0; pos < 8; ++pos) {
    Rig rig(64, 16);
    ASSERT_TRUE(rig.init);
    auto frames = rig.FramesFailingAt(pos, ENOMEM);
    const uint16_t took = rig.tx->Xmit(frames);
    EXPECT_EQ(took, pos);
    EXPECT_TRUE(rig.tx->Stopped()) << "fewer accepted than offered: stopped until completions";
    EXPECT_EQ(rig.tx->InFlight(), pos);
    // The rest is the caller's, untouched: posted again later, unchanged.
    auto rest = std::vector<rte_mbuf*>(frames.begin() + took, frames.end());
    rig.qp->Finish();
    (void)rig.tx->Complete(Now());
    EXPECT_FALSE(rig.tx->Stopped());
    EXPECT_EQ(rig.tx->Xmit(rest), rest.size());
    rig.qp->Finish();
    const auto& last = rig.qp->posted.back();
    EXPECT_EQ(std::vector<uint8_t>(last.bytes.begin(), last.bytes.begin() + 4),
              (std::vector<uint8_t>{0x08, 0x00, 0x00, 0x00}));
    (void)rig.tx->Complete(Now());
    EXPECT_EQ(rig.tx->InFlight(), 0u) << "position " << pos;
    EXPECT_EQ(rig.qp->violations, 0u);
  }
}

// A refusal of requests built within the QP's limits means a broken QP: what it refused is
// dropped and counted, the QP flushed, and from then on frames are dropped, counted, never
// stuck (the run drains and its books close). One post per call throughout.
TEST(VerbsTx, AQueuePairThatRefusesAPostIsBrokenAndEverythingAfterIsDroppedCounted) {
  for (unsigned pos = 0; pos < 8; ++pos) {
    Rig rig(64, 16);
    ASSERT_TRUE(rig.init);
    auto frames = rig.FramesFailingAt(pos, EINVAL);
    EXPECT_EQ(rig.tx->Xmit(frames), 8u);
    EXPECT_FALSE(rig.tx->Stopped());
    EXPECT_TRUE(rig.tx->broken());
    EXPECT_EQ(rig.qp->post_calls, 1u);
    EXPECT_EQ(rig.tx->verbs_counters().post_errors.Get(), 8u - pos);
    auto more = rig.Frames(5);
    EXPECT_EQ(rig.tx->Xmit(more), 5u);
    EXPECT_EQ(rig.tx->verbs_counters().dropped_broken.Get(), 5u);
    EXPECT_EQ(rig.qp->post_calls, 1u) << "nothing posted to a broken QP";
    (void)rig.tx->Complete(Now());  // the flushed requests come back
    EXPECT_EQ(rig.tx->InFlight(), 0u) << "position " << pos;
    EXPECT_EQ(rig.tx->verbs_counters().wc_errors[IBV_WC_WR_FLUSH_ERR].Get(), pos);
  }
}

TEST(VerbsTx, CompletionErrorsAreCountedByStatusAndTheirFramesFreed) {
  Rig rig(64, 16);
  ASSERT_TRUE(rig.init);
  auto frames = rig.Frames(10);
  std::vector<rte_mbuf*> first(frames.begin(), frames.begin() + 4);
  std::vector<rte_mbuf*> second(frames.begin() + 4, frames.end());
  ASSERT_EQ(rig.tx->Xmit(first), 4u);
  rig.qp->error_next = IBV_WC_LOC_QP_OP_ERR;  // the first of the second batch (unsignalled)
  ASSERT_EQ(rig.tx->Xmit(second), 6u);
  rig.qp->Finish();
  (void)rig.tx->Complete(Now());
  // The failed one, and the 5 behind it flushed by the QP's Send Queue Error state.
  EXPECT_EQ(rig.tx->verbs_counters().wc_errors[IBV_WC_LOC_QP_OP_ERR].Get(), 1u);
  EXPECT_EQ(rig.tx->verbs_counters().wc_errors[IBV_WC_WR_FLUSH_ERR].Get(), 5u);
  EXPECT_EQ(rig.tx->InFlight(), 0u);
  EXPECT_EQ(rig.tx->verbs_counters().recoveries.Get(), 1u) << "SQE -> RTS once all came back";
  // And it sends again.
  auto again = rig.Frames(3);
  ASSERT_EQ(rig.tx->Xmit(again), 3u);
  rig.qp->Finish();
  (void)rig.tx->Complete(Now());
  EXPECT_EQ(rig.tx->InFlight(), 0u);
  EXPECT_EQ(rig.qp->violations, 0u) << "nothing posted while in SQE";
  // As the results record them (results.driver_counters).
  const auto c = rig.tx->ExtraCounters();
  std::string key = std::string("wc_") + ibv_wc_status_str(IBV_WC_LOC_QP_OP_ERR);
  std::replace(key.begin(), key.end(), ' ', '_');
  EXPECT_EQ(c.at(key), 1u);
  EXPECT_EQ(c.at("work_requests"), 13u);
  EXPECT_EQ(c.at("posts"), 3u);
}

TEST(VerbsTx, AnMtuOverThePortsIsRefusedAndAnOversizeFrameCompletesWithALengthError) {
  {
    Rig rig(64, 16, 0, 2045);  // IPoIB MTU 2044 on a 2048 port
    ASSERT_FALSE(rig.init);
    EXPECT_NE(rig.init.error().message.find("--mtu 2045"), std::string::npos);
    EXPECT_NE(rig.init.error().message.find("valid: --mtu 68..2044"), std::string::npos)
        << rig.init.error().message;
  }
  // A port whose IPoIB MTU is exactly --mtu, and a frame over it (producers never build one).
  Rig rig(64, 16, 0, 1500, /*ipoib_mtu=*/1500);
  ASSERT_TRUE(rig.init);
  auto frames = rig.Frames(1, 1480);  // IP packet 1508 > 1500
  ASSERT_EQ(rig.tx->Xmit(frames), 1u);
  rig.qp->Finish();
  (void)rig.tx->Complete(Now());
  EXPECT_EQ(rig.tx->verbs_counters().wc_errors[IBV_WC_LOC_LEN_ERR].Get(), 1u);
}

TEST(VerbsTx, SmallFramesGoInlineAndTheirMbufsAreFreedAtPost) {
  Rig rig(64, 16, /*inline_max=*/128);
  ASSERT_TRUE(rig.init);
  const unsigned avail = rte_mempool_avail_count(Pool());
  auto frames = rig.Frames(8, 40);  // 14 + 20 + 8 + 40 = 82 bytes; 4 + 68 inline
  auto big = rig.Frames(2, 400);
  ASSERT_EQ(rte_mempool_avail_count(Pool()), avail - 10);
  ASSERT_EQ(rig.tx->Xmit(frames), 8u);
  ASSERT_EQ(rig.tx->Xmit(big), 2u);
  EXPECT_EQ(rig.tx->verbs_counters().inline_sends.Get(), 8u);
  EXPECT_EQ(rte_mempool_avail_count(Pool()), avail - 2) << "inline frames freed at post";
  EXPECT_EQ(rig.tx->InFlight(), 10u) << "their send-queue slots stay taken until completion";
  rig.qp->Finish();
  (void)rig.tx->Complete(Now());
  EXPECT_EQ(rig.tx->InFlight(), 0u);
}

TEST(VerbsTx, AReceivedDatagramReachesTheSinkAsTheFrameItWas) {
  Rig rig(64, 16);
  ASSERT_TRUE(rig.init);
  EXPECT_EQ(rig.qp->recv_posted(), 16u);
  // What a peer's driver posts: IPoIB header + IP packet of a txbatch frame.
  auto frames = rig.Frames(3, 100, /*flow=*/2);
  DeliverAsPeer(rig, frames);
  (void)rig.tx->Complete(Now());
  const SinkCounts c = rig.sink.counts();
  EXPECT_EQ(c.received, 3u);
  EXPECT_EQ(c.foreign, 0u);
  EXPECT_EQ(c.lost, 0u);
  EXPECT_EQ(rig.tx->verbs_counters().recv_completions.Get(), 3u);
  EXPECT_EQ(rig.qp->recv_posted(), 16u) << "receive buffers posted again";
}

TEST(VerbsTx, ReceiveBuffersHoldAFullDatagramOfThePortsMtuWhateverTheSendersMtu) {
  Rig rig(64, 16, 0, /*mtu=*/1500, /*ipoib_mtu=*/4092);
  ASSERT_TRUE(rig.init);
  std::vector<uint8_t> dgram(kIpoibHeaderBytes + 4092, 0);
  dgram[0] = 0x08;
  ASSERT_TRUE(rig.qp->Deliver(dgram));
  (void)rig.tx->Complete(Now());
  EXPECT_EQ(rig.tx->verbs_counters().recv_completions.Get(), 1u);
  EXPECT_EQ(rig.tx->verbs_counters().recv_errors.Get(), 0u);
  EXPECT_EQ(rig.sink.counts().foreign, 1u);  // not a txbatch frame: counted, not crashed on
}

TEST(VerbsTx, PurgeFlushesTheQueuePairAndFreesEverything) {
  Rig rig(64, 16);
  ASSERT_TRUE(rig.init);
  auto frames = rig.Frames(20);
  ASSERT_EQ(rig.tx->Xmit(frames), 20u);
  EXPECT_EQ(rig.tx->Purge(), 20u);
  EXPECT_EQ(rig.tx->InFlight(), 0u);
  EXPECT_EQ(rig.tx->verbs_counters().wc_errors[IBV_WC_WR_FLUSH_ERR].Get(), 20u);
}

// `sink --port verbs:… --json`: the record names the verbs receiver as the sink's header line
// does — its spec and the QP senders name — where it once read an ethdev port that a verbs sink
// does not have (an empty std::optional: undefined behaviour). Opening a real receiver needs an
// HCA; the record is built from what the command holds after the run, here a fake QP's.
TEST(VerbsSink, TheJsonRecordOfAVerbsPortNamesItsReceiver) {
  Rig rig(64, 16);
  ASSERT_TRUE(rig.init);
  const VerbsReceiver& receiver = *rig.tx;
  const std::string port = receiver.Describe();
  ASSERT_TRUE(port.starts_with("verbs:fake0:1,")) << port;
  SinkOutcome o;
  o.counts.received = 3;
  o.counts.window_payload_bytes = 300;
  o.active_s = 0.5;
  const nlohmann::json doc = SinkRecord(port, 4, std::nullopt, o);
  EXPECT_EQ(doc["kind"], "sink");
  EXPECT_EQ(doc["port"], port);
  EXPECT_EQ(doc["flows"], 4);
  EXPECT_TRUE(doc["link"].is_null());
  const nlohmann::json& r = doc["results"];
  EXPECT_EQ(r["received"], 3);
  EXPECT_EQ(r["payload_bytes"], 300);
  EXPECT_DOUBLE_EQ(r["mpps"].get<double>(), 3 / 0.5 / 1e6);
  EXPECT_TRUE(r["link_lost"].is_null());
  EXPECT_TRUE(r["latency_ns"].is_null());
}

// RoCE v2 (issue 17, part 3): the port's facts are the fake's (RocePort: rxe's GID layout).
VerbsOptions RoceOptions(const char* gid) {
  VerbsOptions o = Options(512, 16);
  o.device = "rxe0";
  o.lid.reset();
  std::array<uint8_t, 16> g{};
  EXPECT_EQ(inet_pton(AF_INET6, gid, g.data()), 1) << gid;
  o.gid = g;
  return o;
}

std::array<uint8_t, 16> Raw(const ibv_gid& g) {
  std::array<uint8_t, 16> a;
  std::memcpy(a.data(), g.raw, 16);
  return a;
}

TEST(VerbsRoce, APeerOnARocePortIsAddressedByItsGidAndASenderWithoutOneIsOneSentence) {
  VerbsOptions o = Options(512, 16);  // lid=3, no gid: an InfiniBand peer
  o.device = "rxe0";
  auto plan = PlanPort(o, RocePort());
  ASSERT_FALSE(plan);
  const std::string& m = plan.error().message;
  EXPECT_NE(m.find("rxe0 port 1 is RoCE (an Ethernet link layer)"), std::string::npos) << m;
  EXPECT_NE(m.find("has no gid="), std::string::npos) << m;
  EXPECT_NE(m.find("valid: gid="), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos);
  // On InfiniBand the LID stays required (the parser lets a gid= stand in for it: it cannot
  // know the link layer), and a routed IB peer keeps sgid_index 0 by default.
  VerbsOptions ib = RoceOptions("fe80::2:c903:1:1b2d");
  auto no_lid = PlanPort(ib, IbPort());
  ASSERT_FALSE(no_lid);
  EXPECT_NE(no_lid.error().message.find("is InfiniBand and driver"), std::string::npos);
  EXPECT_NE(no_lid.error().message.find("has no lid="), std::string::npos);
  ib.lid = 9;
  auto routed = PlanPort(ib, IbPort());
  ASSERT_TRUE(routed) << routed.error().message;
  EXPECT_EQ(routed->link_layer, LinkLayer::kInfiniband);
  EXPECT_EQ(routed->ah.dlid, 9);
  EXPECT_EQ(routed->ah.is_global, 1);
  EXPECT_EQ(routed->ah.grh.sgid_index, 0);
  EXPECT_EQ(routed->wire_overhead, 34u + 40u);
}

TEST(VerbsRoce, TheAddressIsGlobalFromTheFirstRoceV2GidOfThePeersFamilyAndLidIsIgnored) {
  for (const auto& [peer, want_index, want_sgid] :
       {std::tuple{"::ffff:10.0.0.2", 3, "::ffff:10.0.0.1"}, std::tuple{"fe80::2", 1, "fe80::1"}}) {
    VerbsOptions o = RoceOptions(peer);
    o.lid = 5;  // ignored: Ethernet has no LIDs
    o.hop_limit = 7;
    o.sl = 2;
    auto plan = PlanPort(o, RocePort());
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_EQ(plan->link_layer, LinkLayer::kRoceV2);
    EXPECT_TRUE(plan->has_peer);
    EXPECT_EQ(plan->ah.is_global, 1) << peer;
    EXPECT_EQ(Raw(plan->ah.grh.dgid), *o.gid) << peer;
    EXPECT_EQ(plan->ah.grh.sgid_index, want_index) << peer;
    EXPECT_EQ(plan->sgid_index, static_cast<unsigned>(want_index));
    EXPECT_EQ(GidText(plan->sgid), want_sgid);
    EXPECT_EQ(plan->ah.grh.hop_limit, 7);
    EXPECT_EQ(plan->ah.sl, 2);
    EXPECT_EQ(plan->ah.port_num, 1);
    EXPECT_EQ(plan->ah.dlid, 0) << "lid= is ignored on RoCE";
    EXPECT_EQ(plan->ipoib_mtu, 1020u) << "active MTU 1024 less the 4-byte header";
  }
  // Through the fake: the address handle the driver's requests carry is built the same way.
  auto q = FakeUdQueuePair::OnPort(RoceOptions("::ffff:10.0.0.2"), RocePort(), 64, 16);
  ASSERT_TRUE(q) << q.error().message;
  EXPECT_EQ((*q)->ah_attr.is_global, 1);
  EXPECT_EQ((*q)->ah_attr.grh.sgid_index, 3);
  EXPECT_EQ((*q)->info().link_layer, LinkLayer::kRoceV2);
  EXPECT_EQ((*q)->info().describe,
            "rxe0 port 1 (RoCE v2, GID 3 ::ffff:10.0.0.1, active MTU 1024), QP 0x1234");
}

TEST(VerbsRoce, AnSgidIndexMustNameARoceV2GidOfThePeersFamily) {
  const std::pair<unsigned, const char*> bad[] = {
      {0, "it is RoCE v1"},         // fe80::1 v1
      {2, "it is RoCE v1"},         // ::ffff:10.0.0.1 v1
      {4, "an empty slot"},         //
      {200, "an empty slot"},       // past the table
      {1, "of another IP family"},  // fe80::1 v2 for an IPv4 peer
  };
  for (const auto& [index, why] : bad) {
    VerbsOptions o = RoceOptions("::ffff:10.0.0.2");
    o.sgid_index = index;
    auto plan = PlanPort(o, RocePort());
    ASSERT_FALSE(plan) << index;
    const std::string& m = plan.error().message;
    EXPECT_NE(m.find(why), std::string::npos) << index << ": " << m;
    EXPECT_NE(m.find("1 (fe80::1), 3 (::ffff:10.0.0.1)"), std::string::npos) << m;
    EXPECT_EQ(m.find('\n'), std::string::npos);
  }
  VerbsOptions o = RoceOptions("::ffff:10.0.0.2");
  o.sgid_index = 3;
  auto plan = PlanPort(o, RocePort());
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->ah.grh.sgid_index, 3);
  // A port with RoCE v1 GIDs only (or none of the peer's family): refused, naming what to check.
  PortFacts v1 = RocePort();
  v1.gids[1].reset();
  v1.gids[3].reset();
  auto none = PlanPort(RoceOptions("fe80::2"), v1);
  ASSERT_FALSE(none);
  EXPECT_NE(none.error().message.find("has no RoCE v2 GID of the peer's IP family (IPv6)"),
            std::string::npos)
      << none.error().message;
  EXPECT_NE(none.error().message.find("its RoCE v2 GIDs: none"), std::string::npos);
  PortFacts v4only = RocePort();
  v4only.gids[1].reset();
  EXPECT_FALSE(PlanPort(RoceOptions("fe80::2"), v4only));
  EXPECT_TRUE(PlanPort(RoceOptions("::ffff:10.0.0.9"), v4only));
  // A port that is down says what to check on Ethernet.
  PortFacts down = RocePort();
  down.state = IBV_PORT_DOWN;
  auto d = PlanPort(RoceOptions("fe80::2"), down);
  ASSERT_FALSE(d);
  EXPECT_NE(d.error().message.find("netdev is up with a carrier"), std::string::npos);
}

TEST(VerbsRoce, ThePayloadMtuIsThePortsActiveMtuLessTheHeader) {
  {
    auto q = FakeUdQueuePair::OnPort(RoceOptions("::ffff:10.0.0.2"), RocePort(), 64, 16);
    ASSERT_TRUE(q);
    Rig rig(std::move(*q), RoceOptions("::ffff:10.0.0.2"), /*mtu=*/1500);
    ASSERT_FALSE(rig.init);
    EXPECT_NE(rig.init.error().message.find("valid: --mtu 68..1020"), std::string::npos)
        << rig.init.error().message;
  }
  auto q = FakeUdQueuePair::OnPort(RoceOptions("::ffff:10.0.0.2"), RocePort(), 64, 16);
  ASSERT_TRUE(q);
  Rig rig(std::move(*q), RoceOptions("::ffff:10.0.0.2"), /*mtu=*/1020);
  EXPECT_TRUE(rig.init) << rig.init.error().message;
}

// One frame's wire bytes, written out: the UD payload (IPoIB header 4 + the IP packet) inside
// Ethernet 14 + IPv4 20 (IPv6 40) + UDP 8 + BTH 12 + DETH 8, then ICRC 4, FCS 4, preamble and SFD
// 8, inter-frame gap 12; on InfiniBand LRH 8 + BTH 12 + DETH 8 + ICRC 4 + VCRC 2.
TEST(VerbsRoce, OneFramesWireBytesAreRoceV2s) {
  const auto wire_of_one = [](std::unique_ptr<FakeUdQueuePair> q, const VerbsOptions& o,
                              unsigned mtu) -> uint64_t {
    Rig rig(std::move(q), o, mtu);
    EXPECT_TRUE(rig.init) << rig.init.error().message;
    rig.window.start.store(0);
    auto frames = rig.Frames(1, 100);
    const unsigned len = rte_pktmbuf_data_len(frames[0]);
    EXPECT_EQ(len, 14u + 20 + 8 + 100);
    EXPECT_EQ(rig.tx->Xmit(frames), 1u);
    rig.qp->Finish();
    (void)rig.tx->Complete(Now());
    EXPECT_EQ(rig.tx->counters().window_frames.Get(), 1u);
    return rig.tx->counters().window_wire_bytes.Get();
  };
  const unsigned payload = 4 + (14 + 20 + 8 + 100) - 14;  // IPoIB header + IP packet
  auto v4 = FakeUdQueuePair::OnPort(RoceOptions("::ffff:10.0.0.2"), RocePort(), 64, 16);
  ASSERT_TRUE(v4);
  EXPECT_EQ(wire_of_one(std::move(*v4), RoceOptions("::ffff:10.0.0.2"), 1020),
            14 + 20 + 8 + 12 + 8 + payload + 4 + 4 + 8 + 12);
  auto v6 = FakeUdQueuePair::OnPort(RoceOptions("fe80::2"), RocePort(), 64, 16);
  ASSERT_TRUE(v6);
  EXPECT_EQ(wire_of_one(std::move(*v6), RoceOptions("fe80::2"), 1020),
            14 + 40 + 8 + 12 + 8 + payload + 4 + 4 + 8 + 12);
  auto ib = FakeUdQueuePair::OnPort(Options(64, 16), IbPort(), 64, 16);
  ASSERT_TRUE(ib);
  EXPECT_EQ(wire_of_one(std::move(*ib), Options(64, 16), 1500), 8 + 12 + 8 + payload + 4 + 2);
}

TEST(VerbsRoce, ADatagramBehindTheGrhSlotReachesTheSinkAndTheModeIsNamed) {
  auto q = FakeUdQueuePair::OnPort(RoceOptions("::ffff:10.0.0.2"), RocePort(), 64, 16);
  ASSERT_TRUE(q);
  Rig rig(std::move(*q), RoceOptions("::ffff:10.0.0.2"), 1020);
  ASSERT_TRUE(rig.init);
  EXPECT_EQ(rig.tx->link_layer(), "roce_v2");
  EXPECT_NE(rig.tx->Describe().find("(rxe0 port 1 (RoCE v2, GID 3 ::ffff:10.0.0.1"),
            std::string::npos)
      << rig.tx->Describe();
  auto frames = rig.Frames(3, 100, /*flow=*/1);
  DeliverAsPeer(rig, frames);
  (void)rig.tx->Complete(Now());
  EXPECT_EQ(rig.sink.counts().received, 3u);
  EXPECT_EQ(rig.sink.counts().foreign, 0u);
  Rig ib(64, 16);
  EXPECT_EQ(ib.tx->link_layer(), "ib");
}

// `sink --port verbs:…`: the banner and the record name the receiver by what is real — its port
// and its own QP, with the keys a sender gives — where they once showed qpn=0x1 and lid=1, a
// peer the parser made up for an address handle the receiver never used.
TEST(VerbsSink, AReceiverNamesItsOwnQpAndNoMadeUpPeer) {
  for (const bool roce : {false, true}) {
    auto o = ParseVerbsSpec(roce ? "verbs:rxe0:1,qkey=0x11111111" : "verbs:fake0:1,qkey=0x11111111",
                            /*peer_required=*/false);
    ASSERT_TRUE(o) << o.error().message;
    EXPECT_EQ(o->qpn, 0u);
    EXPECT_FALSE(o->lid);
    auto q = FakeUdQueuePair::OnPort(*o, roce ? RocePort() : IbPort(), 64, 16);
    ASSERT_TRUE(q) << q.error().message;
    EXPECT_EQ((*q)->info().ah, nullptr) << "a receiver has no address handle";
    Rig rig(std::move(*q), *o, roce ? 1020 : 1500);
    ASSERT_TRUE(rig.init) << rig.init.error().message;
    const std::string port = static_cast<const VerbsReceiver&>(*rig.tx).Describe();
    EXPECT_EQ(port.find("qpn=0x1,"), std::string::npos) << port;
    EXPECT_EQ(port.find("lid=1,"), std::string::npos) << port;
    EXPECT_NE(port.find(roce ? "; senders give qpn=0x1234,qkey=0x11111111,gid=fe80::1)"
                             : "; senders give qpn=0x1234,qkey=0x11111111,lid=7)"),
              std::string::npos)
        << port;
    const nlohmann::json doc = SinkRecord(port, 1, std::nullopt, SinkOutcome{});
    EXPECT_EQ(doc["port"], port);
    EXPECT_TRUE(doc["port"].get<std::string>().starts_with(
        roce ? "verbs:rxe0:1,qkey=0x11111111," : "verbs:fake0:1,qkey=0x11111111,"));
  }
}

TEST(VerbsDevice, WithoutAnHcaOpeningSaysSoInOneSentence) {
  VerbsOptions o = Options(512, 16);
  o.device = "txbatch_no_such_hca";
  auto qp = OpenUdQueuePair(o);
  ASSERT_FALSE(qp);
  EXPECT_EQ(qp.error().err, ENODEV);
  // Here (no RDMA in the kernel) there is no device at all; on a machine with HCAs, not this one.
  const std::string& m = qp.error().message;
  EXPECT_TRUE(m.find("no RDMA device found") != std::string::npos ||
              m.find("'txbatch_no_such_hca' was not found") != std::string::npos)
      << m;
}

}  // namespace
}  // namespace txbatch::verbs::test
