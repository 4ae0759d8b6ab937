#pragma once
// The receive side between the dataplane and the drivers, in both directions, so that neither
// knows the other's types:
// * RxPort, pulled: the RX half of a port beside its TX half (TxDriver), as BESS keeps
//   Port::RecvPackets beside SendPackets. The bridge, the responder and the sink receive through
//   it; drivers/ethdev (an ethdev RX queue) and drivers/verbs (a UD receive queue) implement it.
// * FrameReceiver, pushed: where a driver that delivers (emu's wire, a loopback's RX, a verbs
//   receive queue on the sending host) hands what arrived. RxSink implements it.

#include <rte_mbuf.h>

#include <cstdint>
#include <span>

#include "base/counters.h"
#include "base/tsc.h"

namespace txbatch {

class RxPort {
 public:
  virtual ~RxPort() = default;
  // Receives up to out.size() frames (at most 65535) into `out`, without waiting; ownership of
  // those frames passes to the caller. Returns how many. Called by one thread at a time.
  virtual uint16_t Receive(std::span<rte_mbuf*> out) = 0;
};

class FrameReceiver {
 public:
  virtual ~FrameReceiver() = default;
  // Takes `frames` (ownership moves: the receiver frees them), which arrived at `arrival` (TSC,
  // one per frame). Called by one thread at a time.
  virtual void Receive(std::span<rte_mbuf* const> frames, std::span<const Tsc> arrival) = 0;
};

// A receiver's own books: the TSC its Receive calls took and the frames they were handed. The
// emulated receiver (the sink) runs inside a driver's call or reclaim, under the TX lock, on the
// sending thread's core; the TX queue takes these cycles out of its TX path's and completion's
// (tx_cycles, completion_cycles) so `cycles/pkt` and `CPU ns` mean the TX path alone, and the
// run reports the receiver's share apart. Two TSC reads a Receive call (a burst or a reclaim).
// Same rule as the receiver: one thread at a time.
class TimedReceiver final : public FrameReceiver {
 public:
  explicit TimedReceiver(FrameReceiver& inner) : inner_(inner) {}
  void Receive(std::span<rte_mbuf* const> frames, std::span<const Tsc> arrival) override {
    const Tsc t0 = Now();
    inner_.Receive(frames, arrival);
    cycles_.Add(Now() - t0);
    frames_.Add(frames.size());
  }
  uint64_t cycles() const { return cycles_.Get(); }
  uint64_t frames() const { return frames_.Get(); }

 private:
  FrameReceiver& inner_;
  Counter cycles_, frames_;
};

}  // namespace txbatch
