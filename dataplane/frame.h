#pragma once
// Frames: Ethernet + IPv4 + UDP or TCP, with the 18-byte txbatch header at the start of the L4
// payload (DESIGN.md Terms). Building writes headers only; payload bytes are never copied.

#include <rte_byteorder.h>
#include <rte_ether.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_tcp.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "base/tsc.h"
#include "dataplane/tx_meta.h"

namespace txbatch {

enum class Proto : uint8_t { kUdp, kTcp };
std::string_view ProtoName(Proto p);

inline constexpr uint16_t kTxbatchMagic = 0x7862;  // "xb"
inline constexpr unsigned kTxbatchHeaderBytes = 18;
inline constexpr unsigned kEthHeaderBytes = 14;
inline constexpr unsigned kIpv4HeaderBytes = 20;
inline constexpr unsigned kIpv6HeaderBytes = 40;
inline constexpr unsigned kUdpHeaderBytes = 8;
// TCP header with the timestamp option (NOP NOP TS), as Linux sends on a bulk transfer.
inline constexpr unsigned kTcpHeaderBytes = 32;
inline constexpr unsigned kMinMtu = 68;    // IPv4 minimum (RFC 791)
inline constexpr unsigned kMaxMtu = 9000;  // jumbo frames; pools are sized to fit
// The MAC addresses of every frame txbatch builds (locally administered): a receiver of a link
// without MACs (IPoIB) gives its frames these back.
inline constexpr rte_ether_addr kTxbatchSrcMac = {{0x02, 0x74, 0x78, 0x62, 0x00, 0x01}};
inline constexpr rte_ether_addr kTxbatchDstMac = {{0x02, 0x74, 0x78, 0x62, 0x00, 0x02}};

// On the wire: magic 2, flow 2, sequence 6 (big-endian), TX TSC 8 (host order: only this host's
// clock reads it back).
struct [[gnu::packed]] TxbatchHeader {
  uint16_t magic_be;
  uint16_t flow_be;
  uint8_t seq_be[6];
  uint64_t tx_tsc;
};
static_assert(sizeof(TxbatchHeader) == kTxbatchHeaderBytes);

// The mbufs a frame of `payload` bytes takes with slices of `mss` (a GSO frame's; 1: a frame).
// A frame within one MSS (every frame but a GSO frame) takes no division: this runs once a frame.
constexpr unsigned SlicesOf(unsigned payload, unsigned mss) {
  if (payload <= mss) return payload > 0 ? 1 : 0;
  return (payload + mss - 1) / mss;
}

// L4 header bytes for the protocol.
constexpr unsigned L4HeaderBytes(Proto p) {
  return p == Proto::kUdp ? kUdpHeaderBytes : kTcpHeaderBytes;
}
// Largest L4 payload one frame carries at `mtu`: MTU - 28 for UDP, the MSS for TCP
// (MTU 1500 -> 1448 with timestamps).
constexpr unsigned MaxPayload(Proto p, unsigned mtu) {
  return mtu - kIpv4HeaderBytes - L4HeaderBytes(p);
}
// Frame length (L2 header to end of payload, no FCS) for a given L4 payload.
constexpr unsigned FrameBytes(Proto p, unsigned payload) {
  return kEthHeaderBytes + kIpv4HeaderBytes + L4HeaderBytes(p) + payload;
}

// Builds the frames of one flow (one producer's socket). Not thread-safe: one per producer.
class FrameBuilder {
 public:
  // `track_stages`: write the frame's stage timestamps (TxMeta) for a sink to split its latency;
  // pointless where nothing receives, and ~2 ns a frame.
  // `first_seq`: the sequence number of its first frame (a flow continued from an earlier cell).
  FrameBuilder(Proto proto, uint16_t flow, bool track_stages = true, uint64_t first_seq = 0);

  // Writes a complete frame with `payload` L4 payload bytes (>= kTxbatchHeaderBytes, <= the
  // MaxPayload of the MTU the pool was sized for) into `m`, stamping the next sequence number
  // and `tx_tsc`. Sets l2_len/l3_len/l4_len so payload bytes can be derived without parsing.
  // `m` is fresh from rte_pktmbuf_alloc(_bulk) (reset: one segment, no flags). The headers are
  // copied from a template kept per payload size, as testpmd's txonly does, and only the
  // per-frame fields (IP id and checksum, TCP sequence and TSval, the txbatch header) written.
  void Build(rte_mbuf* m, unsigned payload, Tsc tx_tsc);

