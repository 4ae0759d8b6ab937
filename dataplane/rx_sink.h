#pragma once
// The receive end: validates txbatch headers, measures latency (arrival minus the frame's own TX
// stamp), tracks sequence numbers per flow (gaps = lost, going back = duplicated or reordered)
// and counts foreign frames apart by reason. Frees what it receives.
//
// Not thread-safe: Receive is called by one thread at a time (a run's emu driver delivers to it
// through a DeferredReceiver, which hands frames on under its own lock).

#include <rte_mbuf.h>

#include <array>
#include <bit>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "base/counters.h"
#include "base/tsc.h"
#include "batching/batch.h"
#include "dataplane/frame.h"
#include "dataplane/histogram.h"
#include "dataplane/run_window.h"
#include "dataplane/rx_port.h"

namespace txbatch {

// What a sink counts, listed once (base/counters.h): live in RxSink (Counter), read at a moment
// (SinkCounts), added up over a cell's per-queue sinks (Absorb).
template <class C>
struct SinkCountersOf {
  C received{};                                       // txbatch frames received
  C foreign{};                                        // frames without a valid txbatch header
  std::array<C, kParseStatuses> foreign_by_status{};  // indexed by ParseStatus
  C reordered{};           // arrived after a later frame of its flow (filled a gap: not lost)
  C late_beyond_window{};  // arrived too late to tell (counted as duplicated)
  C lost{};                // sequence gaps
  C duplicated{};          // sequence numbers seen again or late
  C arrival_before_tx{};   // model sanity: a frame arriving before it was stamped
  C window_frames{};       // received with arrival in the run window
  C window_payload_bytes{};
  // Arrived in the window without a TX stamp (kNoTxStamp: a --no-timing sender), where latency
  // is measured: counted, left out of latency.
  C unstamped{};

  template <class F, class... S>
  static void Fields(F&& f, S&... s) {
    f(Sum{}, s.received...);
    f(Sum{}, s.foreign...);
    f(Sum{}, s.foreign_by_status...);
    f(Sum{}, s.reordered...);
    f(Sum{}, s.late_beyond_window...);
    f(Sum{}, s.lost...);
    f(Sum{}, s.duplicated...);
    f(Sum{}, s.arrival_before_tx...);
    f(Sum{}, s.window_frames...);
    f(Sum{}, s.window_payload_bytes...);
    f(Sum{}, s.unstamped...);
  }
};
struct SinkCounts : SinkCountersOf<uint64_t> {};

// One flow's share of SinkCounts (a flow: one sender's producer, its own sequence).
struct FlowCounts {
  uint64_t received = 0, lost = 0, duplicated = 0, reordered = 0;
};

// The largest forward jump of a flow's sequence a receiver takes as frames lost: 2^32 frames are
// 29 s of a 100 GbE wire at 64 B (148.8 Mpps), a loss no run survives; past it the frame is
// counted foreign (out_of_sequence), not 2^32 and more frames lost.
inline constexpr uint64_t kMaxSeqJump = uint64_t{1} << 32;

// The most flows a sender sends and a receiver tracks (run --flows with --procs, sink --flows):
// each its own source port (49152 + id: 16384 fit) and, in each sink that receives it, its own
// sequence window, made at its first frame (a bit a frame: 8 KiB at the least window, 65536
// frames; 4096 flows keep that to 32 MiB a sink — a --link that holds more frames widens it).
// A flow's window allocated on the receive path, once: pre-sized, thousands of flows a queue
// never sees would cost their 8 KiB in every queue's sink.
inline constexpr unsigned kMaxFlows = 4096;

class RxSink final : public FrameReceiver {
 public:
  // `seq_window`: how far behind the newest frame of its flow a late frame may arrive and still be
  // told apart as reordered (filling a gap) or duplicated; rounded up to a power of two, at least
  // 65536. A link that holds many frames needs a wider one (RunCell: 4 x its limit).
  // `verify_headers`: check every txbatch frame's headers (VerifyHeaders) and count failures as
  // corrupt — needed only behind a link that corrupts; it costs an IPv4 checksum per frame, on
  // the sending core where emu's deliveries are handed on (booked as the receiver's).
  // `timing`: measure latency (off: --no-timing, frames carry no stamp; counts only).
  // `flow_latency`: also a latency histogram per flow (flow_latency(); ~35 KB a flow that
  // receives, and a second histogram update a frame).
  RxSink(const RunWindow& window, double tsc_hz, unsigned flows, uint64_t seq_window = 0,
         bool verify_headers = false, bool timing = true, bool flow_latency = false);

