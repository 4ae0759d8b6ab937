#pragma once
// The receive end of `txbatch sink`, beside the bridge (bridge.h): frames from a port — through a
// link model where one is in front — into an RxSink, each burst stamped as it arrives. The
// command (tools/sink_cmd.cc) brings the port, the stop and what it does between passes (its
// intervals, telemetry); nothing here prints.

#include <array>
#include <cstdint>
#include <functional>

#include <rte_mbuf.h>

#include "base/tsc.h"
#include "dataplane/link_model.h"
#include "dataplane/rx_port.h"
#include "dataplane/rx_sink.h"

namespace txbatch {

class SinkLoop {
 public:
  // `link` (may be null): what frames cross before the sink. After `spin_polls` empty passes in
  // a row the loop sleeps `idle_sleep_ns` a pass, so a sink at rest leaves the CPUs to others.
  SinkLoop(RxPort& in, RxSink& sink, LinkModel* link, unsigned spin_polls, double idle_sleep_ns)
      : in_(in), sink_(sink), link_(link), spin_polls_(spin_polls), idle_sleep_ns_(idle_sleep_ns) {}

  // Receives until `stop()` says so or the TSC reaches `end` (kNever: no end), calling
  // `tick(now)` after each pass with the pass's start.
  void Run(Tsc end, const std::function<bool()>& stop, const std::function<void(Tsc)>& tick);
  // What the link still holds arrives (it was sent), until the TSC reaches `until`; what is
  // left then is freed (link_in_flight).
  void DrainLink(Tsc until);

  // The first and the last frame's arrival (kNever and 0 before any).
  Tsc first() const { return first_; }
  Tsc last() const { return last_; }
  uint64_t link_lost() const { return link_ ? link_->counters().frames_lost.Get() : 0; }
  uint64_t link_in_flight() const { return link_in_flight_; }

 private:
  // One receive burst at `now` and what the link delivers by its arrival; returns the frames
  // that moved (received, or delivered by the link).
  unsigned Pass(Tsc now);
  void Hand(unsigned n);  // rx_[0..n) arrived at at_[0..n): to the sink

  RxPort& in_;
  RxSink& sink_;
  LinkModel* const link_;
  const unsigned spin_polls_;
  const double idle_sleep_ns_;
  std::array<rte_mbuf*, 32> rx_{};
  std::array<Tsc, 32> at_{};
  Tsc first_ = kNever, last_ = 0;
  uint64_t link_in_flight_ = 0;
};

}  // namespace txbatch
