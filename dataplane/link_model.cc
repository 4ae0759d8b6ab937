#include "dataplane/link_model.h"

#include <algorithm>
#include <cmath>

namespace txbatch {
namespace {

// Frames get a bit flipped within the headers the sink verifies (VerifyHeaders): Ethernet (MACs,
// type), IPv4 (its checksum covers every field) and the L4 ports.
constexpr unsigned kCorruptSpan = 38;

uint64_t Rho(double corr) {
  return corr <= 0 ? 0 : static_cast<uint64_t>(std::min(corr, 1.0) * 4294967295.0) + 1;
}

uint32_t Threshold(double p) {
  return p >= 1 ? UINT32_MAX : static_cast<uint32_t>(std::max(p, 0.0) * 4294967296.0);
}

}  // namespace

LinkModel::LinkModel(const LinkSpec& spec, double tsc_hz)
    : spec_(spec),
      tsc_per_ns_(tsc_hz / 1e9),
      prng_(static_cast<uint32_t>(spec.seed)),
      in_order_(spec.limit) {
  delay_c_.rho = Rho(spec.delay_corr);
  loss_c_.rho = Rho(spec.loss_corr);
  dup_c_.rho = Rho(spec.duplicate_corr);
  reorder_c_.rho = Rho(spec.reorder_corr);
  corrupt_c_.rho = Rho(spec.corrupt_corr);
  for (Correlated* c : {&delay_c_, &loss_c_, &dup_c_, &reorder_c_, &corrupt_c_}) c->last = Random();
}

LinkModel::~LinkModel() { Purge(); }

uint32_t LinkModel::CorrelatedRandom(Correlated& c) {
  const uint64_t value = Random();
  if (c.rho == 0) return static_cast<uint32_t>(value);
  const auto answer =
      static_cast<uint32_t>((value * ((1ull << 32) - c.rho) + uint64_t{c.last} * c.rho) >> 32);
  c.last = answer;
  return answer;
}

bool LinkModel::Happens(double p, Correlated& c) {
  return p > 0 && Threshold(p) >= CorrelatedRandom(c);
}

bool LinkModel::LossEvent() {
  switch (spec_.loss) {
    case LinkSpec::Loss::kNone:
      return false;
    case LinkSpec::Loss::kRandom:
      return Happens(spec_.loss_p, loss_c_);
    case LinkSpec::Loss::kState: {
      // The GI 4-state model: 1 transmitted in a gap, 2 transmitted in a burst, 3 lost in a
      // burst, 4 an isolated loss; the frame's fate is the state it moves to.
      const double r = Random() / 4294967296.0;
      switch (state_) {
        case 1:
          state_ = r < spec_.p14 ? 4 : r < spec_.p14 + spec_.p13 ? 3 : 1;
          break;
        case 2:
          state_ = r < spec_.p23 ? 3 : 2;
          break;
        case 3:
          state_ = r < spec_.p32 ? 2 : r < spec_.p32 + spec_.p31 ? 1 : 3;
          break;
        default:
          state_ = 1;
      }
      return state_ == 3 || state_ == 4;
    }
    case LinkSpec::Loss::kGemodel: {
      // Gilbert–Elliott as netem: move between good (1) and bad (2), then lose with the loss
      // probability of the state the frame was offered in (1-k good, 1-h bad).
      const bool bad = state_ == 2;
      if (!bad && Random() < Threshold(spec_.ge_p)) state_ = 2;
      if (bad && Random() < Threshold(spec_.ge_r)) state_ = 1;
      return Random() < Threshold(bad ? spec_.ge_1h : spec_.ge_1k);
    }
  }
  return false;
}

double LinkModel::DelayNs() {
  const double mu = spec_.delay_ns, sigma = spec_.jitter_ns;
  if (sigma <= 0) return mu;
  const uint32_t rnd = CorrelatedRandom(delay_c_);
  if (spec_.dist_table.empty())  // uniform in [mu - sigma, mu + sigma)
    return mu - sigma + 2 * sigma * (rnd / 4294967296.0);
  const int16_t t = spec_.dist_table[rnd % spec_.dist_table.size()];
  return mu + sigma * t / kNetemDistScale;
}

void LinkModel::Offer(rte_mbuf* m, Tsc departure) {
  counters_.offered.Add();
  if (Enqueue(m, departure, /*may_duplicate=*/true) == 0) counters_.frames_lost.Add();
}

unsigned LinkModel::Enqueue(rte_mbuf* m, Tsc now, bool may_duplicate) {
  int count = 1;
  if (may_duplicate && Happens(spec_.duplicate, dup_c_)) ++count;
  if (LossEvent()) --count;
  if (count == 0) {
    counters_.lost.Add();
    rte_pktmbuf_free(m);
    return 0;
  }
  unsigned intact = 0;
  if (count > 1) {
    // The copy takes its own way through the link (netem re-enqueues a clone), never copied
    // again.
    if (rte_mbuf* copy = rte_pktmbuf_copy(m, m->pool, 0, UINT32_MAX)) {
      counters_.duplicated.Add();
      intact += Enqueue(copy, now, /*may_duplicate=*/false);
    } else {
      counters_.dup_failed.Add();
    }
  }
  bool corrupted = false;
  if (Happens(spec_.corrupt, corrupt_c_)) {
    corrupted = true;
    const unsigned span = std::min<unsigned>(kCorruptSpan, rte_pktmbuf_data_len(m));
    auto* p = rte_pktmbuf_mtod(m, uint8_t*);
    p[Random() % span] ^= static_cast<uint8_t>(1u << (Random() % 8));
    counters_.corrupted.Add();
  }
  if (InFlight() >= spec_.limit) {
    counters_.dropped_limit.Add();
    rte_pktmbuf_free(m);
    return intact;
  }
  Tsc arrival;
  if (spec_.reorder > 0 && (spec_.gap == 0 || counter_ + 1 >= spec_.gap) &&
      Happens(spec_.reorder, reorder_c_)) {
    // Sent at once, ahead of the frames still delayed.
    arrival = now;
    counter_ = 0;
    counters_.reordered.Add();
  } else {
    double delay = std::max(0.0, DelayNs()) * tsc_per_ns_;
    Tsc from = now;
    if (spec_.rate_bps > 0) {
      // A bottleneck: a frame starts when the one before it has arrived, less the delay they
      // share (netem's rate: the last frame held is the reference point).
      if (InFlight() > 0 && last_arrival_ > now) {
        delay = std::max(0.0, delay - static_cast<double>(last_arrival_ - now));
        from = last_arrival_;
      }
      const double bytes =
          std::max(0, static_cast<int>(rte_pktmbuf_pkt_len(m)) + spec_.rate_overhead);
      delay += bytes * 8 / spec_.rate_bps * 1e9 * tsc_per_ns_;
    }
    arrival = from + static_cast<Tsc>(delay);
    ++counter_;
  }
  last_arrival_ = std::max(last_arrival_, arrival);
  const Held h{arrival, order_++, m};
  if (in_order_.empty() || arrival >= in_order_.back().arrival)
    in_order_.push_back(h);
  else
    overtaking_.push(h);
  return intact + (corrupted ? 0 : 1);
}

Tsc LinkModel::NextArrival() const {
  if (in_order_.empty()) return overtaking_.empty() ? kNever : overtaking_.top().arrival;
  return RingFirst() ? in_order_.front().arrival : overtaking_.top().arrival;
}

unsigned LinkModel::Deliver(Tsc now, std::span<rte_mbuf*> out, std::span<Tsc> at) {
  unsigned n = 0;
  while (n < out.size() && n < at.size() && InFlight() > 0 && NextArrival() <= now) {
    const bool ring = !in_order_.empty() && RingFirst();
    const Held& h = ring ? in_order_.front() : overtaking_.top();
    out[n] = h.m;
    at[n] = h.arrival;
    if (ring)
      in_order_.pop_front();
    else
      overtaking_.pop();
    ++n;
  }
  return n;
}

unsigned LinkModel::Purge() {
  const unsigned n = InFlight();
  for (const Held& h : in_order_) rte_pktmbuf_free(h.m);
  in_order_.clear();
  for (; !overtaking_.empty(); overtaking_.pop()) rte_pktmbuf_free(overtaking_.top().m);
  return n;
}

}  // namespace txbatch
