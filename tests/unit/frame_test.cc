#include "dataplane/frame.h"

#include <gtest/gtest.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_tcp.h>

#include <vector>

#include "dataplane/workload.h"
#include "tests/unit/test_eal.h"

namespace txbatch {
namespace {

struct MbufGuard {
  rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
  ~MbufGuard() { rte_pktmbuf_free(m); }
};

TEST(Frame, SmallestUdpFrameIs60BytesAndRoundTrips) {
  MbufGuard g;
  FrameBuilder b(Proto::kUdp, 7);
  b.Build(g.m, kTxbatchHeaderBytes, 123456789);
  EXPECT_EQ(rte_pktmbuf_pkt_len(g.m), 60u);  // 14 + 20 + 8 + 18: a minimum frame without pad
  EXPECT_EQ(PayloadBytes(g.m), kTxbatchHeaderBytes);
  const ParsedFrame f = ParseFrame(g.m);
  ASSERT_EQ(f.status, ParseStatus::kOk);
  EXPECT_EQ(f.proto, Proto::kUdp);
  EXPECT_EQ(f.flow, 7);
  EXPECT_EQ(f.seq, 0u);
  EXPECT_EQ(f.tx_tsc, 123456789u);
  EXPECT_EQ(f.payload, kTxbatchHeaderBytes);
}

TEST(Frame, ChecksumsAreValidForEveryIpIdAndSize) {
  // The IP checksum is updated per frame from the template's sum (RFC 1624): check it across
  // the whole 16-bit id space (and its wrap), for both protocols and a change of size; the TCP
  // pseudo-header sum (TX offload style) must match DPDK's for the header as built.
  MbufGuard g;
  for (Proto proto : {Proto::kUdp, Proto::kTcp}) {
    FrameBuilder b(proto, 0);
    unsigned bad = 0, bad_phdr = 0;
    for (unsigned i = 0; i < 70000; ++i) {
      b.Build(g.m, i < 35000 ? 100 : 1000, i);
      auto* ip = rte_pktmbuf_mtod_offset(g.m, rte_ipv4_hdr*, kEthHeaderBytes);
      if (rte_ipv4_cksum(ip) != 0) ++bad;  // a header with a valid checksum folds to 0
      if (proto == Proto::kTcp) {
        auto* tcp = reinterpret_cast<rte_tcp_hdr*>(ip + 1);
        if (tcp->cksum != rte_ipv4_phdr_cksum(ip, g.m->ol_flags)) ++bad_phdr;
      }
    }
    EXPECT_EQ(bad, 0u) << ProtoName(proto);
    EXPECT_EQ(bad_phdr, 0u) << ProtoName(proto);
  }
}

TEST(Frame, TcpSegmentsAdvanceSequenceLikeAStream) {
  FrameBuilder b(Proto::kTcp, 3);
  uint32_t prev_seq = 0;
  for (uint64_t i = 0; i < 3; ++i) {
    MbufGuard g;
    b.Build(g.m, 1448, 1000 + i);
    EXPECT_EQ(rte_pktmbuf_pkt_len(g.m), 1514u);  // full MSS at MTU 1500 with timestamps
    auto* tcp = rte_pktmbuf_mtod_offset(g.m, rte_tcp_hdr*, kEthHeaderBytes + kIpv4HeaderBytes);
    const uint32_t seq = rte_be_to_cpu_32(tcp->sent_seq);
    if (i > 0) {
      EXPECT_EQ(seq - prev_seq, 1448u);
    }
    prev_seq = seq;
    EXPECT_EQ(tcp->data_off >> 4, 8);  // 32-byte header: NOP NOP TS
    const ParsedFrame f = ParseFrame(g.m);
    ASSERT_EQ(f.status, ParseStatus::kOk);
    EXPECT_EQ(f.proto, Proto::kTcp);
    EXPECT_EQ(f.seq, i);
    EXPECT_EQ(f.payload, 1448u);
  }
}

TEST(Frame, ForeignAndBrokenFramesAreClassified) {
  MbufGuard g;
  FrameBuilder b(Proto::kUdp, 0);
  b.Build(g.m, 64, 1);
  auto* p = rte_pktmbuf_mtod(g.m, uint8_t*);
  const size_t len = rte_pktmbuf_data_len(g.m);
  std::vector<uint8_t> copy(p, p + len);

  EXPECT_EQ(ParseFrame(copy.data(), 10).status, ParseStatus::kTruncated);
  EXPECT_EQ(ParseFrame(copy.data(), len - 1).status, ParseStatus::kTruncated);

  auto arp = copy;
  arp[12] = 0x08;
  arp[13] = 0x06;
  EXPECT_EQ(ParseFrame(arp.data(), len).status, ParseStatus::kNotIpv4);

  auto icmp = copy;
  icmp[kEthHeaderBytes + 9] = IPPROTO_ICMP;
  EXPECT_EQ(ParseFrame(icmp.data(), len).status, ParseStatus::kNotUdpOrTcp);

  auto magic = copy;
  magic[kEthHeaderBytes + kIpv4HeaderBytes + kUdpHeaderBytes] ^= 0xff;
  EXPECT_EQ(ParseFrame(magic.data(), len).status, ParseStatus::kNotTxbatch);
}

// --latency-sample N stamps one frame in each block of N, block j's at offset j mod N: exactly
// 1/N of the frames, and over N blocks every offset once — so a batch of any size dividing N
// has each of its positions sampled. N = 1 stamps every frame; 0 is read as 1.
TEST(LatencySampler, OneFrameABlockAtEachOffsetInTurn) {
  for (const unsigned n : {1u, 2u, 7u, 64u}) {
    SCOPED_TRACE(n);
    LatencySampler s(n);
    std::vector<unsigned> offsets;  // of each block's stamped frame
    const unsigned blocks = 3 * n;
    for (unsigned j = 0; j < blocks; ++j) {
      unsigned stamped = 0;
      for (unsigned k = 0; k < n; ++k)
        if (s.Next()) {
          ++stamped;
          offsets.push_back(k);
        }
      ASSERT_EQ(stamped, 1u) << "block " << j;
    }
    for (unsigned j = 0; j < blocks; ++j) EXPECT_EQ(offsets[j], j % n) << "block " << j;
  }
  LatencySampler zero(0);
  EXPECT_TRUE(zero.Next());
  EXPECT_TRUE(zero.Next());
}

TEST(Segmenter, TcpCutsOneStreamIntoFullSegments) {
  Segmenter s(Proto::kTcp, 4096, 1500);
  std::vector<unsigned> out;
  const auto emit = [&](unsigned n) { out.push_back(n); };
  s.Write(emit);  // 4096 = 2 x 1448 + 1200 corked
  EXPECT_EQ(out, (std::vector<unsigned>{1448, 1448}));
  s.Write(emit);  // 1200 + 4096 = 3 x 1448 + 952
  EXPECT_EQ(out.size(), 5u);
  s.Flush(emit);
  EXPECT_EQ(out.back(), 952u);
  unsigned total = 0;
  for (unsigned n : out) total += n;
  EXPECT_EQ(total, 8192u);
}

TEST(Segmenter, UdpSendsADatagramPerWriteAndSplitsAtMtuMinus28) {
  std::vector<unsigned> out;
  const auto emit = [&](unsigned n) { out.push_back(n); };
  Segmenter small(Proto::kUdp, 64, 1500);
  small.Write(emit);
  EXPECT_EQ(out, (std::vector<unsigned>{64}));
  out.clear();
  Segmenter big(Proto::kUdp, 4096, 1500);
  big.Write(emit);
  EXPECT_EQ(out, (std::vector<unsigned>{1472, 1472, 1152}));
  out.clear();
  Segmenter edge(Proto::kUdp, 1480, 1500);  // the remainder would be 8 < header: rebalance
  edge.Write(emit);
  EXPECT_EQ(out, (std::vector<unsigned>{1462, 18}));
}

TEST(Frame, UnbuildGivesTheSequenceBack) {
  FrameBuilder b(Proto::kTcp, 1);
  rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
  b.Build(m, 1000, 1);
  b.Unbuild(1000);  // dropped before the wire
  b.Build(m, 500, 2);
  const ParsedFrame f = ParseFrame(m);
  EXPECT_EQ(f.seq, 0u);
  auto* tcp = rte_pktmbuf_mtod_offset(m, rte_tcp_hdr*, kEthHeaderBytes + kIpv4HeaderBytes);
  EXPECT_EQ(rte_be_to_cpu_32(tcp->sent_seq), 1u);
  rte_pktmbuf_free(m);
}

}  // namespace
}  // namespace txbatch
