#include "dataplane/sink_loop.h"

#include <algorithm>

#include "dataplane/producer.h"  // SleepNs

namespace txbatch {

void SinkLoop::Hand(unsigned n) {
  if (n == 0) return;
  first_ = std::min(first_, at_.front());
  last_ = std::max(last_, at_[n - 1]);
  sink_.Receive({rx_.data(), n}, {at_.data(), n});
}

unsigned SinkLoop::Pass(Tsc now) {
  const uint16_t k = in_.Receive(rx_);
  // Stamped after the receive returns: a frame sent while it ran carries a TX stamp later than
  // `now` (it counted as arriving before it was sent, and was left out of latency).
  const Tsc arrived = k ? Now() : now;
  for (uint16_t i = 0; i < k; ++i) at_[i] = arrived;
  if (link_ == nullptr) {
    Hand(k);
    return k;
  }
  unsigned moved = k;
  for (uint16_t i = 0; i < k; ++i) link_->Offer(rx_[i], arrived);
  while (const unsigned n = link_->Deliver(arrived, rx_, at_)) {
    Hand(n);
    moved += n;
  }
  return moved;
}

void SinkLoop::Run(Tsc end, const std::function<bool()>& stop,
                   const std::function<void(Tsc)>& tick) {
  unsigned idle = 0;
  while (!stop()) {
    const Tsc now = Now();
    if (now >= end) break;
    const unsigned moved = Pass(now);
    tick(now);
    idle = moved ? 0 : idle + 1;
    if (idle > spin_polls_) SleepNs(idle_sleep_ns_);
  }
}

void SinkLoop::DrainLink(Tsc until) {
  if (link_ == nullptr) return;
  while (link_->InFlight() > 0 && Now() < until) {
    const unsigned n = link_->Deliver(Now(), rx_, at_);
    Hand(n);
    if (n == 0) SleepNs(idle_sleep_ns_);
  }
  link_in_flight_ = link_->Purge();
}

}  // namespace txbatch
