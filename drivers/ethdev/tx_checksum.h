#pragma once
// TCP checksums on ethdev ports (issue 44, item 4): the TX checksum offloads a port is configured
// with where its PMD has them, and the software checksum written before the burst where it has
// not. Internal to drivers/ethdev.

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <cstdint>
#include <string_view>

namespace txbatch::ethdev {

// The TX checksum offloads a port is configured with: TCP's and UDP's, where its PMD has them.
// FrameBuilder's TCP frames carry RTE_MBUF_F_TX_TCP_CKSUM and only the pseudo-header sum in
// their checksum, as a kernel hands frames to a NIC with checksum offload; a PMD completes them
// only on a port configured for the offload (net_virtio reads the flag only then: its frames
// left with the pseudo-header sum, which every receiver drops). UDP frames carry checksum 0 (no
// checksum, valid over IPv4) and no flag: UDP's offload is asked for only to have the pair.
uint64_t TxChecksumOffloads(const rte_eth_dev_info& info);

// PMDs whose TX frees every frame unread (net_null): nobody sees a checksum there.
bool DiscardsFrames(std::string_view driver_name);

// Whether a port's TCP frames need their checksum written before the burst: its PMD has no TCP
// checksum offload, and the frames go somewhere that reads them (a wire, a kernel interface, a
// capture file, a memif peer in another process) — not back to this process's own receiver (a
// loopback, which checks no L4 checksum) nor into a PMD that frees them (net_null), where a
// pass over every payload would cost the measurement what no one reads.
bool WritesTcpChecksum(uint16_t port, bool loopback);

// What a NIC's TCP checksum offload writes into a frame flagged for it: the whole checksum, in
// software (Linux's skb_checksum_help, for a device without checksum offload). The frame no
// longer asks for the offload (its L4 flag cleared): a frame refused by the ring and offered
// again is left as it is. Frames without the flag (UDP, or done already) are not touched.
void WriteTcpChecksum(rte_mbuf* m);

}  // namespace txbatch::ethdev
