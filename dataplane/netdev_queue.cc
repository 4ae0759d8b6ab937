#include "dataplane/netdev_queue.h"

#include <algorithm>
#include <array>

#include "dataplane/gso.h"
#include "dataplane/tx_queue.h"

namespace txbatch {

NetdevQueue::NetdevQueue(TxDriver& driver, const FlushPolicy& policy, const BqlBounds& bql,
                         double tsc_hz, TxQueueCounters& counters)
    : driver_(driver),
      counters_(counters),
      bql_ends_chain_(policy.spec().bql_stop_ends_chain()),
      bql_bytes_(driver.bql_bytes()) {
  if (policy.spec().uses_bql() && driver.has_bql()) {
    dql_.emplace(static_cast<Tsc>(bql.hold_s * tsc_hz), bql.limit_min, bql.limit_max,
                 policy.spec().bql_starts_at_min() ? DqlStart::kMinLimit : DqlStart::kZero);
    counters_.bql_limit_max.Max(dql_->limit());
  }
}

XmitResult NetdevQueue::Xmit(std::span<rte_mbuf* const> frames, Handover handover, bool from_qdisc,
                             Tsc now) {
  const bool was_stopped = Stopped();
  if ((from_qdisc && was_stopped) || frames.empty()) return {};
  const auto n = static_cast<uint16_t>(frames.size());
  // What the driver is given is read before each call: it may free what it takes.
  std::array<uint32_t, kMaxBatch> len, wire;
  for (uint16_t i = 0; i < n; ++i) {
    wire[i] = WireFrames(frames[i]);
    if (dql_) len[i] = BqlBytesOf(frames[i], bql_bytes_);
  }
  DriverCounters& c = driver_.counters_;
  uint16_t accepted = 0;
  if (handover == Handover::kXmitMore) {
    // dev_hard_start_xmit: one call per frame, xmit_more on all but the last; a queue that
    // stops before the last ends the chain and the rest is requeued — the driver's stop (ring
    // full), and BQL's until 4.20 (netif_xmit_stopped; since, netif_tx_queue_stopped). A driver
    // accounts a frame to BQL before deciding on the doorbell, and rings it on a stopped queue
    // (ixgbe in 3.18 and 6.x, e1000 in 6.x: `netif_xmit_stopped(txq) || !netdev_xmit_more()`;
    // 3.18's e1000 rang every frame, which emu does not model): a frame that stops the queue
    // through BQL, and on 4.20 on every frame after it in the chain, goes without xmit_more.
    while (accepted < n) {
      const bool bql_stopped =
          dql_ && (bql_xoff_ || dql_->Avail() - static_cast<int64_t>(len[accepted]) < 0);
      c.xmit_calls.Add();
      c.offered.Add();
      if (!driver_.XmitOne(frames[accepted], accepted + 1 < n && !bql_stopped, now)) break;
      c.accepted.Add(wire[accepted]);
      if (dql_) BqlSent(len[accepted]);
      ++accepted;
      if (accepted < n && (bql_ends_chain_ ? Stopped() : driver_.Stopped())) break;
    }
  } else {
    c.xmit_calls.Add();
    c.offered.Add(n);
    accepted = driver_.Xmit(frames, now);
    for (uint16_t i = 0; i < accepted; ++i) {
      c.accepted.Add(wire[i]);
      if (dql_) BqlSent(len[i]);
    }
  }
  return {accepted, /*offered=*/true, /*stopped_now=*/Stopped() && !was_stopped};
}

void NetdevQueue::BqlSent(uint32_t bytes) {
  dql_->Queued(bytes);
  if (dql_->Avail() < 0 && !bql_xoff_) {
    bql_xoff_ = true;
    counters_.bql_stops.Add();
  }
}

bool NetdevQueue::Complete(Tsc now, unsigned* reclaimed) {
  const bool was_stopped = Stopped();
  const unsigned n = driver_.Complete(now);
  if (reclaimed != nullptr) *reclaimed = n;
  if (dql_) {
    // netdev_tx_completed_queue: adapt the limit, and let the stack send again once the bytes
    // in flight are back under it. Bytes count from the driver's total, not from this call:
    // a wire-less NIC completes inside Xmit.
    const uint64_t total = driver_.counters().completed_bytes.Get();
    const uint64_t done = total - bql_reported_;
    bql_reported_ = total;
    if (done > 0) {
      dql_->Completed(static_cast<uint32_t>(std::min<uint64_t>(done, UINT32_MAX)), now);
      counters_.bql_limit_max.Max(dql_->limit());
    }
    if (bql_xoff_ && dql_->Avail() >= 0) bql_xoff_ = false;
  }
  return was_stopped && !Stopped();
}

}  // namespace txbatch
