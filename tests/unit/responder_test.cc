// The responder on frames built byte by byte: each reply as the kernel's would read it (valid
// checksums, addresses swapped), what it leaves alone and why, and hostile input (runts, random
// bytes behind a plausible EtherType) never answered and never read past.
#include "dataplane/responder.h"

#include <gtest/gtest.h>
#include <rte_arp.h>
#include <rte_icmp.h>
#include <rte_ip.h>
#include <rte_udp.h>

#include <cstring>
#include <random>

#include "tests/unit/test_eal.h"

namespace txbatch {
namespace {

const rte_ether_addr kOurMac = {{0x02, 0, 0, 0, 0, 0x01}};
const rte_ether_addr kPeerMac = {{0x02, 0, 0, 0, 0, 0x02}};
const uint32_t kOurIp = RTE_IPV4(10, 78, 0, 2);  // host order here, network order on the wire
const uint32_t kPeerIp = RTE_IPV4(10, 78, 0, 1);

struct Frame {
  Frame() : m(rte_pktmbuf_alloc(test::Pool())) {}
  ~Frame() { rte_pktmbuf_free(m); }
  uint8_t* Append(size_t n) { return reinterpret_cast<uint8_t*>(rte_pktmbuf_append(m, n)); }
  rte_mbuf* m;
};

rte_ether_hdr* AddEthernet(Frame& f, uint16_t type, rte_ether_addr dst = kOurMac) {
  auto* eth = reinterpret_cast<rte_ether_hdr*>(f.Append(sizeof(rte_ether_hdr)));
  eth->dst_addr = dst;
  eth->src_addr = kPeerMac;
  eth->ether_type = rte_cpu_to_be_16(type);
  return eth;
}

rte_ipv4_hdr* AddIpv4(Frame& f, uint8_t proto, uint16_t l4_len, uint32_t dst = kOurIp) {
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(f.Append(sizeof(rte_ipv4_hdr)));
  std::memset(ip, 0, sizeof *ip);
  ip->version_ihl = RTE_IPV4_VHL_DEF;
  ip->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(sizeof(rte_ipv4_hdr) + l4_len));
  ip->time_to_live = 63;
  ip->next_proto_id = proto;
  ip->src_addr = rte_cpu_to_be_32(kPeerIp);
  ip->dst_addr = rte_cpu_to_be_32(dst);
  ip->hdr_checksum = rte_ipv4_cksum(ip);
  return ip;
}

// An echo request with 56 bytes of payload, as ping sends.
void MakeEchoRequest(Frame& f) {
  AddEthernet(f, RTE_ETHER_TYPE_IPV4);
  AddIpv4(f, IPPROTO_ICMP, sizeof(rte_icmp_hdr) + 56);
  auto* icmp = reinterpret_cast<rte_icmp_hdr*>(f.Append(sizeof(rte_icmp_hdr) + 56));
  icmp->icmp_type = RTE_IP_ICMP_ECHO_REQUEST;
  icmp->icmp_code = 0;
  icmp->icmp_cksum = 0;
  icmp->icmp_ident = rte_cpu_to_be_16(77);
  icmp->icmp_seq_nb = rte_cpu_to_be_16(5);
  for (int i = 0; i < 56; ++i) reinterpret_cast<uint8_t*>(icmp + 1)[i] = static_cast<uint8_t>(i);
  icmp->icmp_cksum = static_cast<uint16_t>(~rte_raw_cksum(icmp, sizeof(rte_icmp_hdr) + 56));
}

Responder Make(uint16_t udp_port = 7) {
  return Responder(kOurMac, rte_cpu_to_be_32(kOurIp), udp_port);
}

TEST(Responder, AnswersAnArpRequestForItsAddress) {
  Responder r = Make();
  Frame f;
  AddEthernet(f, RTE_ETHER_TYPE_ARP, rte_ether_addr{{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}});
  auto* arp = reinterpret_cast<rte_arp_hdr*>(f.Append(sizeof(rte_arp_hdr)));
  arp->arp_hardware = rte_cpu_to_be_16(RTE_ARP_HRD_ETHER);
  arp->arp_protocol = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
  arp->arp_hlen = 6;
  arp->arp_plen = 4;
  arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REQUEST);
  arp->arp_data.arp_sha = kPeerMac;
  arp->arp_data.arp_sip = rte_cpu_to_be_32(kPeerIp);
  arp->arp_data.arp_tha = rte_ether_addr{};
  arp->arp_data.arp_tip = rte_cpu_to_be_32(kOurIp);
  Ignored why{};
  ASSERT_TRUE(r.Answer(f.m, &why));
  EXPECT_EQ(arp->arp_opcode, rte_cpu_to_be_16(RTE_ARP_OP_REPLY));
  EXPECT_TRUE(rte_is_same_ether_addr(&arp->arp_data.arp_sha, &kOurMac));
  // The ARP body is packed (arp_tip sits at an odd 2-byte offset): compared as copies, not bound
  // as references (clang's UBSan: a misaligned reference).
  EXPECT_EQ(uint32_t{arp->arp_data.arp_sip}, rte_cpu_to_be_32(kOurIp));
  EXPECT_TRUE(rte_is_same_ether_addr(&arp->arp_data.arp_tha, &kPeerMac));
  EXPECT_EQ(uint32_t{arp->arp_data.arp_tip}, rte_cpu_to_be_32(kPeerIp));
  auto* eth = rte_pktmbuf_mtod(f.m, rte_ether_hdr*);
  EXPECT_TRUE(rte_is_same_ether_addr(&eth->dst_addr, &kPeerMac));
  EXPECT_TRUE(rte_is_same_ether_addr(&eth->src_addr, &kOurMac));
  EXPECT_EQ(r.arp(), 1u);
  // The same question about someone else's address is not ours to answer.
  arp->arp_opcode = rte_cpu_to_be_16(RTE_ARP_OP_REQUEST);
  arp->arp_data.arp_tip = rte_cpu_to_be_32(RTE_IPV4(10, 78, 0, 9));
  EXPECT_FALSE(r.Answer(f.m, &why));
  EXPECT_EQ(why, Ignored::kNotForUs);
}

