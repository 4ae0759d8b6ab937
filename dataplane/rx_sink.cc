#include "dataplane/rx_sink.h"

#include <algorithm>
#include <bit>

namespace txbatch {

RxSink::RxSink(const RunWindow& window, double tsc_hz, unsigned flows)
    : window_(window),
      ns_per_tsc_(1e9 / tsc_hz),
      next_seq_(flows, 0),
      meta_offset_(TxMetaOffset()) {}

void RxSink::Receive(std::span<rte_mbuf* const> frames, std::span<const Tsc> arrival) {
  for (size_t i = 0; i < frames.size(); ++i) {
    const ParsedFrame f = ParseFrame(frames[i]);
    if (f.status != ParseStatus::kOk || f.flow >= next_seq_.size()) {
      foreign_.Add();
      foreign_by_status_[static_cast<size_t>(f.status)].Add();
      continue;
    }
    received_.Add();
    uint64_t& expect = next_seq_[f.flow];
    if (f.seq >= expect) {
      if (f.seq > expect) lost_.Add(f.seq - expect);
      expect = f.seq + 1;
    } else {
      duplicated_.Add();
    }
    const Tsc at = arrival[i];
    if (at < f.tx_tsc) {
      arrival_before_tx_.Add();
      continue;
    }
    if (window_.Contains(at)) {
      window_frames_.Add();
      window_payload_bytes_.Add(f.payload);
      const double total = static_cast<double>(at - f.tx_tsc) * ns_per_tsc_;
      latency_.Record(total);
      if (meta_offset_ >= 0) {
        const TxMeta* t = MetaOf(frames[i], meta_offset_);
        if (t->stamp == f.tx_tsc) RecordStages(*t, at, total);
      }
    }
  }
  rte_pktmbuf_free_bulk(const_cast<rte_mbuf**>(frames.data()),
                        static_cast<unsigned>(frames.size()));
}

void RxSink::RecordStages(const TxMeta& t, Tsc at, double total_ns) {
  const Tsc handover = t.stamp + t.to_handover;
  if (at < handover) return;  // the clock of another thread ran behind: leave it out
  before_driver_.Record(static_cast<double>(t.to_handover) * ns_per_tsc_);
  if (t.flags & kMetaWireKnown) {
    const Tsc on_wire = std::min(at, handover + t.to_wire);
    driver_ring_.Record(static_cast<double>(on_wire - handover) * ns_per_tsc_);
    wire_.Record(static_cast<double>(at - on_wire) * ns_per_tsc_);
  } else {
    driver_ring_.Record(static_cast<double>(at - handover) * ns_per_tsc_);
  }
  const size_t bucket = t.position == 0 ? 0 : std::bit_width(static_cast<unsigned>(t.position));
  position_[std::min(bucket, kPositionBuckets - 1)].Record(total_ns);
}

SinkCounts RxSink::counts() const {
  SinkCounts c;
  c.received = received_.Get();
  c.foreign = foreign_.Get();
  for (size_t i = 0; i < c.foreign_by_status.size(); ++i)
    c.foreign_by_status[i] = foreign_by_status_[i].Get();
  c.lost = lost_.Get();
  c.duplicated = duplicated_.Get();
  c.arrival_before_tx = arrival_before_tx_.Get();
  c.window_frames = window_frames_.Get();
  c.window_payload_bytes = window_payload_bytes_.Get();
  return c;
}

}  // namespace txbatch
