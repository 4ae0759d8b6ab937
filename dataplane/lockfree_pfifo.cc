#include "dataplane/lockfree_pfifo.h"

#include <algorithm>

namespace txbatch {

namespace {

// ptr_ring_init's batch: two cache lines of pointers, or one slot in a ring too small to have
// two such batches.
unsigned DiscardBatch(unsigned size) {
  const unsigned two_lines = 2 * 64 / sizeof(void*);
  return two_lines > size / 2 ? 1 : two_lines;
}

}  // namespace

LockfreePfifo::Band::Band(unsigned limit)
    : size(std::max(1u, limit)),
      batch(DiscardBatch(size)),
      slots(std::make_unique<std::atomic<rte_mbuf*>[]>(size)) {
  for (unsigned i = 0; i < size; ++i) slots[i].store(nullptr, std::memory_order_relaxed);
}

bool LockfreePfifo::Band::Produce(rte_mbuf* m) {
  rte_spinlock_lock(&producer_lock);
  const unsigned at = producer.load(std::memory_order_relaxed);
  // Acquire: the consumer emptied the slot after it had taken the frame in it.
  const bool room = slots[at].load(std::memory_order_acquire) == nullptr;
  if (room) {
    slots[at].store(m, std::memory_order_release);  // the frame, then its slot's pointer
    producer.store(at + 1 == size ? 0 : at + 1, std::memory_order_relaxed);
  }
  rte_spinlock_unlock(&producer_lock);
  return room;
}

void LockfreePfifo::Band::Discard() {
  const unsigned taken = consumer_head++;
  if (consumer_head - consumer_tail >= batch || consumer_head >= size) {
    // The last slot first: the producers, waiting on the first of them, touch no other line
    // until all are empty.
    for (unsigned i = taken + 1; i-- > consumer_tail;)
      slots[i].store(nullptr, std::memory_order_release);
    consumer_tail = consumer_head;
  }
  if (consumer_head >= size) consumer_head = consumer_tail = 0;
}

LockfreePfifo::LockfreePfifo(unsigned limit) : limit_(limit) {
  for (auto& b : bands_) b = std::make_unique<Band>(limit);
}

LockfreePfifo::~LockfreePfifo() { Purge(); }

bool LockfreePfifo::Enqueue(rte_mbuf* m, int band, bool* was_empty) {
  // Counted before it can be taken, so the backlog never goes below what the ring holds; given
  // back if the band refuses it.
  const unsigned before = backlog_.fetch_add(1);
  if (!bands_[band]->Produce(m)) {
    backlog_.fetch_sub(1);
    return false;
  }
  if (was_empty) *was_empty = before == 0;
  return true;
}

uint16_t LockfreePfifo::DequeueBulk(Batch& batch, const DequeueBudget& budget) {
  BulkLimit limit(budget);
  uint16_t taken = requeue_.TakeInto(batch, limit, 0);
  for (auto& b : bands_) {
    while (limit.Allows(taken) && !batch.full()) {
      rte_mbuf* const m = b->Peek();
      if (m == nullptr) break;
      b->Discard();
      limit.Took(m);
      batch.Push(m);
      ++taken;
    }
  }
  if (taken) backlog_.fetch_sub(taken);
  return taken;
}

void LockfreePfifo::Requeue(std::span<rte_mbuf* const> frames, bool /*as_list*/) {
  requeue_.PushFront(frames);
  backlog_.fetch_add(static_cast<unsigned>(frames.size()));
}

unsigned LockfreePfifo::Purge() {
  unsigned n = 0;
  Batch batch;
  while (true) {
    batch.Clear();
    if (DequeueBulk(batch, kMaxBatch) == 0) break;
    rte_pktmbuf_free_bulk(batch.frames().data(), batch.size());
    n += batch.size();
  }
  return n;
}

}  // namespace txbatch