  // Flow f's first sequence number is first[f] (a flow continued from an earlier cell); before
  // any frame arrives.
  void StartFlows(std::span<const uint64_t> first);

  // Generation is over and nothing is in flight: flow f's last frame had sequence number
  // next_seq[f] - 1, so frames missing at its end were lost too (no later frame reveals them).
  void CloseFlows(std::span<const uint64_t> next_seq);

  // Takes ownership of `frames` (frees them); arrival[i] is frame i's arrival TSC.
  void Receive(std::span<rte_mbuf* const> frames, std::span<const Tsc> arrival) override;

  // Latency of frames that arrived in the window carrying a TX stamp (those without one are
  // SinkCounts::unstamped).
  const LatencyHistogram& latency() const { return latency_; }

  // The same frames' latency split by stage, from the stage timestamps they carry (TxMeta; frames
  // that crossed a copying path carry none and are left out): before the driver (the qdisc
  // wait, or the batch fill where producers batch their own frames), the driver and its ring
  // (to the first bit on the wire; to receive where no wire is modelled), and the wire.
  const LatencyHistogram& before_driver() const { return before_driver_; }
  const LatencyHistogram& driver_ring() const { return driver_ring_; }
  const LatencyHistogram& wire() const { return wire_; }
  // Whole latency by the frame's position in its driver call: bucket b holds positions
  // [2^(b-1), 2^b) (bucket 0: the first frame).
  static constexpr size_t kPositionBuckets = std::bit_width(kMaxBatch - 1u) + 1u;  // to kMaxBatch
  const std::array<LatencyHistogram, kPositionBuckets>& by_position() const { return position_; }
  SinkCounts counts() const;
  // Per flow id (0..flows-1): what counts() adds up (received, lost, duplicated, reordered).
  std::vector<FlowCounts> flow_counts() const;
  // Flow f's latency of frames in the window; empty unless built with `flow_latency` (and for a
  // flow nothing of which arrived in the window).
  std::optional<LatencySummary> flow_latency(size_t f) const;
  // Adds `other`'s counts and histograms to this sink's (a cell's per-queue sinks, each closed,
  // into one), flow by flow (a flow's sequence state is not carried over: close both first).
  void Absorb(const RxSink& other);
  // Frames handed to Receive so far, whatever they were (the simulation charges their handling).
  uint64_t handled() const { return c_.received.Get() + c_.foreign.Get(); }

 private:
  void RecordStages(const TxMeta& t, Tsc at, double total_ns);

  const RunWindow& window_;
  double ns_per_tsc_;
  // Per flow: the next sequence number expected and which of the seq_window_ numbers below it
  // arrived, so a late frame that fills a gap (reordered: not lost after all) is told apart from
  // a duplicate.
  struct Flow {
    uint64_t expect = 0;
    std::vector<uint64_t> seen;  // a bit per sequence number, modulo the window (from its first)
    FlowCounts counts;
  };
  bool Seen(const Flow& f, uint64_t seq) const {
    return f.seen[(seq & (seq_window_ - 1)) / 64] >> (seq % 64) & 1;
  }
  void Mark(Flow& f, uint64_t seq, bool v) {
    uint64_t& w = f.seen[(seq & (seq_window_ - 1)) / 64];
    w = v ? w | (uint64_t{1} << (seq % 64)) : w & ~(uint64_t{1} << (seq % 64));
  }
  const uint64_t seq_window_;
  const bool verify_headers_;
  const bool timing_;
  void Track(Flow& flow, uint64_t seq);
  std::vector<Flow> flows_;
  // With `flow_latency`: one per flow, made when its first frame in the window arrives.
  std::vector<std::unique_ptr<LatencyHistogram>> flow_latency_;
  LatencyHistogram latency_;
  LatencyHistogram before_driver_, driver_ring_, wire_;
  std::array<LatencyHistogram, kPositionBuckets> position_;
  const int meta_offset_;
  SinkCountersOf<Counter> c_;
};

}  // namespace txbatch