  // Writes a GSO frame (gso.h) of `payload` TCP payload bytes cut into slices of `mss`: one mbuf
  // per slice, chained from slices[0], which holds the headers too; each slice starts with its
  // own txbatch header (the next sequence number) and `tx_tsc`. Its segments get the IP ids and
  // TCP sequence numbers that many Build calls would have given. Precondition: TCP, slices.size()
  // == ceil(payload / mss) <= kMaxGsoSegs, each fresh as for Build.
  void BuildGso(std::span<rte_mbuf* const> slices, unsigned payload, unsigned mss, Tsc tx_tsc);

  // What a producer builds of `payload` bytes in `slices` (SlicesOf(payload, mss) fresh mbufs):
  // a frame in one, else a GSO frame (BuildGso). Returns the frame (slices[0]).
  rte_mbuf* BuildSlices(std::span<rte_mbuf* const> slices, unsigned payload, unsigned mss,
                        Tsc tx_tsc) {
    if (slices.size() > 1)
      BuildGso(slices, payload, mss, tx_tsc);
    else
      Build(slices[0], payload, tx_tsc);
    return slices[0];
  }

  // The frame built last never entered the stack (a datagram dropped at a full qdisc, a batch
  // the driver refused): give back the sequence numbers of its `frames` wire frames (a GSO
  // frame's segments), so the receiver's sequence gaps count only frames lost after the qdisc.
  void Unbuild(unsigned payload, unsigned frames = 1) {
    seq_ -= frames;
    ip_id_ = static_cast<uint16_t>(ip_id_ - frames);
    if (proto_ == Proto::kTcp) tcp_seq_ -= payload;
  }

  uint64_t next_seq() const { return seq_; }
  Proto proto() const { return proto_; }

