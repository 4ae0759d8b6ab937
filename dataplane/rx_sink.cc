#include "dataplane/rx_sink.h"

#include <algorithm>
#include <bit>

namespace txbatch {

RxSink::RxSink(const RunWindow& window, double tsc_hz, unsigned flows, uint64_t seq_window,
               bool verify_headers, bool timing, bool flow_latency)
    : window_(window),
      ns_per_tsc_(1e9 / tsc_hz),
      seq_window_(std::bit_ceil(std::max<uint64_t>(seq_window, uint64_t{1} << 16))),
      verify_headers_(verify_headers),
      timing_(timing),
      flows_(flows),
      flow_latency_(flow_latency ? flows : 0),
      meta_offset_(TxMetaOffset()) {}

void RxSink::Receive(std::span<rte_mbuf* const> frames, std::span<const Tsc> arrival) {
  for (size_t i = 0; i < frames.size(); ++i) {
    ParsedFrame f = ParseFrame(frames[i]);
    if (f.status == ParseStatus::kOk &&
        (f.flow >= flows_.size() ||
         (verify_headers_ && !VerifyHeaders(rte_pktmbuf_mtod(frames[i], const uint8_t*),
                                            rte_pktmbuf_data_len(frames[i]), f.flow))))
      f.status = ParseStatus::kCorrupt;
    // A sequence more than kMaxSeqJump past what its flow expects is no frame of this run's: a
    // forged or stray frame claiming 2^48 - 1 added that to `lost`.
    if (f.status == ParseStatus::kOk && f.seq >= flows_[f.flow].expect &&
        f.seq - flows_[f.flow].expect > kMaxSeqJump)
      f.status = ParseStatus::kOutOfSequence;
    if (f.status != ParseStatus::kOk) {
      c_.foreign.Add();
      c_.foreign_by_status[static_cast<size_t>(f.status)].Add();
      continue;
    }
    c_.received.Add();
    ++flows_[f.flow].counts.received;
    Track(flows_[f.flow], f.seq);
    const Tsc at = arrival[i];
    const bool stamped = f.tx_tsc != kNoTxStamp;
    if (stamped && at < f.tx_tsc) {
      c_.arrival_before_tx.Add();
      continue;
    }
    if (window_.Contains(at)) {
      c_.window_frames.Add();
      c_.window_payload_bytes.Add(f.payload);
      if (!timing_) continue;
      if (!stamped) {
        c_.unstamped.Add();
        continue;
      }
      const double total = static_cast<double>(at - f.tx_tsc) * ns_per_tsc_;
      latency_.Record(total);
      if (!flow_latency_.empty()) {
        auto& h = flow_latency_[f.flow];
        if (!h) h = std::make_unique<LatencyHistogram>();
        h->Record(total);
      }
      if (meta_offset_ >= 0) {
        const TxMeta* t = MetaOf(frames[i], meta_offset_);
        if (t->stamp == f.tx_tsc) RecordStages(*t, at, total);
      }
    }
  }
  rte_pktmbuf_free_bulk(const_cast<rte_mbuf**>(frames.data()),
                        static_cast<unsigned>(frames.size()));
}

void RxSink::StartFlows(std::span<const uint64_t> first) {
  for (size_t f = 0; f < std::min(first.size(), flows_.size()); ++f) flows_[f].expect = first[f];
}

void RxSink::CloseFlows(std::span<const uint64_t> next_seq) {
  for (size_t f = 0; f < std::min(next_seq.size(), flows_.size()); ++f)
    if (next_seq[f] > flows_[f].expect) {
      c_.lost.Add(next_seq[f] - flows_[f].expect);
      flows_[f].counts.lost += next_seq[f] - flows_[f].expect;
      flows_[f].expect = next_seq[f];
    }
}

void RxSink::Track(Flow& flow, uint64_t seq) {
  // Its window's bits when its first frame comes: a cell's queues each have a sink for every
  // flow, and thousands of flows (--flows) would otherwise take 8 KiB each in every one.
  if (flow.seen.empty()) flow.seen.assign(seq_window_ / 64, 0);
  if (seq >= flow.expect) {
    const uint64_t gap = seq - flow.expect;
    c_.lost.Add(gap);
    flow.counts.lost += gap;
    for (uint64_t s = gap > seq_window_ ? seq - seq_window_ : flow.expect; s < seq; ++s)
      Mark(flow, s, false);
    Mark(flow, seq, true);
    flow.expect = seq + 1;
  } else if (flow.expect - seq > seq_window_) {
    c_.late_beyond_window.Add();  // too late to tell a gap it fills from a duplicate
    c_.duplicated.Add();
    ++flow.counts.duplicated;
  } else if (!Seen(flow, seq)) {
    // It fills a gap counted as lost when a later frame came first: reordered, not lost.
    Mark(flow, seq, true);
    c_.lost.Sub();
    c_.reordered.Add();
    --flow.counts.lost;
    ++flow.counts.reordered;
  } else {
    c_.duplicated.Add();
    ++flow.counts.duplicated;
  }
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

void RxSink::Absorb(const RxSink& o) {
  AddInto(c_, o.c_);
  latency_.Merge(o.latency_);
  before_driver_.Merge(o.before_driver_);
  driver_ring_.Merge(o.driver_ring_);
  wire_.Merge(o.wire_);
  for (size_t b = 0; b < position_.size(); ++b) position_[b].Merge(o.position_[b]);
  // Per flow: a cell's queues share flow ids (a flow's frames may cross several).
  for (size_t f = 0; f < std::min(flows_.size(), o.flows_.size()); ++f) {
    FlowCounts& to = flows_[f].counts;
    const FlowCounts& from = o.flows_[f].counts;
    to.received += from.received;
    to.lost += from.lost;
    to.duplicated += from.duplicated;
    to.reordered += from.reordered;
  }
  for (size_t f = 0; f < std::min(flow_latency_.size(), o.flow_latency_.size()); ++f) {
    if (!o.flow_latency_[f]) continue;
    if (!flow_latency_[f]) flow_latency_[f] = std::make_unique<LatencyHistogram>();
    flow_latency_[f]->Merge(*o.flow_latency_[f]);
  }
}

std::vector<FlowCounts> RxSink::flow_counts() const {
  std::vector<FlowCounts> out;
  out.reserve(flows_.size());
  for (const Flow& f : flows_) out.push_back(f.counts);
  return out;
}

std::optional<LatencySummary> RxSink::flow_latency(size_t f) const {
  if (f >= flow_latency_.size() || !flow_latency_[f]) return std::nullopt;
  return flow_latency_[f]->Summary();
}

SinkCounts RxSink::counts() const {
  SinkCounts c;
  ReadInto(c, c_);
  return c;
}

}  // namespace txbatch
