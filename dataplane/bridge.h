#pragma once
// One direction of the bump in the wire (`txbatch bridge`): frames received on one port go
// through the link model (--link, the same LinkModel the emulated wire uses), into a qdisc and,
// in batches as the policy says, out of the other port. Frames are not touched: every EtherType
// passes. Each RX burst is enqueued whole before the qdisc runs (so a burst can become a batch);
// with --qdisc none the burst is handed over in policy-sized batches (count:N) or accumulated
// (buffer:N[:T]).
//
// Poll() is called by one forwarding thread; the queue's txirq restarts a port that stopped.
// Time through the bridge is measured from the RX TSC, carried in the frame's TxMeta, to the
// driver call that took the frame.

#include <rte_mbuf.h>

#include <memory>
#include <optional>
#include <string>

#include "batching/batch.h"
#include "batching/flush_policy.h"
#include "dataplane/histogram.h"
#include "dataplane/link_model.h"
#include "dataplane/run_window.h"
#include "dataplane/rx_port.h"
#include "dataplane/tx_driver.h"
#include "dataplane/tx_queue.h"

namespace txbatch {

// What a direction does to each received frame before the link: keep it (possibly rewritten:
// the responder turns a request into its reply) or not (the direction frees and counts it).
class FrameFilter {
 public:
  virtual ~FrameFilter() = default;
  virtual bool Keep(rte_mbuf* m) = 0;
};

// What one direction did since it started. The books: arrived (rx + rx_missed) + duplicated =
// sent + dropped (every reason, rx_missed among them) + filtered + queued + in_link.
struct DirectionCounts {
  uint64_t rx = 0, rx_bytes = 0;  // taken from the in-port by its PMD
  uint64_t rx_missed = 0;   // reached the in-port but dropped before its PMD took them
                            // (RxPort::DroppedBeforeReceive: a full ring, the NIC's or the kernel's)
  uint64_t sent = 0;        // accepted by the out-port
  uint64_t duplicated = 0;  // copies the link made
  uint64_t link_lost = 0;   // dropped by the link's loss model
  uint64_t link_limit = 0;  // dropped because the link held `limit` frames
  uint64_t qdisc_full = 0;  // dropped on a full qdisc band
  uint64_t qdisc_dropped = 0;  // dropped by the qdisc after it had queued them (fq_codel)
  uint64_t noqueue = 0;     // refused by the out-port with --qdisc none
  uint64_t oversize = 0;    // longer than the out-port's MTU allows (the kernel behind an
                            // af_packet port would drop it unseen, or it was truncated at RX)
  uint64_t corrupted = 0;   // forwarded with a bit the link flipped
  uint64_t filtered = 0;    // kept out by the FrameFilter (the responder: not answered)
  uint64_t queued = 0;      // in the qdisc (or a --qdisc none batch being filled)
  uint64_t in_link = 0;     // held by the link
  uint64_t handovers = 0;   // driver handovers (calls, or xmit_more chains)
  uint64_t handed = 0;      // frames in them
  uint64_t xmit_calls = 0;  // the out-port's Xmit calls
  uint64_t arrived() const { return rx + rx_missed; }
  uint64_t dropped() const {
    return rx_missed + link_lost + link_limit + qdisc_full + qdisc_dropped + noqueue + oversize;
  }
  bool Balanced() const {
    return arrived() + duplicated == sent + dropped() + filtered + queued + in_link;
  }
};

class BridgeDirection {
 public:
  // `in` is the port's RX side, `out` the other port's TX side (the responder: its own; both
  // outlive this); `config.time_handover`: stamp
  // each frame at RX and time it to the handover (TakeLatency); `link` may be null (no
  // impairment this way); `filter` may be null (every frame goes on), else it outlives this.
  // `out_mtu`: the largest IP packet `out` sends; a received frame longer than that and its
  // Ethernet header (and a VLAN tag, if it has one) is freed at RX and counted `oversize`.
  BridgeDirection(std::string name, RxPort& in, TxDriver& out, const PolicySpec& policy,
                  TxQueueConfig config, const LinkSpec* link, double tsc_hz, unsigned out_mtu,
                  FrameFilter* filter = nullptr);
  ~BridgeDirection();
  BridgeDirection(const BridgeDirection&) = delete;
  BridgeDirection& operator=(const BridgeDirection&) = delete;

  // One RX burst into the link (or straight on), whatever the link has delivered by `now` into
  // the qdisc, and the qdisc run. `receive` false: only the link and the qdisc (draining).
  // Returns the frames received and delivered.
  unsigned Poll(Tsc now, bool receive = true);
  // When the link delivers next (kNever: it holds nothing).
  Tsc NextArrival() const { return link_ ? link_->NextArrival() : kNever; }
  // Nothing in the link, the qdisc, a batch being filled or the port's hands.
  bool Idle();
  // Frees what is still held (at exit after an unfinished drain); returns how many.
  unsigned Purge();

  void Start() { queue_->StartIrq(); }
  void Stop() { queue_->StopIrq(); }

  DirectionCounts Counts();
  // Time through the bridge since the last call (ns), and nothing when no frame went.
  LatencyHistogram TakeLatency() { return queue_->TakeHandoverLatency(); }
  const std::string& name() const { return name_; }

 private:
  // Hands what the link delivered (or RX gave) to the qdisc, or under --qdisc none to the port.
  void Forward(std::span<rte_mbuf*> frames, Tsc now);
  void SendPending();

  const std::string name_;
  RxPort& in_;
  TxDriver& out_;
  std::unique_ptr<FlushPolicy> policy_;
  RunWindow window_;  // never opened: the bridge counts for itself
  std::unique_ptr<TxQueue> queue_;
  std::optional<LinkModel> link_;
  const int meta_offset_;
  const bool noqueue_;
  const bool timing_;
  FrameFilter* const filter_;
  const uint32_t max_frame_;  // out_mtu + the Ethernet header
  uint64_t rx_ = 0, rx_bytes_ = 0, filtered_ = 0, oversize_ = 0;
  Batch pending_;  // --qdisc none: the batch being filled
  Tsc pending_first_ = 0;
};

}  // namespace txbatch
