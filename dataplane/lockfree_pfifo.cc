#include "dataplane/lockfree_pfifo.h"

#include <sched.h>

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

void LockfreePfifo::Band::Lock() {
  // The kernel holds its producer lock with preemption off; a thread here can be preempted
  // holding it (producers share CPUs, the txirq preempts), so a waiter spins a while, then
  // gives its CPU up rather than spin for the holder's whole time slice.
  for (unsigned spins = 0; !rte_spinlock_trylock(&producer_lock);) {
    if (++spins < kSpinsBeforeYield) {
      rte_pause();
    } else {
      sched_yield();
      spins = 0;
    }
  }
}

void LockfreePfifo::Band::Discard() {
  ++consumer_head;
  if (consumer_head - consumer_tail >= batch || consumer_head >= size) Empty();
  if (consumer_head >= size) consumer_head = consumer_tail = 0;
}

void LockfreePfifo::Band::Empty() {
  if (consumer_head == consumer_tail) return;
  // The last slot first: the producers, waiting on the first of them, touch no other line
  // until all are empty.
  for (unsigned i = consumer_head; i-- > consumer_tail;)
    slots[i].store(nullptr, std::memory_order_release);
  consumer_tail = consumer_head;
  // A blocked producer's look at the slot (full()) and the run's read of the waiters after it
  // are a Dekker pair with the waiter's count and that look (NolockTxQueue::WaitForSpace).
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

LockfreePfifo::LockfreePfifo(unsigned limit) : limit_(limit) {
  for (auto& b : bands_) b = std::make_unique<Band>(limit);
}

LockfreePfifo::~LockfreePfifo() { Purge(); }

bool LockfreePfifo::Enqueue(rte_mbuf* m, int band, bool* was_empty) {
  Band& b = *bands_[band];
  b.Lock();
  const unsigned at = b.producer.load(std::memory_order_relaxed);
  // Acquire: the consumer emptied the slot after it had taken the frame in it.
  const bool room = b.slots[at].load(std::memory_order_acquire) == nullptr;
  unsigned before = 0;
  if (room) {
    // Counted before it can be taken (the backlog never goes below what the rings hold), and
    // only once it has a slot (never above them).
    before = backlog_.fetch_add(1);
    b.slots[at].store(m, std::memory_order_release);  // the frame, then its slot's pointer
    b.producer.store(at + 1 == b.size ? 0 : at + 1, std::memory_order_relaxed);
  }
  rte_spinlock_unlock(&b.producer_lock);
  if (room && was_empty) *was_empty = before == 0;
  return room;
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
    // What this dequeue took is emptied by its end at the latest (the kernel's waits for a
    // batch): no taken slot outlives the run, so a band can always fill to its limit again —
    // which a buffer:N runner waiting for N = txqueuelen frames needs.
    b->Empty();
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
