#pragma once
// TCP segmentation offload, and its software form (DESIGN.md "TSO and GSO"). With --offload gso
// or tso a stream's producer hands the stack one large TCP frame — a GSO frame — where it would
// hand a run of MSS frames: a chain of mbufs, one per MSS slice, the first also holding the
// headers, flagged RTE_MBUF_F_TX_TCP_SEG with tso_segsz = MSS (DPDK's TSO request). Each slice
// begins with its own txbatch header (flow, sequence, TX stamp), so the segments cut from it are
// ordinary txbatch frames for any receiver. The qdisc, the quota and the bulk count it as one
// packet, BQL by its length (one set of headers), as Linux counts a GSO skb.
//
// Where it is cut into MSS frames: with gso, by the stack before the driver (Linux
// validate_xmit_skb -> skb_gso_segment, run by sch_direct_xmit after the dequeue and outside the
// TX lock), on the CPU; with tso, by the NIC (the emulated e1000 and ixgbe), on the wire.
// Segmentation is a header copy into each slice's headroom and the per-segment fields
// (tcp_gso_segment, inet_gso_segment): IP total length, id (the frame's + i) and checksum, TCP
// sequence (+ the bytes before), PSH on the last segment only, the pseudo-header sum for the
// NIC's checksum offload. Every segment is one mbuf of the chain: no allocation, no copy of
// payload, and every mbuf goes back to the pool as the frame it became.
//
// The books count wire frames (segments): a GSO frame counts as its segments where frames are
// generated, dropped, sent and in flight (`queued`, the qdisc's backlog in packets, is 0 after a
// drain); the qdisc and the driver's calls count it as one (avg_batch is in packets the stack
// handed over).

#include <rte_mbuf.h>

#include <cstdint>
#include <span>
#include <string_view>

#include "base/error.h"
#include "batching/batch.h"

namespace txbatch {

// --offload: where a TCP stream's large writes are cut into MSS frames.
enum class Offload : uint8_t {
  kNone,  // the producer writes MSS frames (no GSO frame exists)
  kGso,   // GSO frames, segmented by the stack before the driver (validate_xmit_skb)
  kTso,   // GSO frames, segmented by the NIC (a driver that has TSO)
};
std::string_view OffloadName(Offload o);
Result<Offload> ParseOffload(std::string_view text);

// GSO_MAX_SIZE (65536): the largest GSO frame, IP packet of every slice and its headers.
inline constexpr unsigned kGsoMaxSize = 65536;
// MAX_TCP_HEADER on x86-64 (L1_CACHE_ALIGN(128 + MAX_HEADER)): what tcp_xmit_size_goal keeps
// free of gso_max_size.
inline constexpr unsigned kMaxTcpHeader = 320;
// The most segments one GSO frame has here: TCP's size goal at MTU 1500 (45 x 1448), so a bulk
// the stack segments may hold 91 GSO frames — more than linux-2025's 65 — and still fit a Batch
// (kMaxGsoBulk). The kernel's gso_max_segs is 65535; at MTUs under 1500 its size goal has more
// slices than this.
inline constexpr unsigned kMaxGsoSegs = 45;
// Frames of a bulk the stack segments before the driver: their segments fit one Batch.
inline constexpr uint16_t kMaxGsoBulk = kMaxBatch / kMaxGsoSegs;

// TCP's size goal for `mss` (tcp_xmit_size_goal): the largest whole number of MSS slices under
// gso_max_size - 1 - MAX_TCP_HEADER, at most kMaxGsoSegs, at least one. 1448 -> 45 x 1448.
constexpr unsigned GsoSizeGoal(unsigned mss) {
  const unsigned slices = (kGsoMaxSize - 1 - kMaxTcpHeader) / mss;
  return (slices < 1 ? 1 : slices > kMaxGsoSegs ? kMaxGsoSegs : slices) * mss;
}

// Whether `m` is a GSO frame (to be cut into segments).
inline bool IsGso(const rte_mbuf* m) { return (m->ol_flags & RTE_MBUF_F_TX_TCP_SEG) != 0; }
// The wire frames `m` becomes: its slices if a GSO frame, else 1.
inline unsigned WireFrames(const rte_mbuf* m) { return IsGso(m) ? m->nb_segs : 1; }
// The wire frames of `frames`, added up.
unsigned WireFrames(std::span<rte_mbuf* const> frames);

// How a driver counts a frame's bytes for BQL — what it reports to netdev_tx_sent_queue and, the
// same, to netdev_tx_completed_queue — a per-NIC-model choice (TxDriver::bql_bytes).
enum class BqlBytes : uint8_t {
  kLength,          // its length: a GSO frame's headers once (e1000: skb->len, 3.18 and 6.x)
  kSegmentHeaders,  // a GSO frame's headers once per segment, as its segments leave
                    // (ixgbe_tso: first->bytecount += (gso_segs - 1) * hdr_len)
};
// `m`'s bytes for BQL as `rule` counts them.
inline uint32_t BqlBytesOf(const rte_mbuf* m, BqlBytes rule) {
  const uint32_t len = rte_pktmbuf_pkt_len(m);
  if (rule == BqlBytes::kLength || !IsGso(m)) return len;
  return len + (WireFrames(m) - 1) * (m->l2_len + m->l3_len + m->l4_len);
}

// Cuts GSO frame `head` into its segments, written to out[0..n) in order (out[0] is `head`
// itself, trimmed to its first slice); returns n = head->nb_segs. Every segment is a complete
// single-mbuf txbatch TCP frame. Precondition: IsGso(head), out.size() >= head->nb_segs.
unsigned SegmentGso(rte_mbuf* head, std::span<rte_mbuf*> out);

// validate_xmit_skb_list: replaces every GSO frame in `batch` by its segments, in place and in
// order; returns the segments that came of GSO frames (0: none was one). Precondition: the
// segments fit (a bulk of at most kMaxGsoBulk frames).
unsigned SegmentBatch(Batch& batch);

}  // namespace txbatch
