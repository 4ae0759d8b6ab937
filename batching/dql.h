#pragma once
// Dynamic queue limits (Linux BQL, lib/dynamic_queue_limits.c): how many bytes a TX queue may
// hold in the driver's ring. The stack reports bytes handed to the driver (Queued) and bytes the
// driver completed (Completed); the limit grows when the queue ran dry while it was over the
// limit (starvation: the limit was too small for the completion latency) and shrinks by the
// smallest slack seen once slack has persisted for the hold time. The `bql` policy bounds
// each bulk dequeue by Avail() (TxQueue keeps one per queue, under its TX lock).
//
// Where it differs from the kernel: time is the TSC, not jiffies; the limit is 32-bit bytes; the
// stall-detection statistics added in Linux 6.x are not kept. Not thread-safe: the caller's TX
// lock guards it, as netdev_tx_sent_queue / netdev_tx_completed_queue run under it.

#include <cstdint>

#include "base/tsc.h"

namespace txbatch {

// DQL_MAX_LIMIT: UINT_MAX / 2 - DQL_MAX_OBJECT (UINT_MAX / 16), as the kernel bounds it.
inline constexpr uint32_t kDqlMaxLimit = UINT32_MAX / 2 - UINT32_MAX / 16;

// The limit's bounds and hold time, as sysfs byte_queue_limits/limit_min, limit_max and
// hold_time set them (--bql-limit-min, --bql-limit-max, --bql-hold-time).
struct BqlBounds {
  uint32_t limit_min = 0;
  uint32_t limit_max = kDqlMaxLimit;
  double hold_s = 1.0;  // the kernel's default: HZ jiffies
  bool operator==(const BqlBounds&) const = default;
};

// Where dql_reset (the device's open) leaves the limit: at 0 whatever limit_min says, until the
// first completion clamps it into [limit_min, limit_max] (`dql->limit = 0` from BQL's first
// kernel, 3.3, until upstream 3a17f23f7c36), or at limit_min (3a17f23f7c36, "dql: Fix dql->limit
// value when reset.", 2025, backported to the stable kernels).
enum class DqlStart : uint8_t { kZero, kMinLimit };

class DynamicQueueLimits {
 public:
  // `hold_tsc`: how long slack must persist before the limit shrinks (the kernel: 1 s).
  explicit DynamicQueueLimits(Tsc hold_tsc, uint32_t min_limit = 0,
                              uint32_t max_limit = kDqlMaxLimit,
                              DqlStart start = DqlStart::kMinLimit);

  // `bytes` were handed to the driver (one frame's, or a bulk's).
  void Queued(uint32_t bytes) {
    last_obj_ = bytes;
    num_queued_ += bytes;
  }
  // Bytes that may still be queued before the limit: negative when over it (the stack stops the
  // queue then, __QUEUE_STATE_STACK_XOFF).
  int64_t Avail() const {
    return static_cast<int64_t>(adj_limit_) - static_cast<int64_t>(num_queued_);
  }
  // The driver completed `bytes` at `now`; adapts the limit.
  void Completed(uint32_t bytes, Tsc now);

  uint32_t limit() const { return limit_; }
  uint64_t in_flight() const { return num_queued_ - num_completed_; }

 private:
  uint64_t num_queued_ = 0;  // bytes ever queued
  uint64_t adj_limit_ = 0;   // limit + bytes ever completed
  uint32_t last_obj_ = 0;    // the last Queued amount
  uint32_t limit_ = 0;
  uint64_t num_completed_ = 0;  // bytes ever completed
  uint32_t prev_ovlimit_ = 0;   // how far over the limit the queue was at the last completion
  uint64_t prev_num_queued_ = 0;
  uint32_t prev_last_obj_ = 0;
  uint32_t lowest_slack_ = UINT32_MAX;
  Tsc slack_start_ = 0;
  const Tsc hold_tsc_;
  const uint32_t min_limit_, max_limit_;
};

}  // namespace txbatch
