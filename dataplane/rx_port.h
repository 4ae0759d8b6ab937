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

}  // namespace txbatch
