#pragma once
// How application writes become frames (DESIGN.md Terms, "size"):
//  * tcp: writes form one byte stream cut into full-MSS segments (autocorking); a partial segment
//    waits for the next write and is flushed only when the producer stops. With GSO frames
//    (--offload gso or tso, gso.h) the stream goes as frames of TCP's size goal (GsoSizeGoal:
//    45 x 1448 at MTU 1500), as tcp_sendmsg fills an skb up to it, and what is short of the goal
//    waits for the next write, as TSO deferral (tcp_tso_should_defer) and autocorking hold a
//    partial skb while the flow has data in flight — a stream at full speed always has; a
//    paced one (`defer` false) sends the full segments of each write at once;
//  * udp: one datagram per write if it fits in MTU - 28, else several (no IP fragments).

#include <algorithm>
#include <cstdint>

#include "dataplane/frame.h"
#include "dataplane/gso.h"

namespace txbatch {

class Segmenter {
 public:
  // `gso`: TCP's segments go as GSO frames of the size goal (--offload gso, tso); `defer`: what
  // is short of it waits for the next write (else a write's full segments go at once).
  Segmenter(Proto proto, unsigned size, unsigned mtu, bool gso = false, bool defer = true)
      : proto_(proto),
        size_(size),
        max_(MaxPayload(proto, mtu)),
        goal_(gso && proto == Proto::kTcp ? GsoSizeGoal(max_) : max_),
        defer_(defer) {}

  // Calls emit(payload_bytes) for each frame one write of `size` bytes produces now.
  template <typename Emit>
  void Write(Emit&& emit) {
    if (proto_ == Proto::kTcp) {
      pending_ += size_;
      for (; pending_ >= goal_; pending_ -= goal_) emit(goal_);
      if (!defer_ && pending_ >= max_) {
        const auto full = static_cast<unsigned>(pending_ / max_ * max_);
        emit(full);
        pending_ -= full;
      }
      return;
    }
    unsigned left = size_;
    while (left > max_) {
      // Keep the last datagram at least a txbatch header long.
      const unsigned take = left - max_ >= kTxbatchHeaderBytes ? max_ : left - kTxbatchHeaderBytes;
      emit(take);
      left -= take;
    }
    emit(left);
  }

  // Calls emit once for the TCP bytes still corked, if any (at least a header long): a partial
  // segment, or with GSO a frame short of the goal (its last slice partial).
  template <typename Emit>
  void Flush(Emit&& emit) {
    if (pending_ == 0) return;
    // Every slice carries a txbatch header: a last slice shorter than one is padded to it.
    auto bytes = static_cast<unsigned>(pending_);
    if (const unsigned tail = bytes % max_; tail > 0 && tail < kTxbatchHeaderBytes)
      bytes += kTxbatchHeaderBytes - tail;
    emit(bytes);
    pending_ = 0;
  }

  // Frames per write in steady state (for sizing pools): at most this many per Write().
  unsigned MaxFramesPerWrite() const { return size_ / std::min(max_, size_) + 1; }
  // The MSS (TCP) or largest datagram payload: a frame with more payload is a GSO frame.
  unsigned mss() const { return max_; }

 private:
  Proto proto_;
  unsigned size_;
  unsigned max_;
  unsigned goal_;  // the largest TCP frame: max_, or the GSO size goal
  bool defer_;     // GSO: hold what is short of the goal for the next write
  uint64_t pending_ = 0;
};

}  // namespace txbatch