TEST(Responder, TurnsAnEchoRequestIntoAReplyWithValidChecksums) {
  Responder r = Make();
  Frame f;
  MakeEchoRequest(f);
  Ignored why{};
  ASSERT_TRUE(r.Answer(f.m, &why));
  auto* eth = rte_pktmbuf_mtod(f.m, rte_ether_hdr*);
  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(eth + 1);
  auto* icmp = reinterpret_cast<rte_icmp_hdr*>(ip + 1);
  EXPECT_EQ(icmp->icmp_type, RTE_IP_ICMP_ECHO_REPLY);
  EXPECT_EQ(rte_raw_cksum(icmp, sizeof(rte_icmp_hdr) + 56), 0xffff);  // a valid ICMP sum
  EXPECT_EQ(rte_ipv4_cksum(ip), 0);                                   // a valid IPv4 header
  EXPECT_EQ(uint32_t{ip->src_addr}, rte_cpu_to_be_32(kOurIp));
  EXPECT_EQ(uint32_t{ip->dst_addr}, rte_cpu_to_be_32(kPeerIp));
  EXPECT_EQ(ip->time_to_live, 64);
  EXPECT_EQ(icmp->icmp_seq_nb, rte_cpu_to_be_16(5));  // the identifier and data come back
  EXPECT_TRUE(rte_is_same_ether_addr(&eth->dst_addr, &kPeerMac));
  EXPECT_EQ(r.icmp(), 1u);
}

TEST(Responder, LeavesBadChecksumsOtherAddressesAndOtherProtocolsAlone) {
  Responder r = Make();
  Ignored why{};
  {
    Frame f;
    MakeEchoRequest(f);
    rte_pktmbuf_mtod_offset(f.m, uint8_t*, 40)[0] ^= 1;  // a bit of the ICMP data
    EXPECT_FALSE(r.Answer(f.m, &why));
    EXPECT_EQ(why, Ignored::kMalformed);
  }
  {
    Frame f;
    AddEthernet(f, RTE_ETHER_TYPE_IPV4);
    AddIpv4(f, IPPROTO_ICMP, 8, RTE_IPV4(10, 78, 0, 3));
    std::memset(f.Append(8), 0, 8);
    EXPECT_FALSE(r.Answer(f.m, &why));
    EXPECT_EQ(why, Ignored::kNotForUs);
  }
  {
    Frame f;
    AddEthernet(f, RTE_ETHER_TYPE_IPV4);
    AddIpv4(f, IPPROTO_TCP, 20);
    std::memset(f.Append(20), 0, 20);
    EXPECT_FALSE(r.Answer(f.m, &why));
    EXPECT_EQ(why, Ignored::kUnanswered);
  }
  {
    Frame f;
    AddEthernet(f, RTE_ETHER_TYPE_IPV6);
    std::memset(f.Append(40), 0, 40);
    EXPECT_FALSE(r.Answer(f.m, &why));
    EXPECT_EQ(why, Ignored::kUnanswered);
  }
}

