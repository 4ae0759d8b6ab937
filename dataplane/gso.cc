#include "dataplane/gso.h"

#include <fmt/format.h>
#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_tcp.h>

#include <array>
#include <cstring>

#include "base/enum_names.h"
#include "dataplane/frame.h"
#include "dataplane/tx_meta.h"

namespace txbatch {
namespace {

constexpr std::array<std::string_view, 3> kOffloadNames = {"none", "gso", "tso"};
static_assert(static_cast<size_t>(Offload::kTso) + 1 == kOffloadNames.size());

// The most header bytes a segment copies: Ethernet, IPv4 and TCP, each at its largest.
constexpr unsigned kMaxHeaderBytes = kEthHeaderBytes + 60 + 60;

}  // namespace

std::string_view OffloadName(Offload o) { return NameOf(kOffloadNames, o, "unknown"); }

Result<Offload> ParseOffload(std::string_view text) {
  for (size_t i = 0; i < kOffloadNames.size(); ++i)
    if (text == kOffloadNames[i]) return static_cast<Offload>(i);
  return MakeError(EINVAL, fmt::format("--offload '{}' is not valid; valid: none, gso, tso", text));
}

unsigned WireFrames(std::span<rte_mbuf* const> frames) {
  unsigned n = 0;
  for (const rte_mbuf* m : frames) n += WireFrames(m);
  return n;
}

unsigned SegmentGso(rte_mbuf* head, std::span<rte_mbuf*> out) {
  const unsigned n = head->nb_segs;
  const unsigned l2 = head->l2_len, l3 = head->l3_len, l4 = head->l4_len;
  const unsigned hdr = l2 + l3 + l4;
  // The headers as the stack wrote them once for the whole frame: every segment's start.
  std::array<uint8_t, kMaxHeaderBytes> tmpl;
  std::memcpy(tmpl.data(), rte_pktmbuf_mtod(head, const uint8_t*), hdr);
  const auto* ip0 = reinterpret_cast<const rte_ipv4_hdr*>(tmpl.data() + l2);
  const auto* tcp0 = reinterpret_cast<const rte_tcp_hdr*>(tmpl.data() + l2 + l3);
  const uint16_t id = rte_be_to_cpu_16(ip0->packet_id);
  uint32_t seq = rte_be_to_cpu_32(tcp0->sent_seq);
  const uint8_t flags = tcp0->tcp_flags;
  const int meta_offset = TxMetaOffset();
  TxMeta meta{};
  if (meta_offset >= 0) meta = *MetaOf(head, meta_offset);
  const uint64_t tx_offload = rte_mbuf_tx_offload(l2, l3, l4, 0, 0, 0, 0);

  rte_mbuf* s = head;
  for (unsigned i = 0; i < n; ++i) {
    rte_mbuf* const next = s->next;
    uint8_t* p;
    unsigned payload;
    if (i == 0) {
      p = rte_pktmbuf_mtod(s, uint8_t*);
      payload = s->data_len - hdr;
    } else {
      // A slice of payload alone: its headers go into its headroom.
      payload = s->data_len;
      p = reinterpret_cast<uint8_t*>(rte_pktmbuf_prepend(s, static_cast<uint16_t>(hdr)));
      RTE_VERIFY(p != nullptr);  // FrameBuilder leaves every slice the default headroom
      std::memcpy(p, tmpl.data(), hdr);
      if (meta_offset >= 0) *MetaOf(s, meta_offset) = meta;
    }
    s->next = nullptr;
    s->nb_segs = 1;
    s->pkt_len = s->data_len;
    s->tx_offload = tx_offload;
    s->ol_flags = RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_TCP_CKSUM;
    auto* ip = reinterpret_cast<rte_ipv4_hdr*>(p + l2);
    ip->total_length = rte_cpu_to_be_16(static_cast<uint16_t>(l3 + l4 + payload));
    ip->packet_id = rte_cpu_to_be_16(static_cast<uint16_t>(id + i));
    ip->hdr_checksum = 0;
    ip->hdr_checksum = rte_ipv4_cksum(ip);
    auto* tcp = reinterpret_cast<rte_tcp_hdr*>(p + l2 + l3);
    tcp->sent_seq = rte_cpu_to_be_32(seq);
    seq += payload;
    // tcp_gso_segment: PSH and FIN only on the last segment, CWR only on the first.
    tcp->tcp_flags =
        i + 1 == n ? flags : static_cast<uint8_t>(flags & ~(RTE_TCP_PSH_FLAG | RTE_TCP_FIN_FLAG));
    if (i > 0) tcp->tcp_flags &= static_cast<uint8_t>(~RTE_TCP_CWR_FLAG);
    tcp->cksum = rte_ipv4_phdr_cksum(ip, s->ol_flags);
    out[i] = s;
    s = next;
  }
  return n;
}

unsigned SegmentBatch(Batch& batch) {
  bool any = false;
  for (const rte_mbuf* m : batch.frames()) any |= IsGso(m);
  if (!any) return 0;
  std::array<rte_mbuf*, kMaxBatch> out;
  unsigned k = 0, made = 0;
  for (rte_mbuf* m : batch.frames()) {
    if (!IsGso(m)) {
      out[k++] = m;
      continue;
    }
    const unsigned n = SegmentGso(m, std::span(out).subspan(k));
    k += n;
    made += n;
  }
  batch.Clear();
  for (unsigned i = 0; i < k; ++i) batch.Push(out[i]);
  return made;
}

}  // namespace txbatch