 private:
  Proto proto_;
  uint16_t flow_;
  uint64_t seq_ = 0;
  uint32_t tcp_seq_ = 1;  // next TCP sequence number (stream bytes sent + ISN 1)
  uint16_t ip_id_ = 0;
  int meta_offset_;  // TxMetaOffset(): the stage timestamps' mbuf field, or -1
  void MakeTemplate(unsigned payload);
  // Writes the headers of a frame (or GSO frame) of `payload` L4 payload bytes at `p`, taking
  // `ip_ids` IP ids; returns where the payload starts.
  uint8_t* WriteHeaders(uint8_t* p, unsigned payload, Tsc tx_tsc, uint16_t ip_ids);
  // Writes the txbatch header at `payload` (the next sequence number) and `m`'s stage stamps.
  void WriteTxbatchHeader(rte_mbuf* m, uint8_t* payload, Tsc tx_tsc);
  std::array<uint8_t, 80> tmpl_{};  // Ethernet + IPv4 + L4 headers for tmpl_payload_
  unsigned tmpl_payload_ = ~0u;
  uint32_t tmpl_ip_sum_ = 0;  // IPv4 header sum with packet_id = 0, checksum = 0
};

// Build and its two steps are inline: a producer runs them once a frame, and out of line their
// calls cost more than their stores (doc/perf.md, "The producer's frame").
namespace frame_detail {
// The low 48 bits of `seq`, big-endian, at `out`.
inline void PutSeq48(uint8_t* out, uint64_t seq) {
  const uint64_t be = rte_cpu_to_be_64(seq << 16);
  std::memcpy(out, &be, 6);
}
// The 48-bit big-endian sequence at `in`.
inline uint64_t GetSeq48(const uint8_t* in) {
  uint64_t be = 0;
  std::memcpy(&be, in, 6);
  return rte_be_to_cpu_64(be) >> 16;
}
}  // namespace frame_detail

inline uint8_t* FrameBuilder::WriteHeaders(uint8_t* p, unsigned payload, Tsc tx_tsc,
                                           uint16_t ip_ids) {
  if (payload != tmpl_payload_) MakeTemplate(payload);
  // Fixed-size copies (the compiler emits a few vector moves), then the per-frame fields.
  if (proto_ == Proto::kUdp)
    std::memcpy(p, tmpl_.data(), kEthHeaderBytes + kIpv4HeaderBytes + kUdpHeaderBytes);
  else
    std::memcpy(p, tmpl_.data(), kEthHeaderBytes + kIpv4HeaderBytes + kTcpHeaderBytes);

  auto* ip = reinterpret_cast<rte_ipv4_hdr*>(p + kEthHeaderBytes);
  const uint16_t id_be = rte_cpu_to_be_16(ip_id_);
  ip_id_ = static_cast<uint16_t>(ip_id_ + ip_ids);
  ip->packet_id = id_be;
  uint32_t sum = tmpl_ip_sum_ + id_be;
  sum = (sum & 0xffff) + (sum >> 16);
  sum = (sum & 0xffff) + (sum >> 16);
  ip->hdr_checksum = static_cast<uint16_t>(~sum);

  uint8_t* l4p = p + kEthHeaderBytes + kIpv4HeaderBytes;
  if (proto_ == Proto::kTcp) {
    auto* tcp = reinterpret_cast<rte_tcp_hdr*>(l4p);
    tcp->sent_seq = rte_cpu_to_be_32(tcp_seq_);
    const uint32_t tsval = rte_cpu_to_be_32(static_cast<uint32_t>(tx_tsc >> 21));
    std::memcpy(l4p + sizeof(rte_tcp_hdr) + 4, &tsval, 4);
    tcp_seq_ += payload;
  }
  return l4p + L4HeaderBytes(proto_);
}

inline void FrameBuilder::WriteTxbatchHeader(rte_mbuf* m, uint8_t* payload, Tsc tx_tsc) {
  auto* h = reinterpret_cast<TxbatchHeader*>(payload);
  h->magic_be = rte_cpu_to_be_16(kTxbatchMagic);
  h->flow_be = rte_cpu_to_be_16(flow_);
  frame_detail::PutSeq48(h->seq_be, seq_++);
  h->tx_tsc = tx_tsc;
  if (meta_offset_ >= 0) {
    TxMeta* t = MetaOf(m, meta_offset_);
    t->stamp = tx_tsc;
    t->to_handover = t->to_wire = 0;
    t->position = t->flags = 0;
  }
}

inline void FrameBuilder::Build(rte_mbuf* m, unsigned payload, Tsc tx_tsc) {
  const unsigned len = FrameBytes(proto_, payload);
  m->data_len = static_cast<uint16_t>(len);
  m->pkt_len = len;
  m->tx_offload =
      rte_mbuf_tx_offload(kEthHeaderBytes, kIpv4HeaderBytes, L4HeaderBytes(proto_), 0, 0, 0, 0);
  if (proto_ == Proto::kTcp) m->ol_flags |= RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_TCP_CKSUM;
  uint8_t* p = rte_pktmbuf_mtod(m, uint8_t*);
  WriteTxbatchHeader(m, WriteHeaders(p, payload, tx_tsc, 1), tx_tsc);
}

// The TX stamp of a frame sent without one (--no-timing: even where pacing read the clock, the
// frame does not carry it). No stamp is 0 otherwise — the TSC counts from boot, the simulation's
// from an origin past 0 (sim_engine.cc) — so a receiver tells these frames apart and measures no
// latency from them (from 0 it read the receiver's uptime as latency).
inline constexpr Tsc kNoTxStamp = 0;

// --latency-sample N: which of a producer's frames carry a TX stamp (the rest kNoTxStamp, and no
// clock read of their own), as traffic generators time a sample of their packets. One frame in
// each block of N, block j's at offset j mod N: over N blocks the stamped frames take every
// offset, so a batch whose size divides N has each of its positions sampled, not the same one
// always. A countdown: no division a frame. N = 1: every frame.
class LatencySampler {
 public:
  explicit LatencySampler(unsigned n = 1) : n_(n < 1 ? 1 : n) {}
  // Whether the next frame is stamped.
  bool Next() {
    if (left_ > 0) {
      --left_;
      return false;
    }
    // From offset j of one block to offset j + 1 of the next: N frames between; from the
    // last offset to the first of the next block, none.
    offset_ = offset_ + 1 == n_ ? 0 : offset_ + 1;
    left_ = offset_ == 0 ? 0 : n_;
    return true;
  }

