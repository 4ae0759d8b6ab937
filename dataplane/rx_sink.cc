#include "dataplane/rx_sink.h"

namespace txbatch {

RxSink::RxSink(const RunWindow& window, double tsc_hz, unsigned flows)
    : window_(window), ns_per_tsc_(1e9 / tsc_hz), next_seq_(flows, 0) {}

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
      latency_.Record(static_cast<double>(at - f.tx_tsc) * ns_per_tsc_);
    }
  }
  rte_pktmbuf_free_bulk(const_cast<rte_mbuf**>(frames.data()),
                        static_cast<unsigned>(frames.size()));
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
