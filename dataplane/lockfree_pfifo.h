#pragma once
// pfifo_fast as Linux >= 4.16 runs it (TCQ_F_NOLOCK): each band a bounded multi-producer FIFO
// that producers enqueue into without the root lock (Linux: one skb_array per band; here a
// Boost.Lockfree queue with its nodes allocated up front), served in strict priority by whoever
// holds the qdisc's run flag. A lock-free FIFO cannot push to its head, so frames a driver
// refused go to a private requeue slot that only the run-flag holder touches (Linux keeps them
// in q->gso_skb / skb_bad_txq for the same reason).
//
// Thread rules: Enqueue, backlog(), empty(), band_full() from any thread; DequeueBulk and Requeue
// only by the holder of the run flag (one thread at a time, with acquire/release between
// holders); Purge only when nobody else uses the qdisc.

#include <rte_mbuf.h>

#include <array>
#include <atomic>
#include <boost/lockfree/queue.hpp>
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

  // Appends `m` to `band`; false (leaving `m` with the caller) when the band holds `limit`
  // frames. `was_empty`, if given, says whether the qdisc held nothing before (a buffer:N:T
  // timer starts then).
  [[nodiscard]] bool Enqueue(rte_mbuf* m, int band, bool* was_empty = nullptr);

  // As PfifoFast::DequeueBulk: requeued frames first, then band 0, 1, 2. Run-flag holder only.
  uint16_t DequeueBulk(Batch& batch, const DequeueBudget& budget);
  uint16_t DequeueBulk(Batch& batch, uint16_t max_frames) {
    return DequeueBulk(batch, DequeueBudget{max_frames});
  }
  // Puts refused `frames` (in order) back ahead of everything; they hold no band's slot, so
  // `as_list` (how a 3.18 qdisc would have counted them) changes nothing. Run-flag holder only.
  void Requeue(std::span<rte_mbuf* const> frames, bool as_list = false);

  // Frames queued, requeue slot included. A frame counts from just before it is pushed, so a
  // reader may briefly see one that a dequeue cannot take yet.
  unsigned backlog() const { return backlog_.load(); }
  bool empty() const { return backlog() == 0; }
  bool band_full(int band) const { return bands_[band]->count.load() >= limit_; }
  unsigned limit() const { return limit_; }
  unsigned requeued() const { return requeue_.size(); }  // run-flag holder only

  unsigned Purge();

 private:
  struct Band {
    explicit Band(unsigned limit) : fifo(limit) {}
    boost::lockfree::queue<rte_mbuf*> fifo;  // `limit` nodes reserved: bounded_push never allocates
    std::atomic<unsigned> count{0};          // frames in `fifo`, reserved before the push
  };
  const unsigned limit_;
  std::array<std::unique_ptr<Band>, kPfifoBands> bands_;
  std::atomic<unsigned> backlog_{0};
  RequeueSlot requeue_;  // the run-flag holder's
};

}  // namespace txbatch
