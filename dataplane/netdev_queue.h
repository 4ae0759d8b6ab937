#pragma once
// The device side of one TX queue, as Linux's struct netdev_queue: the driver, BQL's limit (dql)
// and the stack's XOFF state. It hands a bulk to the driver as the policy's handover says and
// reclaims completions, keeping BQL's books. TxQueue calls it under its TX lock (HARD_TX_LOCK);
// the simulation engine (sim_engine.h) calls it from its one thread. Not thread-safe.

#include <cstdint>
#include <optional>
#include <span>

#include "base/tsc.h"
#include "batching/dql.h"
#include "batching/flush_policy.h"
#include "dataplane/tx_driver.h"

namespace txbatch {

struct TxQueueCounters;

// What one handover did (NetdevQueue::Xmit).
struct XmitResult {
  uint16_t accepted = 0;     // frames the driver took (ownership as TxDriver::Xmit)
  bool offered = false;      // the driver was called: a stopped queue refuses a qdisc's bulk
  bool stopped_now = false;  // the queue went from running to stopped: tell the completion role
};

class NetdevQueue {
 public:
  // BQL is kept when `policy` reads it and the driver reports completions (has_bql); its hold
  // time is `bql.hold_s` at `tsc_hz`; its limit starts where the policy's kernel's dql_reset
  // leaves it (PolicySpec::bql_starts_at_min). `counters` receives bql_stops and bql_limit_max.
  NetdevQueue(TxDriver& driver, const FlushPolicy& policy, const BqlBounds& bql, double tsc_hz,
              TxQueueCounters& counters);

  // Offers `frames` to the driver as `handover` says (one call, or one call per frame with
  // xmit_more on all but the last; a queue that stops before the last ends the chain — a BQL
  // stop only where the policy's kernel ended it, FlushPolicy's bql_stop_ends_chain).
  // `from_qdisc`: a qdisc run's bulk, which a stopped queue refuses whole without a driver call
  // (sch_direct_xmit's netif_xmit_frozen_or_stopped under HARD_TX_LOCK); --qdisc none's batches
  // are offered as a DPDK burst is, whatever the queue's state. `now`: the TSC the caller read
  // as the handover began, handed to the driver (TxDriver::Xmit).
  [[nodiscard]] XmitResult Xmit(std::span<rte_mbuf* const> frames, Handover handover,
                                bool from_qdisc, Tsc now);

  // The completion role at `now`: the driver reclaims, BQL learns the bytes completed. Returns
  // whether that restarted a stopped queue (netif_tx_wake_queue); `reclaimed` (if given) gets
  // the frames the driver reclaimed.
  bool Complete(Tsc now, unsigned* reclaimed = nullptr);

  // The driver's ring is full or BQL stopped the queue.
  bool Stopped() const { return driver_.Stopped() || bql_xoff_; }
  bool has_bql() const { return dql_.has_value(); }
  int64_t bql_avail() const { return dql_ ? dql_->Avail() : 0; }
  std::optional<uint32_t> bql_limit() const {
    return dql_ ? std::optional<uint32_t>(dql_->limit()) : std::nullopt;
  }
  TxDriver& driver() { return driver_; }

 private:
  // netdev_tx_sent_queue: `bytes` went to the driver; stops the queue at the limit.
  void BqlSent(uint32_t bytes);

  TxDriver& driver_;
  TxQueueCounters& counters_;
  std::optional<DynamicQueueLimits> dql_;
  const bool bql_ends_chain_;  // FlushPolicy's bql_stop_ends_chain
  const BqlBytes bql_bytes_;   // how the driver counts a frame's bytes (TxDriver::bql_bytes)
  bool bql_xoff_ = false;      // __QUEUE_STATE_STACK_XOFF
  uint64_t bql_reported_ = 0;  // the driver's completed_bytes already reported to dql_
};

}  // namespace txbatch
