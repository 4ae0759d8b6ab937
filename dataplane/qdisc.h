#pragma once
// pfifo_fast, the Linux default qdisc: three FIFO bands served in strict priority, each bounded
// by txqueuelen (drop-tail), plus a requeue slot ahead of them for frames a driver refused
// (Linux dev_requeue_skb: the refused frames go back to the head, in order, and are not counted
// against the limit).
//
// Not thread-safe: every member is called under the queue's root lock (TxQueue).

#include <rte_mbuf.h>

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "batching/batch.h"

namespace txbatch {

inline constexpr int kPfifoBands = 3;
// Linux's default tx_queue_len for Ethernet devices.
inline constexpr unsigned kDefaultTxQueueLen = 1000;

// Linux sch_generic.c prio2band: skb->priority (TC_PRIO_*) to band, band 0 served first.
int BandForPriority(uint8_t priority);

// Frames a driver refused, kept ahead of a qdisc's bands in their original order (Linux
// dev_requeue_skb). At most kMaxBatch: one driver call's refusals. Not thread-safe.
class RequeueSlot {
 public:
  // Puts `frames` (in order) back at the head. Precondition: size() + frames.size() <= kMaxBatch.
  void PushFront(std::span<rte_mbuf* const> frames) {
    for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
      head_ = (head_ + kMaxBatch - 1) % kMaxBatch;
      slots_[head_] = *it;
      ++count_;
    }
  }
  // Moves frames into `batch` from the head until `max_frames` are in it (counting `taken`
  // already there from this dequeue) or the batch is full; returns the new `taken`.
  uint16_t TakeInto(Batch& batch, uint16_t max_frames, uint16_t taken) {
    while (count_ > 0 && taken < max_frames && !batch.full()) {
      batch.Push(slots_[head_]);
      head_ = (head_ + 1) % kMaxBatch;
      --count_;
      ++taken;
    }
    return taken;
  }
  unsigned size() const { return count_; }

 private:
  std::array<rte_mbuf*, kMaxBatch> slots_;
  unsigned head_ = 0;
  unsigned count_ = 0;
};

class PfifoFast {
 public:
  // `limit` frames per band (pfifo_fast checks each band against tx_queue_len).
  explicit PfifoFast(unsigned limit = kDefaultTxQueueLen);

  // Appends `m` to `band`. Returns false, leaving `m` with the caller to drop and count, when the
  // band already holds `limit` frames.
  [[nodiscard]] bool Enqueue(rte_mbuf* m, int band);

  // Moves frames into `batch`, requeued ones first, then band 0, 1, 2, until `max_frames`
  // frames were taken, the batch is full or the qdisc is empty. Returns how many it moved.
  uint16_t DequeueBulk(Batch& batch, uint16_t max_frames);

  // Puts `frames` (refused by the driver, in their original order) back at the head.
  // Precondition: frames.size() <= kMaxBatch - requeued().
  void Requeue(std::span<rte_mbuf* const> frames);

  // Frames queued, requeue slot included.
  unsigned backlog() const { return backlog_; }
  unsigned band_backlog(int band) const { return bands_[band].count; }
  unsigned requeued() const { return requeue_.size(); }
  unsigned limit() const { return limit_; }
  bool empty() const { return backlog_ == 0; }
  bool band_full(int band) const { return bands_[band].count >= limit_; }

  // Frees every queued frame (teardown after an aborted run); returns how many.
  unsigned Purge();

 private:
  struct Band {
    std::vector<rte_mbuf*> slots;  // power-of-two ring
    uint32_t head = 0;
    uint32_t count = 0;
  };
  unsigned limit_;
  uint32_t mask_;
  std::array<Band, kPfifoBands> bands_;
  RequeueSlot requeue_;
  unsigned backlog_ = 0;
};

}  // namespace txbatch