 private:
  unsigned n_;
  unsigned offset_ = 0;  // the offset in its block of the next frame to stamp
  unsigned left_ = 0;    // frames to go unstamped before the next stamped one
};

// Rewrites the TX stamp of a frame built by FrameBuilder (from the lengths it set; no parsing),
// and of every slice of a GSO frame (FrameBuilder::BuildGso: each starts with its header). A
// frame sent without a stamp (kNoTxStamp) keeps none: a stamp given only to the frames that
// waited would give a receiver the latency of those alone.
inline void RestampTx(rte_mbuf* m, Tsc tx_tsc) {
  auto* h = rte_pktmbuf_mtod_offset(m, TxbatchHeader*, m->l2_len + m->l3_len + m->l4_len);
  if (h->tx_tsc == kNoTxStamp) return;
  h->tx_tsc = tx_tsc;
  for (rte_mbuf* s = m->next; s != nullptr; s = s->next)
    rte_pktmbuf_mtod(s, TxbatchHeader*)->tx_tsc = tx_tsc;
  if (const int off = TxMetaOffset(); off >= 0) MetaOf(m, off)->stamp = tx_tsc;
}

// L4 payload bytes of a frame built by FrameBuilder (from the lengths it set; no parsing). Only
// on the mbuf it built: a received one may be a fresh copy with the lengths 0 (net_memif), so
// the receive side takes ParseFrame(m).payload.
inline unsigned PayloadBytes(const rte_mbuf* m) {
  return rte_pktmbuf_pkt_len(m) - m->l2_len - m->l3_len - m->l4_len;
}

// What the receive side makes of a frame.
enum class ParseStatus : uint8_t {
  kOk,
  kTruncated,    // shorter than its headers claim
  kNotIpv4,      // EtherType is not IPv4
  kNotUdpOrTcp,  // IP protocol is neither
  kNotTxbatch,   // no txbatch magic at the start of the payload (a foreign frame)
  kCorrupt,      // a txbatch frame whose headers fail their checks (VerifyHeaders)
  kOutOfSequence,  // a txbatch frame whose sequence is no frame of its flow's (RxSink)
};
inline constexpr size_t kParseStatuses = 7;
std::string_view ParseStatusName(ParseStatus s);

// For a frame ParseFrame found to be txbatch's: whether the headers FrameBuilder wrote are
// intact — its MAC addresses, a valid IPv4 header checksum, and the L4 ports of its flow. A link
// that corrupts frames flips bits there (link_model.h), so this catches every one.
bool VerifyHeaders(const uint8_t* frame, size_t len, uint16_t flow);

struct ParsedFrame {
  ParseStatus status = ParseStatus::kTruncated;
  Proto proto = Proto::kUdp;
  uint16_t flow = 0;
  uint64_t seq = 0;
  Tsc tx_tsc = kNoTxStamp;
  unsigned payload = 0;  // L4 payload bytes, txbatch header included
};

// Validates and decodes a frame (single-segment mbuf). Never throws; bad input is a status.
// Inline: a receiver runs it once a frame.
inline ParsedFrame ParseFrame(const uint8_t* p, size_t len) {
  ParsedFrame out;
  if (len < kEthHeaderBytes + kIpv4HeaderBytes) return out;
  const auto* eth = reinterpret_cast<const rte_ether_hdr*>(p);
  if (eth->ether_type != rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4)) {
    out.status = ParseStatus::kNotIpv4;
    return out;
  }
  const auto* ip = reinterpret_cast<const rte_ipv4_hdr*>(p + kEthHeaderBytes);
  const unsigned ihl = (ip->version_ihl & 0x0f) * 4u;
  const unsigned ip_len = rte_be_to_cpu_16(ip->total_length);
  if ((ip->version_ihl >> 4) != 4 || ihl < kIpv4HeaderBytes) {
    out.status = ParseStatus::kNotIpv4;
    return out;
  }
  if (ip_len < ihl || kEthHeaderBytes + ip_len > len) return out;  // truncated
  unsigned l4 = 0;
  const uint8_t* l4p = p + kEthHeaderBytes + ihl;
  const unsigned l4_room = ip_len - ihl;
  if (ip->next_proto_id == IPPROTO_UDP) {
    out.proto = Proto::kUdp;
    l4 = kUdpHeaderBytes;
  } else if (ip->next_proto_id == IPPROTO_TCP) {
    out.proto = Proto::kTcp;
    if (l4_room < sizeof(rte_tcp_hdr)) return out;
    l4 = (reinterpret_cast<const rte_tcp_hdr*>(l4p)->data_off >> 4) * 4u;
    if (l4 < sizeof(rte_tcp_hdr)) return out;
  } else {
    out.status = ParseStatus::kNotUdpOrTcp;
    return out;
  }
  if (l4_room < l4) return out;
  out.payload = l4_room - l4;
  if (out.payload < kTxbatchHeaderBytes) {
    out.status = ParseStatus::kNotTxbatch;
    return out;
  }
  TxbatchHeader h;
  std::memcpy(&h, l4p + l4, sizeof(h));
  if (rte_be_to_cpu_16(h.magic_be) != kTxbatchMagic) {
    out.status = ParseStatus::kNotTxbatch;
    return out;
  }
  out.flow = rte_be_to_cpu_16(h.flow_be);
  out.seq = frame_detail::GetSeq48(h.seq_be);
  out.tx_tsc = h.tx_tsc;
  out.status = ParseStatus::kOk;
  return out;
}

inline ParsedFrame ParseFrame(const rte_mbuf* m) {
  return ParseFrame(rte_pktmbuf_mtod(m, const uint8_t*), rte_pktmbuf_data_len(m));
}

}  // namespace txbatch
