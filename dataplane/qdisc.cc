#include "dataplane/qdisc.h"

#include <bit>

namespace txbatch {

int BandForPriority(uint8_t priority) {
  static constexpr std::array<uint8_t, 16> kPrio2Band = {1, 2, 2, 2, 1, 2, 0, 0,
                                                         1, 1, 1, 1, 1, 1, 1, 1};
  return kPrio2Band[priority & 15];
}

PfifoFast::PfifoFast(unsigned limit, int bands, QdiscLimit bound)
    : limit_(limit),
      single_(bands == 1),
      bound_(bound),
      mask_(std::bit_ceil(std::max(limit, 1u)) - 1) {
  for (int i = 0; i < (single_ ? 1 : kPfifoBands); ++i) bands_[i].slots.resize(mask_ + 1);
}

bool PfifoFast::Enqueue(rte_mbuf* m, int band) {
  if (band_full(band)) return false;
  Fifo& b = bands_[Band(band)];
  b.slots[(b.head + b.count) & mask_] = m;
  ++b.count;
  ++backlog_;
  return true;
}

uint16_t PfifoFast::DequeueBulk(Batch& batch, const DequeueBudget& budget) {
  BulkLimit limit(budget);
  uint16_t taken = requeue_.TakeInto(batch, limit, 0);
  for (Fifo& b : bands_) {
    while (b.count > 0 && limit.Allows(taken) && !batch.full()) {
      limit.Took(b.slots[b.head]);
      batch.Push(b.slots[b.head]);
      b.head = (b.head + 1) & mask_;
      --b.count;
      ++taken;
    }
  }
  backlog_ -= taken;
  return taken;
}

void PfifoFast::Requeue(std::span<rte_mbuf* const> frames, bool as_list) {
  requeue_.PushFront(frames);
  list_ = as_list;
  backlog_ += static_cast<unsigned>(frames.size());
}

unsigned PfifoFast::Purge() {
  unsigned n = 0;
  Batch batch;
  while (!empty()) {
    batch.Clear();
    DequeueBulk(batch, kMaxBatch);
    rte_pktmbuf_free_bulk(batch.frames().data(), batch.size());
    n += batch.size();
  }
  return n;
}

}  // namespace txbatch
