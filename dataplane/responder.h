#pragma once
// The answering end of `txbatch respond`: turns an ARP request for its address, an ICMP echo
// request to it, or a UDP datagram to its echo port into the reply, in place in the same mbuf
// (addresses and ports swapped, checksums kept valid), so ping and RTT measurements can reach a
// DPDK endpoint directly. Everything else is left alone and counted by why. Every length is
// checked before a header is read: a runt, a truncated header or random bytes is ignored, never
// read past.

#include <rte_ether.h>
#include <rte_mbuf.h>

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"

namespace txbatch {

enum class Ignored : uint8_t {
  kMalformed,   // too short for its headers, bad IPv4 version/length/checksum, fragments
  kNotForUs,    // another IP address (or a broadcast that is not ARP)
  kUnanswered,  // for us, but nothing txbatch answers (TCP, other ICMP, ARP replies, IPv6, …)
};
inline constexpr size_t kIgnoredReasons = 3;
std::string_view IgnoredName(Ignored why);

class Responder {
 public:
  // `ip` in network byte order; `udp_echo_port` in host order, 0 for none.
  Responder(rte_ether_addr mac, uint32_t ip, uint16_t udp_echo_port);

  // Rewrites `m` into its reply and returns true, or leaves it and returns false with `why` set.
  bool Answer(rte_mbuf* m, Ignored* why);

  // Replies by kind (ARP, ICMP echo, UDP echo).
  uint64_t arp() const { return arp_; }
  uint64_t icmp() const { return icmp_; }
  uint64_t udp() const { return udp_; }

 private:
  bool AnswerArp(rte_ether_hdr* eth, uint32_t len, Ignored* why);
  bool AnswerIpv4(rte_ether_hdr* eth, uint32_t len, Ignored* why);

  const rte_ether_addr mac_;
  const uint32_t ip_;
  const uint16_t udp_port_be_;  // network order, 0 for none
  uint64_t arp_ = 0, icmp_ = 0, udp_ = 0;
};

// "10.0.0.2" to network byte order; one sentence for anything else.
Result<uint32_t> ParseIpv4(std::string_view text);

}  // namespace txbatch
