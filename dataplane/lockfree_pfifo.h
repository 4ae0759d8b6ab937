#pragma once
// pfifo_fast as Linux >= 4.16 runs it (TCQ_F_NOLOCK): each band a ring of `limit` slots that
// producers fill without the root lock, served in strict priority by whoever holds the qdisc's
// run flag. The ring is the kernel's skb_array (ptr_ring): producers take the band's own
// spinlock (ptr_ring_produce's producer_lock) to fill the slot at the producer index, refused
// while that slot still holds a frame; the one consumer (the run-flag holder) takes slots in
// order without a lock and empties them in batches (__ptr_ring_discard_one: two cache lines of
// slots at a time, the last first), so the line the producers write is not pulled back on every
// frame — here also at the end of each bulk dequeue, so no taken slot outlives a run (the
// kernel's may, until a batch is taken; a buffer:N runner waiting for N = txqueuelen frames
// would wait forever). A ring cannot push to its head either, so frames a driver refused go to a
// private requeue slot that only the run-flag holder touches (Linux keeps them in q->gso_skb /
// skb_bad_txq for the same reason).
//
// Thread rules: Enqueue, backlog(), empty(), band_full() from any thread; DequeueBulk and Requeue
// only by the holder of the run flag (one thread at a time, with acquire/release between
// holders); Purge only when nobody else uses the qdisc.

#include <rte_mbuf.h>
#include <rte_spinlock.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>

#include "batching/batch.h"
#include "dataplane/qdisc.h"

namespace txbatch {

class LockfreePfifo {
 public:
  explicit LockfreePfifo(unsigned limit = kDefaultTxQueueLen);
  ~LockfreePfifo();
  LockfreePfifo(const LockfreePfifo&) = delete;
  LockfreePfifo& operator=(const LockfreePfifo&) = delete;

  // Appends `m` to `band`; false (leaving `m` with the caller) when the band's ring has no free
  // slot (it holds `limit` frames, less any a dequeue in progress took and has not emptied yet).
  // `was_empty`, if given, says whether the qdisc held nothing before (a buffer:N:T timer starts
  // then).
  [[nodiscard]] bool Enqueue(rte_mbuf* m, int band, bool* was_empty = nullptr);

  // As PfifoFast::DequeueBulk: requeued frames first, then band 0, 1, 2. Run-flag holder only.
  uint16_t DequeueBulk(Batch& batch, const DequeueBudget& budget);
  // The run's form (QdiscRun): no clock is read.
  uint16_t DequeueBulk(Batch& batch, const DequeueBudget& budget, Tsc /*now*/) {
    return DequeueBulk(batch, budget);
  }
  uint16_t DequeueBulk(Batch& batch, uint16_t max_frames) {
    return DequeueBulk(batch, DequeueBudget{max_frames});
  }
  // Puts refused `frames` (in order) back ahead of everything; they hold no band's slot, so
  // `as_list` (how a 3.18 qdisc would have counted them) changes nothing. Run-flag holder only.
  void Requeue(std::span<rte_mbuf* const> frames, bool as_list = false);

  // Frames queued, requeue slot included. A frame counts from just before its slot is filled
  // (under the band's lock, once it has one), so a reader may briefly see one that a dequeue
  // cannot take yet, never one that was refused.
  unsigned backlog() const { return backlog_.load(); }
  bool empty() const { return backlog() == 0; }
  bool band_full(int band) const { return bands_[band]->full(); }
  unsigned limit() const { return limit_; }
  unsigned requeued() const { return requeue_.size(); }  // run-flag holder only

  unsigned Purge();

 private:
  // One band's ring (the kernel's ptr_ring): the producers' line and the consumer's apart.
  struct Band {
    explicit Band(unsigned limit);
    // Takes the producer lock (spinning, then yielding the CPU).
    void Lock();
    // The consumer's next frame, or null when the ring is empty; Discard takes it, emptying a
    // batch of taken slots once there is one (or the ring's end is reached), Empty what is left.
    rte_mbuf* Peek() const { return slots[consumer_head].load(std::memory_order_acquire); }
    void Discard();
    void Empty();
    // Whether the producers' next slot still holds a frame. Seq_cst: the look of a producer
    // about to sleep for room, after counting itself a waiter (see Empty).
    bool full() const {
      return slots[producer.load(std::memory_order_relaxed)].load(std::memory_order_seq_cst) !=
             nullptr;
    }
    static constexpr unsigned kSpinsBeforeYield = 1000;

    const unsigned size;
    const unsigned batch;  // slots emptied together
    const std::unique_ptr<std::atomic<rte_mbuf*>[]> slots;
    alignas(64) rte_spinlock_t producer_lock = RTE_SPINLOCK_INITIALIZER;
    std::atomic<unsigned> producer{0};       // written under producer_lock; read as a hint
    alignas(64) unsigned consumer_head = 0;  // the consumer's: the next slot to take
    unsigned consumer_tail = 0;              // the first slot taken but not emptied yet
  };
  const unsigned limit_;
  std::array<std::unique_ptr<Band>, kPfifoBands> bands_;
  alignas(64) std::atomic<unsigned> backlog_{0};
  RequeueSlot requeue_;  // the run-flag holder's
};

}  // namespace txbatch
