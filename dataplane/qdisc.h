#pragma once
// pfifo_fast, the Linux default qdisc: three FIFO bands served in strict priority, drop-tail at
// txqueuelen, plus a requeue slot ahead of them for frames a driver refused (Linux
// dev_requeue_skb: the refused frames go back to the head, in order). Before 4.16 (root-locked)
// the limit is the qdisc's length, every band and the requeued frames together; the lock-free
// pfifo_fast of 4.16 on bounds each band (lockfree_pfifo.h), and so does this one when asked
// (the simulation's lock-free queue).
//
// Not thread-safe: every member is called under the queue's root lock (TxQueue).

#include <rte_mbuf.h>

#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "base/counters.h"
#include "base/tsc.h"
#include "batching/batch.h"
#include "batching/flush_policy.h"

namespace txbatch {

class TsqLedger;

inline constexpr int kPfifoBands = 3;
// Linux's default tx_queue_len for Ethernet devices.
inline constexpr unsigned kDefaultTxQueueLen = 1000;

// Linux sch_generic.c prio2band: skb->priority (TC_PRIO_*) to band, band 0 served first.
int BandForPriority(uint8_t priority);

// A bulk dequeue's running limit (DequeueBudget): the first frame always, then while fewer than
// `frames` were taken and bytes remain (the last frame taken may overshoot, as in Linux).
struct BulkLimit {
  explicit BulkLimit(const DequeueBudget& b) : frames(b.frames), bytes(b.bytes) {}
  bool Allows(uint16_t taken) const { return taken < frames && (taken == 0 || bytes > 0); }
  void Took(const rte_mbuf* m) { bytes -= rte_pktmbuf_pkt_len(m); }
  uint16_t frames;
  int64_t bytes;
};

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
  // Moves frames into `batch` from the head while `limit` allows (counting `taken` already there
  // from this dequeue) and the batch has room; returns the new `taken`.
  uint16_t TakeInto(Batch& batch, BulkLimit& limit, uint16_t taken) {
    while (count_ > 0 && limit.Allows(taken) && !batch.full()) {
      limit.Took(slots_[head_]);
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

// What a qdisc's limit bounds.
enum class QdiscLimit : uint8_t {
  // The qdisc's length (q.qlen): pfifo_fast before 4.16 (`skb_queue_len(&qdisc->q) <
  // tx_queue_len`) and tc's pfifo (`sch->q.qlen < sch->limit`). Requeued frames count: one a
  // frame, or one for a 3.18 requeued list (dev_requeue_skb's `q->q.qlen++` for q->gso_skb).
  kLength,
  // Each band on its own (4.16 on: a ring of tx_queue_len per band); requeued frames hold no slot.
  kPerBand,
};

// What a qdisc that drops frames it had already queued counts, as `tc -s qdisc show` prints it
// (fq_codel's xstats): live, written by the holder of the queue's root lock, read by anyone.
// Frames are wire frames (a GSO frame's segments), as every drop count of a queue.
template <class C>
struct QdiscCountersOf {
  C dropped_codel;       // CoDel's head drops at dequeue (codel_dequeue's drop_func)
  C drop_overlimit;      // dropped by fq_codel_drop over `limit` or `memory_limit`
  C drop_overmemory;     // of those, over `memory_limit`
  C ecn_mark;            // ECN-capable frames marked CE instead of dropped
  C new_flow_count;      // flows that joined new_flows
  C maxpacket;           // the largest frame CoDel looked at (bytes)

  template <class F, class... Q>
  static void Fields(F&& f, Q&... q) {
    f(Sum{}, q.dropped_codel...);
    f(Sum{}, q.drop_overlimit...);
    f(Sum{}, q.drop_overmemory...);
    f(Sum{}, q.ecn_mark...);
    f(Sum{}, q.new_flow_count...);
    f(Max{}, q.maxpacket...);
  }
  // Frames the qdisc dropped after it had queued them (the receiver sees their sequence gaps).
  uint64_t dropped_queued() const { return ValueOf(dropped_codel) + ValueOf(drop_overlimit); }
  bool operator==(const QdiscCountersOf&) const = default;
};
using QdiscCounters = QdiscCountersOf<Counter>;

// A root-locked qdisc, as the queues and the simulation hold one (Linux's Qdisc_ops: enqueue,
// dequeue, and dev_requeue_skb's slot ahead of them). Not thread-safe: every member is called
// under the queue's root lock. Times are the caller's clock (the TSC, or the simulation's).
class Qdisc {
 public:
  virtual ~Qdisc() = default;

  // Takes `m` (its band: BandForPriority) at `now`. Returns false, leaving `m` with the caller to
  // drop and count, when the qdisc refuses it (band_full); a qdisc that makes room by dropping
  // queued frames instead (fq_codel) frees and counts those itself.
  [[nodiscard]] virtual bool Enqueue(rte_mbuf* m, int band, Tsc now) = 0;
  // Moves frames into `batch`, requeued ones first, while `budget` allows (BulkLimit), the batch
  // has room and the qdisc has frames, at `now`. Returns how many it moved.
  virtual uint16_t DequeueBulk(Batch& batch, const DequeueBudget& budget, Tsc now) = 0;
  // Puts `frames` (refused by the driver, in their original order) back at the head; `as_list`:
  // they count as one towards the length (FlushPolicy's requeues_as_list).
  // Precondition: frames.size() <= kMaxBatch - requeued().
  virtual void Requeue(std::span<rte_mbuf* const> frames, bool as_list) = 0;
  // Whether a frame of `band` would be refused now.
  virtual bool band_full(int band) const = 0;
  // Frees every queued frame (teardown after an aborted run); returns how many.
  virtual unsigned Purge() = 0;

  // Frames queued, requeue slot included.
  unsigned backlog() const { return backlog_; }
  unsigned requeued() const { return requeue_.size(); }
  bool empty() const { return backlog_ == 0; }

  // TCP Small Queues' ledger (tsq.h), where TSQ runs: a queued frame the qdisc drops gives its
  // flow's bytes back, as kfree_skb runs the skb's destructor (tcp_wfree).
  void set_tsq(TsqLedger* tsq) { tsq_ = tsq; }

 protected:
  RequeueSlot requeue_;
  unsigned backlog_ = 0;
  TsqLedger* tsq_ = nullptr;
};

// With `bands` = 1 it is Linux's pfifo: one drop-tail FIFO of `limit` frames, priorities ignored
// (--qdisc pfifo, a qdisc installed by tc rather than the device's default).
class PfifoFast final : public Qdisc {
 public:
  explicit PfifoFast(unsigned limit = kDefaultTxQueueLen, int bands = kPfifoBands,
                     QdiscLimit bound = QdiscLimit::kLength);

  // Appends `m` to `band`; false when the limit is reached (band_full). No clock is read.
  [[nodiscard]] bool Enqueue(rte_mbuf* m, int band, Tsc /*now*/) override {
    return Enqueue(m, band);
  }
  [[nodiscard]] bool Enqueue(rte_mbuf* m, int band);

  // Requeued frames first, then band 0, 1, 2.
  uint16_t DequeueBulk(Batch& batch, const DequeueBudget& budget, Tsc /*now*/) override {
    return DequeueBulk(batch, budget);
  }
  uint16_t DequeueBulk(Batch& batch, const DequeueBudget& budget);
  uint16_t DequeueBulk(Batch& batch, uint16_t max_frames) {
    return DequeueBulk(batch, DequeueBudget{max_frames});
  }

  void Requeue(std::span<rte_mbuf* const> frames, bool as_list = false) override;

  unsigned band_backlog(int band) const { return bands_[Band(band)].count; }
  unsigned limit() const { return limit_; }
  // What the limit counts (QdiscLimit::kLength): frames in the bands, and the requeued ones.
  unsigned length() const {
    const unsigned r = requeue_.size();
    return backlog_ - r + (list_ && r > 0 ? 1 : r);
  }
  bool band_full(int band) const override {
    return bound_ == QdiscLimit::kPerBand ? bands_[Band(band)].count >= limit_ : length() >= limit_;
  }

  unsigned Purge() override;

 private:
  struct Fifo {
    std::vector<rte_mbuf*> slots;  // power-of-two ring
    uint32_t head = 0;
    uint32_t count = 0;
  };
  int Band(int band) const { return single_ ? 0 : band; }
  unsigned limit_;
  bool single_;  // pfifo: every frame in band 0
  QdiscLimit bound_;
  bool list_ = false;  // the requeued frames are one list (Requeue's as_list)
  uint32_t mask_;
  std::array<Fifo, kPfifoBands> bands_;
};

}  // namespace txbatch
