#include "dataplane/frame.h"

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_tcp.h>
#include <rte_udp.h>

#include <algorithm>
#include <cstring>

#include "base/enum_names.h"

namespace txbatch {
namespace {

// RFC 2544 benchmarking addresses: frames that leak anywhere are recognisably test traffic.
constexpr rte_ether_addr kSrcMac = kTxbatchSrcMac;
constexpr rte_ether_addr kDstMac = kTxbatchDstMac;
constexpr uint32_t kSrcIp = RTE_IPV4(198, 18, 0, 1);
constexpr uint32_t kDstIp = RTE_IPV4(198, 18, 0, 2);
constexpr uint16_t kSrcPortBase = 49152;
constexpr uint16_t kDstPort = 9;  // discard


}  // namespace

std::string_view ProtoName(Proto p) { return p == Proto::kUdp ? "udp" : "tcp"; }

// Indexed by ParseStatus.
constexpr std::array<std::string_view, kParseStatuses> kParseStatusNames = {
    "ok", "truncated", "not_ipv4", "not_udp_or_tcp", "not_txbatch", "corrupt", "out_of_sequence"};
static_assert(static_cast<size_t>(ParseStatus::kOutOfSequence) + 1 == kParseStatuses);

std::string_view ParseStatusName(ParseStatus s) { return NameOf(kParseStatusNames, s, "unknown"); }

FrameBuilder::FrameBuilder(Proto proto, uint16_t flow, bool track_stages, uint64_t first_seq)
    : proto_(proto),
      flow_(flow),
      seq_(first_seq),
      meta_offset_(track_stages ? TxMetaOffset() : -1) {}

void FrameBuilder::MakeTemplate(unsigned payload) {
  const unsigned l4 = L4HeaderBytes(proto_);
  const unsigned len = FrameBytes(proto_, payload);
  tmpl_.fill(0);
  uint8_t* p = tmpl_.data();
  auto* eth = reinterpret_cast<rte_ether_hdr*>(p);
  eth->dst_addr = kDstMac;
  eth->src_addr = kSrcMac;
  eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);

  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(p + kEthHeaderBytes);
  ip->version_ihl = RTE_IPV4_VHL_DEF;
  ip->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(len - kEthHeaderBytes));
  ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
  ip->time_to_live = 64;
  ip->next_proto_id = proto_ == Proto::kUdp ? IPPROTO_UDP : IPPROTO_TCP;
  ip->src_addr = rte_cpu_to_be_32(kSrcIp);
  ip->dst_addr = rte_cpu_to_be_32(kDstIp);
  // The sum without packet_id and checksum: each frame adds its own id (RFC 1624), so no frame
  // reads back the header it just wrote.
  tmpl_ip_sum_ = rte_raw_cksum(ip, kIpv4HeaderBytes);

  uint8_t* l4p = p + kEthHeaderBytes + kIpv4HeaderBytes;
  const uint16_t sport = static_cast<uint16_t>(kSrcPortBase + flow_);
  if (proto_ == Proto::kUdp) {
    auto* udp = reinterpret_cast<rte_udp_hdr*>(l4p);
    udp->src_port = rte_cpu_to_be_16(sport);
    udp->dst_port = rte_cpu_to_be_16(kDstPort);
    udp->dgram_len = rte_cpu_to_be_16(static_cast<uint16_t>(l4 + payload));
    udp->dgram_cksum = 0;  // "no checksum" is valid UDP over IPv4; payload is never touched
  } else {
    auto* tcp = reinterpret_cast<rte_tcp_hdr*>(l4p);
    tcp->src_port = rte_cpu_to_be_16(sport);
    tcp->dst_port = rte_cpu_to_be_16(kDstPort);
    tcp->recv_ack = rte_cpu_to_be_32(1);
    tcp->data_off = static_cast<uint8_t>((kTcpHeaderBytes / 4) << 4);
    tcp->tcp_flags = RTE_TCP_ACK_FLAG | RTE_TCP_PSH_FLAG;
    tcp->rx_win = rte_cpu_to_be_16(65535);
    // NOP NOP TS(kind 8, len 10): TSval (per frame) advances with the TSC in ~ms, TSecr 0.
    uint8_t* opt = l4p + sizeof(rte_tcp_hdr);
    opt[0] = 1;
    opt[1] = 1;
    opt[2] = 8;
    opt[3] = 10;
    // As a kernel with TX checksum offload hands it to the NIC: pseudo-header sum only, which
    // depends on addresses, protocol and length, not on the sequence number.
    tcp->cksum = rte_ipv4_phdr_cksum(ip, RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_TCP_CKSUM);
  }
  tmpl_payload_ = payload;
}

void FrameBuilder::BuildGso(std::span<rte_mbuf* const> slices, unsigned payload, unsigned mss,
                            Tsc tx_tsc) {
  const auto n = static_cast<uint16_t>(slices.size());
  rte_mbuf* head = slices[0];
  const unsigned hdr = FrameBytes(proto_, 0);
  uint8_t* p = WriteHeaders(rte_pktmbuf_mtod(head, uint8_t*), payload, tx_tsc, n);
  unsigned left = payload;
  for (uint16_t i = 0; i < n; ++i) {
    rte_mbuf* s = slices[i];
    const unsigned take = std::min(left, mss);
    left -= take;
    if (i > 0) p = rte_pktmbuf_mtod(s, uint8_t*);
    s->data_len = static_cast<uint16_t>(take + (i == 0 ? hdr : 0));
    s->next = i + 1 < n ? slices[i + 1] : nullptr;
    WriteTxbatchHeader(s, p, tx_tsc);
  }
  head->nb_segs = n;
  head->pkt_len = hdr + payload;
  head->tx_offload =
      rte_mbuf_tx_offload(kEthHeaderBytes, kIpv4HeaderBytes, kTcpHeaderBytes, mss, 0, 0, 0);
  head->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_TCP_CKSUM | RTE_MBUF_F_TX_TCP_SEG;
}

bool VerifyHeaders(const uint8_t* p, size_t len, uint16_t flow) {
  if (len < kEthHeaderBytes + kIpv4HeaderBytes + 4) return false;
  const auto* eth = reinterpret_cast<const rte_ether_hdr*>(p);
  if (!rte_is_same_ether_addr(&eth->dst_addr, &kDstMac) ||
      !rte_is_same_ether_addr(&eth->src_addr, &kSrcMac))
    return false;
  const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(p + kEthHeaderBytes);
  if (rte_ipv4_cksum(ip) != 0) return false;  // a header with a valid checksum folds to 0
  uint16_t ports[2];
  std::memcpy(ports, p + kEthHeaderBytes + kIpv4HeaderBytes, sizeof(ports));
  return rte_be_to_cpu_16(ports[0]) == kSrcPortBase + flow &&
         rte_be_to_cpu_16(ports[1]) == kDstPort;
}

}  // namespace txbatch
