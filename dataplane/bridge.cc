#include "dataplane/bridge.h"

#include <rte_ether.h>

#include <array>

#include "dataplane/make_queue.h"
#include "dataplane/qdisc.h"
#include "dataplane/tx_meta.h"

namespace txbatch {
namespace {

// Frames per RX burst (DPDK's customary 32).
constexpr uint16_t kBridgeBurst = 32;
// The band forwarded frames use (best effort, as the producers').
constexpr int kBridgeBand = 1;

// Whether `m`, a frame up to 4 bytes over the MTU's length, carries a VLAN tag in the frame
// itself (only then is its EtherType read). A tag the PMD stripped into the mbuf
// (RTE_MBUF_F_RX_VLAN) is not in pkt_len and earns no allowance: nothing puts it back on TX.
bool HasVlanTag(const rte_mbuf* m) {
  if (rte_pktmbuf_data_len(m) < RTE_ETHER_HDR_LEN) return false;
  const auto* eth = rte_pktmbuf_mtod(m, const rte_ether_hdr*);
  return eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_VLAN) ||
         eth->ether_type == rte_cpu_to_be_16(RTE_ETHER_TYPE_QINQ);
}

}  // namespace

BridgeDirection::BridgeDirection(std::string name, RxPort& in, TxDriver& out,
                                 const PolicySpec& policy, TxQueueConfig config,
                                 const LinkSpec* link, double tsc_hz, unsigned out_mtu,
                                 FrameFilter* filter)
    : name_(std::move(name)),
      in_(in),
      out_(out),
      policy_(MakeFlushPolicy(policy, tsc_hz)),
      meta_offset_(TxMetaOffset()),
      noqueue_(config.shape.noqueue),
      timing_(config.time_handover),
      filter_(filter),
      max_frame_(out_mtu + RTE_ETHER_HDR_LEN) {
  config.tsc_hz = tsc_hz;
  config.block_when_full = false;  // a bridge never blocks its RX: a full band drops
  // The RX TSC rides in TxMeta, where the queue reads it at the handover.
  config.track_stages = config.time_handover;
  queue_ = MakeTxQueue(out_, *policy_, config, window_);
  if (link != nullptr && link->Active()) link_.emplace(*link, tsc_hz);
}

BridgeDirection::~BridgeDirection() {
  queue_->StopIrq();
  Purge();
}

unsigned BridgeDirection::Poll(Tsc now, bool receive) {
  std::array<rte_mbuf*, kBridgeBurst> rx;
  uint16_t k = 0;
  if (receive) {
    k = in_.Receive(rx);
    for (uint16_t i = 0; i < k; ++i) {
      // The frame's time through the bridge starts now (its own stamp: nothing of the frame
      // itself is read or written).
      if (timing_) {
        TxMeta* t = MetaOf(rx[i], meta_offset_);
        *t = TxMeta{};
        t->stamp = now;
      }
      rx_bytes_ += rte_pktmbuf_pkt_len(rx[i]);
    }
    rx_ += k;
    // What the out-port cannot send goes no further (and a frame the in-port truncated is
    // longer than that: its ring frames hold the MTU and more).
    uint16_t fit = 0;
    for (uint16_t i = 0; i < k; ++i) {
      const uint32_t len = rte_pktmbuf_pkt_len(rx[i]);
      if (len > max_frame_ && (len > max_frame_ + 4 || !HasVlanTag(rx[i]))) {
        rte_pktmbuf_free(rx[i]);
        ++oversize_;
      } else {
        rx[fit++] = rx[i];
      }
    }
    k = fit;
    if (filter_ != nullptr) {
      uint16_t kept = 0;
      for (uint16_t i = 0; i < k; ++i) {
        if (filter_->Keep(rx[i])) {
          rx[kept++] = rx[i];
        } else {
          rte_pktmbuf_free(rx[i]);
          ++filtered_;
        }
      }
      k = kept;
    }
  }
  unsigned moved = k;
  if (link_) {
    for (uint16_t i = 0; i < k; ++i) link_->Offer(rx[i], now);
    std::array<rte_mbuf*, kBridgeBurst> out;
    std::array<Tsc, kBridgeBurst> at;
    while (const unsigned n = link_->Deliver(now, out, at)) {
      Forward({out.data(), n}, now);
      moved += n;
    }
  } else if (k > 0) {
    Forward({rx.data(), k}, now);
  }
  if (noqueue_ && !pending_.empty() &&
      policy_->Trigger(pending_.size(), pending_first_, now, /*write_done=*/true) !=
          FlushTrigger::kNone)
    SendPending();
  return moved;
}

void BridgeDirection::Forward(std::span<rte_mbuf*> frames, Tsc now) {
  if (frames.empty()) return;
  if (!noqueue_) {
    // The whole burst in, then one qdisc run: frames that arrive together can leave together.
    for (rte_mbuf* m : frames) (void)queue_->Send(m, kBridgeBand, /*run=*/false);
    queue_->RunQdisc();
    return;
  }
  for (rte_mbuf* m : frames) {
    if (pending_.empty()) pending_first_ = now;
    pending_.Push(m);
    if (pending_.size() >= policy_->spec().frames) SendPending();
  }
}

void BridgeDirection::SendPending() {
  (void)queue_->SendBatch(pending_);
  // Refused frames are dropped (Linux noqueue), counted by the queue as dropped_noqueue.
  rte_pktmbuf_free_bulk(pending_.frames().data(), pending_.size());
  pending_.Clear();
}

bool BridgeDirection::Idle() {
  if (noqueue_ && !pending_.empty()) SendPending();  // draining: nothing more will join it
  return (!link_ || link_->InFlight() == 0) && queue_->Idle();
}

unsigned BridgeDirection::Purge() {
  unsigned n = pending_.size();
  rte_pktmbuf_free_bulk(pending_.frames().data(), pending_.size());
  pending_.Clear();
  n += queue_->Purge();
  if (link_) n += link_->Purge();
  return n;
}

DirectionCounts BridgeDirection::Counts() {
  DirectionCounts c;
  c.rx = rx_;
  c.rx_bytes = rx_bytes_;
  c.rx_missed = in_.DroppedBeforeReceive();
  c.filtered = filtered_;
  c.oversize = oversize_;
  const DriverCounts d = queue_->DriverCountsNow();  // one cut, as a run window's
  const TxQueueCounters& q = queue_->counters();
  c.sent = d.accepted;
  c.xmit_calls = d.xmit_calls;
  c.qdisc_full = q.dropped_qdisc_full.Get();
  c.qdisc_dropped = q.qdisc.dropped_queued();
  c.noqueue = q.dropped_noqueue.Get();
  for (size_t i = 1; i < q.batch_hist.size(); ++i) {
    const uint64_t n = q.batch_hist[i].Get();
    c.handovers += n;
    c.handed += n * i;
  }
  c.queued = queue_->backlog() + pending_.size();
  if (link_) {
    const LinkCounters& l = link_->counters();
    c.duplicated = l.duplicated.Get();
    c.link_lost = l.lost.Get();
    c.link_limit = l.dropped_limit.Get();
    c.corrupted = l.corrupted.Get();
    c.in_link = link_->InFlight();
  }
  return c;
}

}  // namespace txbatch
