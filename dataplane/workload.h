#pragma once
// How application writes become frames (DESIGN.md Terms, "size"):
//  * tcp: writes form one byte stream cut into full-MSS segments (autocorking); a partial segment
//    waits for the next write and is flushed only when the producer stops. With GSO frames
//    (--offload gso or tso, gso.h) the full segments a write completes go as frames of up to
//    TCP's size goal (GsoSizeGoal: 45 x 1448 at MTU 1500), as tcp_sendmsg fills an skb up to
//    it; more than one MSS makes a GSO frame;
//  * udp: one datagram per write if it fits in MTU - 28, else several (no IP fragments).

#include <algorithm>
#include <cstdint>

#include "dataplane/frame.h"
#include "dataplane/gso.h"

namespace txbatch {

class Segmenter {
 public:
  // `gso`: TCP's full segments go as GSO frames of up to the size goal (--offload gso, tso).
  Segmenter(Proto proto, unsigned size, unsigned mtu, bool gso = false)
      : proto_(proto),
        size_(size),
        max_(MaxPayload(proto, mtu)),
        goal_(gso && proto == Proto::kTcp ? GsoSizeGoal(max_) : max_) {}

  // Calls emit(payload_bytes) for each frame one write of `size` bytes produces now.
  template <typename Emit>
  void Write(Emit&& emit) {
    if (proto_ == Proto::kTcp) {
      pending_ += size_;
      while (pending_ >= max_) {
        const auto take = static_cast<unsigned>(std::min<uint64_t>(pending_ / max_ * max_, goal_));
        emit(take);
        pending_ -= take;
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

  // Calls emit once for the partial TCP segment still corked, if any (at least a header long).
  template <typename Emit>
  void Flush(Emit&& emit) {
    if (pending_ == 0) return;
    emit(std::max<unsigned>(pending_, kTxbatchHeaderBytes));
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
  uint64_t pending_ = 0;
};

}  // namespace txbatch
