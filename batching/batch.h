#pragma once
// A batch of frames handed to a driver in one call (BESS PacketBatch, DPDK rte_eth_dev_tx_buffer):
// a fixed-capacity array of mbuf pointers plus a count and the byte total. Trivially copyable,
// never a linked list threaded through the packets.

#include <rte_mbuf.h>

#include <array>
#include <cstdint>
#include <span>
#include <type_traits>

namespace txbatch {

// Largest batch any policy may form: the kernel's bulk dequeue has no frame cap (BQL bounds
// it: a deep limit let 6.x bulks reach 1093-1367 frames, 0345552a653c's message), so 4096 —
// a whole default qdisc band with room to spare, a Batch at 32 KiB.
inline constexpr uint16_t kMaxBatch = 4096;

class Batch {
 public:
  // Appends one frame. Precondition: !full(). Ownership of `m` moves into the batch.
  void Push(rte_mbuf* m) {
    frames_[count_++] = m;
    bytes_ += rte_pktmbuf_pkt_len(m);
  }
  // Forgets every frame (does not free them: whoever holds them now owns them).
  void Clear() {
    count_ = 0;
    bytes_ = 0;
  }
  // Drops the first `n` frames from the batch after a driver accepted them, keeping the rest
  // (the ones the caller still owns) at the front, in order.
  // Drops the first `n` frames (a driver took them; they may already be freed, so only the
  // frames that stay are read).
  void ConsumeFront(uint16_t n) {
    uint32_t kept = 0;
    for (uint16_t i = n; i < count_; ++i) {
      frames_[i - n] = frames_[i];
      kept += rte_pktmbuf_pkt_len(frames_[i]);
    }
    count_ = static_cast<uint16_t>(count_ - n);
    bytes_ = kept;
  }

  std::span<rte_mbuf*> frames() { return {frames_.data(), count_}; }
  std::span<rte_mbuf* const> frames() const { return {frames_.data(), count_}; }
  uint16_t size() const { return count_; }
  uint32_t bytes() const { return bytes_; }
  bool empty() const { return count_ == 0; }
  bool full() const { return count_ == kMaxBatch; }
  static constexpr uint16_t capacity() { return kMaxBatch; }

 private:
  std::array<rte_mbuf*, kMaxBatch> frames_;
  uint16_t count_ = 0;
  uint32_t bytes_ = 0;
};

static_assert(std::is_trivially_copyable_v<Batch>);
static_assert(sizeof(Batch) <= kMaxBatch * sizeof(void*) + 16);

}  // namespace txbatch
