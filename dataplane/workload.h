#pragma once
// How application writes become frames (DESIGN.md Terms, "size"):
//  * tcp: writes form one byte stream cut into full-MSS segments (autocorking); a partial segment
//    waits for the next write and is flushed only when the producer stops;
//  * udp: one datagram per write if it fits in MTU - 28, else several (no IP fragments).

#include <algorithm>
#include <cstdint>

#include "dataplane/frame.h"

namespace txbatch {

class Segmenter {
 public:
  Segmenter(Proto proto, unsigned size, unsigned mtu)
      : proto_(proto), size_(size), max_(MaxPayload(proto, mtu)) {}

  // Calls emit(payload_bytes) for each frame one write of `size` bytes produces now.
  template <typename Emit>
  void Write(Emit&& emit) {
    if (proto_ == Proto::kTcp) {
      pending_ += size_;
      while (pending_ >= max_) {
        emit(max_);
        pending_ -= max_;
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

 private:
  Proto proto_;
  unsigned size_;
  unsigned max_;
  uint64_t pending_ = 0;
};

}  // namespace txbatch
