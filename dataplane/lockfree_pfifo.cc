#include "dataplane/lockfree_pfifo.h"

namespace txbatch {

LockfreePfifo::LockfreePfifo(unsigned limit) : limit_(limit) {
  for (auto& b : bands_) b = std::make_unique<Band>(limit);
}

LockfreePfifo::~LockfreePfifo() { Purge(); }

bool LockfreePfifo::Enqueue(rte_mbuf* m, int band, bool* was_empty) {
  Band& b = *bands_[band];
  // Reserve a place first: the count, not the FIFO, enforces the limit, so the FIFO never holds
  // more than the nodes it reserved.
  if (b.count.fetch_add(1) >= limit_) {
    b.count.fetch_sub(1);
    return false;
  }
  const unsigned before = backlog_.fetch_add(1);
  if (!b.fifo.bounded_push(m)) {  // cannot happen with `limit` nodes reserved; treat as full
    backlog_.fetch_sub(1);
    b.count.fetch_sub(1);
    return false;
  }
  if (was_empty) *was_empty = before == 0;
  return true;
}

uint16_t LockfreePfifo::DequeueBulk(Batch& batch, const DequeueBudget& budget) {
  BulkLimit limit(budget);
  uint16_t taken = requeue_.TakeInto(batch, limit, 0);
  for (auto& b : bands_) {
    unsigned from_band = 0;
    rte_mbuf* m;
    while (limit.Allows(taken) && !batch.full() && b->fifo.pop(m)) {
      limit.Took(m);
      batch.Push(m);
      ++from_band;
      ++taken;
    }
    if (from_band) b->count.fetch_sub(from_band);
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