TEST(Responder, EchoesUdpOnItsPortWithTheChecksumStillValid) {
  Responder r = Make(7);
  Frame f;
  AddEthernet(f, RTE_ETHER_TYPE_IPV4);
  auto* ip = AddIpv4(f, IPPROTO_UDP, sizeof(rte_udp_hdr) + 32);
  auto* udp = reinterpret_cast<rte_udp_hdr*>(f.Append(sizeof(rte_udp_hdr) + 32));
  udp->src_port = rte_cpu_to_be_16(40000);
  udp->dst_port = rte_cpu_to_be_16(7);
  udp->dgram_len = rte_cpu_to_be_16(sizeof(rte_udp_hdr) + 32);
  udp->dgram_cksum = 0;
  std::memset(udp + 1, 0xab, 32);
  udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
  Ignored why{};
  ASSERT_TRUE(r.Answer(f.m, &why));
  EXPECT_EQ(udp->dst_port, rte_cpu_to_be_16(40000));
  EXPECT_EQ(udp->src_port, rte_cpu_to_be_16(7));
  EXPECT_EQ(rte_ipv4_udptcp_cksum_verify(ip, udp), 0);
  // The reply itself is addressed elsewhere now; a datagram to another port is for us but not
  // answered.
  EXPECT_FALSE(r.Answer(f.m, &why));
  EXPECT_EQ(why, Ignored::kNotForUs);
  Frame g;
  AddEthernet(g, RTE_ETHER_TYPE_IPV4);
  AddIpv4(g, IPPROTO_UDP, sizeof(rte_udp_hdr));
  auto* other = reinterpret_cast<rte_udp_hdr*>(g.Append(sizeof(rte_udp_hdr)));
  other->src_port = rte_cpu_to_be_16(40000);
  other->dst_port = rte_cpu_to_be_16(9);
  other->dgram_len = rte_cpu_to_be_16(sizeof(rte_udp_hdr));
  other->dgram_cksum = 0;
  EXPECT_FALSE(r.Answer(g.m, &why));
  EXPECT_EQ(why, Ignored::kUnanswered);
}

TEST(Responder, HostileFramesAreNeverAnsweredNorReadPast) {
  // Random bytes of every short length, behind each EtherType it parses: the lengths in them are
  // lies, and the responder must not believe them.
  Responder r = Make();
  std::mt19937 rng(5);
  for (int i = 0; i < 20000; ++i) {
    Frame f;
    const size_t len = rng() % 120;
    uint8_t* p = f.Append(len);
    ASSERT_TRUE(len == 0 || p != nullptr);
    for (size_t k = 0; k < len; ++k) p[k] = static_cast<uint8_t>(rng());
    if (len >= 14) {
      const uint16_t type = (i % 3 == 0) ? RTE_ETHER_TYPE_ARP : RTE_ETHER_TYPE_IPV4;
      reinterpret_cast<rte_ether_hdr*>(p)->ether_type = rte_cpu_to_be_16(type);
    }
    Ignored why{};
    EXPECT_FALSE(r.Answer(f.m, &why)) << "random frame " << i << " of " << len << " bytes";
  }
}

TEST(Responder, ParsesAddressesWithOneSentenceForBadOnes) {
  EXPECT_EQ(*ParseIpv4("10.78.0.2"), rte_cpu_to_be_32(kOurIp));
  for (const char* bad : {"", "10.78.0", "10.78.0.256", "0.0.0.0", "255.255.255.255", "fe80::1"}) {
    auto p = ParseIpv4(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.error().message.find("valid: a dotted quad"), std::string::npos);
  }
}

}  // namespace
}  // namespace txbatch
