#include "dataplane/responder.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <rte_arp.h>
#include <rte_byteorder.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_udp.h>

#include "base/enum_names.h"

namespace txbatch {

// Indexed by Ignored.
constexpr std::array<std::string_view, kIgnoredReasons> kIgnoredNames = {"malformed", "not_for_us",
                                                                         "unanswered"};
static_assert(static_cast<size_t>(Ignored::kUnanswered) + 1 == kIgnoredReasons);

std::string_view IgnoredName(Ignored why) { return NameOf(kIgnoredNames, why, "?"); }

Result<uint32_t> ParseIpv4(std::string_view text) {
  in_addr a{};
  const std::string s(text);
  if (inet_pton(AF_INET, s.c_str(), &a) != 1 || a.s_addr == 0 || a.s_addr == 0xffffffff)
    return MakeError(EINVAL, fmt::format("'{}' is not a unicast IPv4 address; valid: a dotted "
                                         "quad such as 10.78.0.2",
                                         text));
  return a.s_addr;
}

Responder::Responder(rte_ether_addr mac, uint32_t ip, uint16_t udp_echo_port)
    : mac_(mac), ip_(ip), udp_port_be_(rte_cpu_to_be_16(udp_echo_port)) {}

bool Responder::Answer(rte_mbuf* m, Ignored* why) {
  // Headers are read from the first segment only; a frame whose headers do not fit it is
  // malformed as far as an echo goes.
  const uint32_t len = rte_pktmbuf_data_len(m);
  if (len < sizeof(rte_ether_hdr)) {
    *why = Ignored::kMalformed;
    return false;
  }
  auto* eth = rte_pktmbuf_mtod(m, rte_ether_hdr*);
  switch (rte_be_to_cpu_16(eth->ether_type)) {
    case RTE_ETHER_TYPE_ARP:
      return AnswerArp(eth, len, why);
    case RTE_ETHER_TYPE_IPV4:
      return AnswerIpv4(eth, len, why);
    default:
      *why = Ignored::kUnanswered;
      return false;
  }
}

bool Responder::AnswerArp(rte_ether_hdr* eth, uint32_t len, Ignored* why) {
  if (len < sizeof(rte_ether_hdr) + sizeof(rte_arp_hdr)) {
    *why = Ignored::kMalformed;
    return false;
  }
  auto* arp = reinterpret_cast<rte_arp_hdr*>(eth + 1);
  if (arp->arp_hardware != rte_cpu_to_be_16(RTE_ARP_HRD_ETHER) ||
      arp->arp_protocol != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4) ||
      arp->arp_hlen != RTE_ETHER_ADDR_LEN || arp->arp_plen != 4) {
    *why = Ignored::kMalformed;
    return false;
  }
  if (arp->arp_data.arp_tip != ip_) {
    *why = Ignored::kNotForUs;
    return false;
  }
  if (arp->arp_opcode != rte_cpu_to_be_16(RTE_ARP_OP_REQUEST)) {
    *why = Ignored::kUnanswered;
    return false;
  }
  // "ip_ is at mac_", to whoever asked.
  arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REPLY);
  arp->arp_data.arp_tha = arp->arp_data.arp_sha;
  arp->arp_data.arp_tip = arp->arp_data.arp_sip;
  arp->arp_data.arp_sha = mac_;
  arp->arp_data.arp_sip = ip_;
  eth->dst_addr = arp->arp_data.arp_tha;
  eth->src_addr = mac_;
  ++arp_;
  return true;
}

bool Responder::AnswerIpv4(rte_ether_hdr* eth, uint32_t len, Ignored* why) {
  const uint32_t avail = len - sizeof(rte_ether_hdr);
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
  if (avail < sizeof(rte_ipv4_hdr)) {
    *why = Ignored::kMalformed;
    return false;
  }
  const uint32_t ihl = rte_ipv4_hdr_len(ip);
  const uint32_t total = rte_be_to_cpu_16(ip->total_length);
  if ((ip->version_ihl >> 4) != 4 || ihl < sizeof(rte_ipv4_hdr) || total < ihl || total > avail ||
      rte_ipv4_cksum(ip) != 0 ||
      (ip->fragment_offset & rte_cpu_to_be_16(RTE_IPV4_HDR_MF_FLAG | RTE_IPV4_HDR_OFFSET_MASK))) {
    // rte_ipv4_cksum over a header with a valid checksum folds to 0 (it sums the checksum too).
    *why = Ignored::kMalformed;
    return false;
  }
  if (ip->dst_addr != ip_) {
    *why = Ignored::kNotForUs;
    return false;
  }
  const uint32_t l4_len = total - ihl;
  auto* l4 = reinterpret_cast<uint8_t*>(ip) + ihl;
  if (ip->next_proto_id == IPPROTO_ICMP) {
    auto* icmp = reinterpret_cast<rte_icmp_hdr*>(l4);
    if (l4_len < sizeof(rte_icmp_hdr) || rte_raw_cksum(icmp, l4_len) != 0xffff) {
      *why = Ignored::kMalformed;
      return false;
    }
    if (icmp->icmp_type != RTE_IP_ICMP_ECHO_REQUEST || icmp->icmp_code != 0) {
      *why = Ignored::kUnanswered;
      return false;
    }
    // Type 8 -> 0: the one's complement sum loses 0x0800 (RFC 1624: HC' = ~(~HC + ~m + m')).
    icmp->icmp_type = RTE_IP_ICMP_ECHO_REPLY;
    uint32_t sum = static_cast<uint16_t>(~rte_be_to_cpu_16(icmp->icmp_cksum)) +
                   static_cast<uint16_t>(~(RTE_IP_ICMP_ECHO_REQUEST << 8)) +
                   (RTE_IP_ICMP_ECHO_REPLY << 8);
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    icmp->icmp_cksum = rte_cpu_to_be_16(static_cast<uint16_t>(~sum));
    ++icmp_;
  } else if (ip->next_proto_id == IPPROTO_UDP && udp_port_be_ != 0) {
    auto* udp = reinterpret_cast<rte_udp_hdr*>(l4);
    if (l4_len < sizeof(rte_udp_hdr) || rte_be_to_cpu_16(udp->dgram_len) > l4_len) {
      *why = Ignored::kMalformed;
      return false;
    }
    if (udp->dst_port != udp_port_be_) {
      *why = Ignored::kUnanswered;
      return false;
    }
    // Swapping ports and addresses leaves every one's complement sum as it was.
    const uint16_t port = udp->src_port;  // packed fields: no references
    udp->src_port = udp->dst_port;
    udp->dst_port = port;
    ++udp_;
  } else {
    *why = Ignored::kUnanswered;
    return false;
  }
  // Back where it came from; the IPv4 checksum survives the swap, the TTL starts afresh.
  const uint32_t peer = ip->src_addr;
  ip->src_addr = ip->dst_addr;
  ip->dst_addr = peer;
  if (ip->time_to_live != 64) {
    ip->time_to_live = 64;
    ip->hdr_checksum = 0;
    ip->hdr_checksum = rte_ipv4_cksum(ip);
  }
  eth->dst_addr = eth->src_addr;
  eth->src_addr = mac_;
  return true;
}

}  // namespace txbatch
