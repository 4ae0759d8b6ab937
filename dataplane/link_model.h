#pragma once
// The link behind a wire: netem's impairments (link_spec.h) applied to each frame that left the
// wire, in netem's order — duplicate, loss, corrupt, then a time to arrive from delay, jitter
// and its distribution (or at once, for a frame picked to reorder), behind a rate bottleneck if
// one is set — and the frames held until they arrive. A seed makes every frame's fate repeat.
// One implementation for every place a link sits: behind the emulated NIC's wire, in each
// direction of the bridge, in front of a sink.
//
// Where it differs from Linux sch_netem.c (doc/design.md has the list): corrupt flips a bit in the
// first 38 bytes of the frame — the Ethernet, IPv4 and port fields the sink verifies — not
// anywhere, so every corrupted frame is detected; the 4-state loss model follows its paper's
// transitions (Salsano et al.).
//
// Not thread-safe: the driver calls it under the queue's TX lock.

#include <rte_mbuf.h>

#include <boost/circular_buffer.hpp>
#include <cstdint>
#include <queue>
#include <random>
#include <span>
#include <vector>

#include "base/counters.h"
#include "base/tsc.h"
#include "dataplane/link_spec.h"

namespace txbatch {

struct LinkCounters {
  Counter offered;        // frames that entered the link (duplicates not included)
  Counter lost;           // dropped by the loss model
  Counter dropped_limit;  // dropped because the link held `limit` frames
  Counter duplicated;     // extra copies made
  Counter corrupted;      // frames with a bit flipped
  Counter reordered;      // frames sent ahead of the others (reorder)
  Counter dup_failed;     // copies the pool could not give (the frame went alone)
  // Frames of which no intact copy will arrive (dropped, or corrupted, every copy): what the
  // sink must count as sequence gaps.
  Counter frames_lost;
};

class LinkModel {
 public:
  LinkModel(const LinkSpec& spec, double tsc_hz);
  ~LinkModel();
  LinkModel(const LinkModel&) = delete;
  LinkModel& operator=(const LinkModel&) = delete;

  // Takes `m`, whose last bit left the wire at `departure`: decides its fate; what survives is
  // held until it arrives. A copy comes from `m`'s pool.
  void Offer(rte_mbuf* m, Tsc departure);
  // Moves frames that have arrived by `now`, in arrival order, into `out` with their arrival
  // TSCs in `at` (both at least as long as each other); returns how many.
  unsigned Deliver(Tsc now, std::span<rte_mbuf*> out, std::span<Tsc> at);
  Tsc NextArrival() const;
  unsigned InFlight() const { return static_cast<unsigned>(in_order_.size() + overtaking_.size()); }
  // Frees what it holds (teardown); returns how many.
  unsigned Purge();

  const LinkCounters& counters() const { return counters_; }
  const LinkSpec& spec() const { return spec_; }

 private:
  struct Correlated {  // netem's crndstate: the last value and the weight it carries
    uint32_t last = 0;
    uint64_t rho = 0;  // correlation scaled to 2^32
  };
  struct Held {
    Tsc arrival;
    uint64_t order;  // ties keep the order frames came in
    rte_mbuf* m;
    bool operator>(const Held& o) const {
      return arrival != o.arrival ? arrival > o.arrival : order > o.order;
    }
  };

  // Returns how many intact copies of the frame it holds (0, 1 or 2).
  unsigned Enqueue(rte_mbuf* m, Tsc now, bool may_duplicate);
  uint32_t Random() { return static_cast<uint32_t>(prng_()); }
  uint32_t CorrelatedRandom(Correlated& c);
  bool Happens(double p, Correlated& c);  // netem: p >= a correlated 32-bit draw
  bool LossEvent();
  double DelayNs();

  const LinkSpec spec_;
  const double tsc_per_ns_;
  std::mt19937 prng_;
  Correlated delay_c_, loss_c_, dup_c_, reorder_c_, corrupt_c_;
  int state_ = 1;         // loss state: 1..4; gemodel: 1 good, 2 bad
  unsigned counter_ = 0;  // frames since the last reorder (netem's counter, for `gap`)
  uint64_t order_ = 0;
  Tsc last_arrival_ = 0;  // the latest arrival held (the rate bottleneck's reference)
  // The frames held, in (arrival, order) across both: one that arrives no earlier than the last
  // one queued in order (every frame of a link without jitter or reorder) joins the ring in O(1);
  // one that overtakes goes to the heap. Deliver takes the earlier head. The ring holds `limit`.
  boost::circular_buffer<Held> in_order_;
  std::priority_queue<Held, std::vector<Held>, std::greater<>> overtaking_;
  bool RingFirst() const {  // the earliest frame held is the ring's head (both not empty)
    return overtaking_.empty() || overtaking_.top() > in_order_.front();
  }
  LinkCounters counters_;
};

}  // namespace txbatch
