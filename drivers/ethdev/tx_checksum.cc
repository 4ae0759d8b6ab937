#include "drivers/ethdev/tx_checksum.h"

#include <rte_ip.h>
#include <rte_tcp.h>

#include <string_view>

namespace txbatch::ethdev {

// The TX checksum offloads a port is configured with: TCP's and UDP's, where its PMD has them.
// FrameBuilder's TCP frames carry RTE_MBUF_F_TX_TCP_CKSUM and only the pseudo-header sum in
// their checksum, as a kernel hands frames to a NIC with checksum offload; a PMD completes them
// only on a port configured for the offload (net_virtio reads the flag only then: its frames
// left with the pseudo-header sum, which every receiver drops). UDP frames carry checksum 0 (no
// checksum, valid over IPv4) and no flag: UDP's offload is asked for only to have the pair.
uint64_t TxChecksumOffloads(const rte_eth_dev_info& info) {
  return info.tx_offload_capa & (RTE_ETH_TX_OFFLOAD_TCP_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM);
}

// PMDs whose TX frees every frame unread (net_null): nobody sees a checksum there.
bool DiscardsFrames(std::string_view driver_name) { return driver_name == "net_null"; }

// Whether a port's TCP frames need their checksum written before the burst: its PMD has no TCP
// checksum offload, and the frames go somewhere that reads them (a wire, a kernel interface, a
// capture file, a memif peer in another process) — not back to this process's own receiver (a
// loopback, which checks no L4 checksum) nor into a PMD that frees them (net_null), where a
// pass over every payload would cost the measurement what no one reads.
bool WritesTcpChecksum(uint16_t port, bool loopback) {
  rte_eth_dev_info info{};
  if (loopback || rte_eth_dev_info_get(port, &info) != 0) return false;
  const std::string_view pmd = info.driver_name != nullptr ? info.driver_name : "";
  return (TxChecksumOffloads(info) & RTE_ETH_TX_OFFLOAD_TCP_CKSUM) == 0 && !DiscardsFrames(pmd);
}

// What a NIC's TCP checksum offload writes into a frame flagged for it: the whole checksum, in
// software (Linux's skb_checksum_help, for a device without checksum offload). The frame no
// longer asks for the offload (its L4 flag cleared): a frame refused by the ring and offered
// again is left as it is. Frames without the flag (UDP, or done already) are not touched.
void WriteTcpChecksum(rte_mbuf* m) {
  if ((m->ol_flags & RTE_MBUF_F_TX_L4_MASK) != RTE_MBUF_F_TX_TCP_CKSUM) return;
  auto* ip = rte_pktmbuf_mtod_offset(m, rte_ipv4_hdr*, m->l2_len);
  auto* tcp = rte_pktmbuf_mtod_offset(m, rte_tcp_hdr*, m->l2_len + m->l3_len);
  const uint32_t l4_off = m->l2_len + m->l3_len;
  const uint32_t l4_len = rte_be_to_cpu_16(ip->total_length) - m->l3_len;
  tcp->cksum = 0;
  uint16_t raw = 0;
  if (rte_raw_cksum_mbuf(m, l4_off, l4_len, &raw) != 0) return;  // lengths FrameBuilder set
  uint32_t sum = uint32_t{raw} + rte_ipv4_phdr_cksum(ip, 0);
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  tcp->cksum = static_cast<uint16_t>(~sum);
  m->ol_flags &= ~RTE_MBUF_F_TX_L4_MASK;
}

}  // namespace txbatch::ethdev
