#pragma once
// Batching policies: how many of the frames already queued one bulk dequeue takes, how they go
// to the driver, and when an accumulating batch goes. Named, testable objects (STYLE.md); drivers
// never decide batch sizes.
//
// * `count:N` — take at most N frames already queued, never wait (N = 1 is batching off);
// * `buffer:N[:T]` — accumulate N frames or until the first has waited T µs (rte_eth_tx_buffer);
// * `bql` — take frames while their bytes fit what Linux's dynamic queue limits allow
//   (dql_avail), handed over in one driver call;
// * `linux-2014` — Linux 3.18's bulk dequeue (try_bulk_dequeue_skb): bounded only by BQL, each
//   frame its own driver call with xmit_more on all but the last (one doorbell per bulk); a
//   refused remainder comes back as the list it was (q->gso_skb), counted as one packet;
// * `linux-2025` — as 2014 on a 6.x kernel with upstream 0345552a653c: each bulk is also capped
//   at 1 + the quota left (`if (++cnt >= budget) break;` counts the frames after the first), and
//   a requeued frame comes back alone (q->gso_skb is a queue since 4.x), without xmit_more;
// * `blist-2007` — the batching skb API: the frames go on a per-device list the driver drains in
//   one call (hard_start_xmit_batch), bounded by the driver's free slots.
//
// Every qdisc txbatch runs belongs to one TX queue (TCQ_F_ONETXQUEUE: qdisc_create sets it on a
// single-queue device, mq on each per-queue child), so the kernel policies always take the fast
// path; the slow path of 4.8 on (9 frames for the same queue) is a root qdisc's over several TX
// queues, a shape txbatch does not model.
//
// A policy answers "what may the next dequeue take, and how does it go" from what the runner
// knows (DequeueContext); the runner, the qdisc and BQL (batching/dql.h) do the rest.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/error.h"
#include "base/tsc.h"
#include "batching/batch.h"

namespace txbatch {

// Linux dev_tx_weight: packets one qdisc run may send before it must yield and reschedule.
inline constexpr int kDevTxWeight = 64;

// How a bulk goes to the driver.
enum class Handover : uint8_t {
  kBurst,     // one Xmit call with the whole batch (DPDK rte_eth_tx_burst): count, buffer, bql
  kXmitMore,  // one call per frame, xmit_more on all but the last (Linux 3.18+ bulk dequeue)
  kList,      // a per-device list the driver drains in one call (2007 hard_start_xmit_batch)
};
std::string_view HandoverName(Handover h);

// What the runner knows when it plans a bulk dequeue.
struct DequeueContext {
  int quota_left = kDevTxWeight;  // of this qdisc run
  bool has_bql = false;           // the driver reports completions, so dql_avail means something
  int64_t bql_avail = 0;          // bytes BQL lets the stack queue (dql_avail; may be negative)
  unsigned requeued = 0;          // frames waiting at the head after a driver refused them
  unsigned free_slots = kMaxBatch;  // descriptors the driver has free (blist-2007)
  uint64_t now = 0;  // when the dequeue runs (TSC): what a qdisc that times frames reads (CoDel)
};

// What the next bulk dequeue may take and how it goes. The first frame is always taken (a
// dequeue that is allowed to run sends at least one); after it, frames are taken while fewer
// than `frames` were and `bytes` is still positive (Linux try_bulk_dequeue_skb: bytelimit
// = dql_avail - first frame's length, then `while (bytelimit > 0)` take one and subtract).
struct DequeueBudget {
  uint16_t frames = 1;
  int64_t bytes = INT64_MAX;  // the byte budget, first frame included
  Handover handover = Handover::kBurst;
  // What the bulk costs the run's quota (__qdisc_run's `quota -= packets`): a packet a frame,
  // or one for the whole bulk — 3.18's requeued list, which dequeue_skb hands back with
  // `*packets = 1`.
  bool one_packet = false;
};

enum class PolicyKind : uint8_t { kCount, kBuffer, kBql, kLinux2014, kLinux2025, kBlist2007 };

// Why an accumulating batch went to the driver (counted per run: which trigger a buffer:N:T
// policy actually hits).
enum class FlushTrigger : uint8_t {
  kNone,       // not yet
  kFull,       // N frames
  kTimer,      // the first frame waited T
  kWriteDone,  // count:N: the application write that produced them is complete
  kEnd,        // generation stopped (the producer's last batch, a dedicated runner's drain)
};
inline constexpr size_t kFlushTriggers = 5;

// A parsed --policy / --batch value.
struct PolicySpec {
  PolicyKind kind = PolicyKind::kCount;
  uint16_t frames = 1;           // N of count:N / buffer:N (the kernel policies: kMaxBatch)
  double timeout_us = 0;         // T of buffer:N:T; 0 = no drain timer
  std::string ToString() const;  // "count:32", "buffer:32:100", "linux-2014"
  // Whether frames may be sent more than one per dequeue (false: batching off, count:1).
  bool batching() const { return frames > 1; }
  // Whether the policy reads BQL's limit (the driver must report completions).
  bool uses_bql() const {
    return kind == PolicyKind::kBql || kind == PolicyKind::kLinux2014 ||
           kind == PolicyKind::kLinux2025;
  }
  // The kernel's qdisc-run policies: they bulk-dequeue from a qdisc, so need one.
  bool needs_qdisc() const { return uses_bql() || kind == PolicyKind::kBlist2007; }
  // How a bulk goes to the driver (every Budget's handover): the Linux policies' xmit_more
  // chain, blist-2007's list, else one call.
  Handover handover() const {
    if (kind == PolicyKind::kLinux2014 || kind == PolicyKind::kLinux2025)
      return Handover::kXmitMore;
    return kind == PolicyKind::kBlist2007 ? Handover::kList : Handover::kBurst;
  }
  // Whether frames a driver refused go back as one list (3.18's q->gso_skb: one entry of the
  // qdisc's length, handed back whole) rather than frame by frame (a queue since 4.x).
  bool requeues_as_list() const { return kind == PolicyKind::kLinux2014; }
  // Whether BQL's limit starts at limit_min when the device opens (dql_reset since upstream
  // 3a17f23f7c36, 2025: linux-2025 and today's bql) rather than at 0 until the first completion
  // (linux-2014's 3.18; batching/dql.h's DqlStart).
  bool bql_starts_at_min() const { return kind != PolicyKind::kLinux2014; }
  // Whether a BQL stop ends an xmit_more chain (dev_hard_start_xmit broke on
  // netif_xmit_stopped until 4.20; since then only a driver's own stop does).
  bool bql_stop_ends_chain() const { return kind != PolicyKind::kLinux2025; }
  bool operator==(const PolicySpec&) const = default;
};

// Parses "count:N", "buffer:N[:T]" (N in 1..kMaxBatch, T in µs, 1..1000000), "bql",
// "linux-2014", "linux-2025" or "blist-2007". Bad input gets one sentence naming the valid forms.
Result<PolicySpec> ParsePolicySpec(std::string_view text);

class FlushPolicy {
 public:
  virtual ~FlushPolicy() = default;
  // What the next bulk dequeue from a qdisc may take, and how it goes to the driver. Called by
  // the qdisc's runner, once per bulk.
  virtual DequeueBudget Budget(const DequeueContext& ctx) const = 0;
  // Producer-side accumulation (`--qdisc none`) and the dedicated runner: whether a batch of
  // `size` frames, the first of them buffered at `first`, goes now. `write_done`: the
  // application write that produced them is complete (count:N takes only what is there;
  // buffer:N waits for more, up to its drain timer). Inline and not virtual: a producer asks
  // once or twice a frame (two virtual calls a frame were 10 % of --qdisc none's time on
  // net_null, doc/perf.md).
  FlushTrigger Trigger(uint16_t size, Tsc first, Tsc now, bool write_done) const {
    if (size >= spec_.frames) return FlushTrigger::kFull;
    if (size == 0) return FlushTrigger::kNone;
    if (spec_.kind == PolicyKind::kBuffer)  // waits for more, up to its drain timer
      return now >= FlushBy(first) ? FlushTrigger::kTimer : FlushTrigger::kNone;
    return write_done ? FlushTrigger::kWriteDone : FlushTrigger::kNone;
  }
  bool FlushNow(uint16_t size, Tsc first, Tsc now, bool write_done) const {
    return Trigger(size, first, now, write_done) != FlushTrigger::kNone;
  }
  // When a batch whose first frame was buffered at `first` must go at the latest (kNever: no
  // drain timer).
  Tsc FlushBy(Tsc first) const { return timeout_tsc_ == kNever ? kNever : first + timeout_tsc_; }
  const PolicySpec& spec() const { return spec_; }

 protected:
  explicit FlushPolicy(PolicySpec spec) : spec_(spec) {}
  // buffer:N's drain timer, in TSC (kNever: none).
  FlushPolicy(PolicySpec spec, Tsc timeout_tsc) : spec_(spec), timeout_tsc_(timeout_tsc) {}
  PolicySpec spec_;

 private:
  Tsc timeout_tsc_ = kNever;
};

// count:N — at most N frames already queued, never waits for more.
class CountPolicy final : public FlushPolicy {
 public:
  explicit CountPolicy(PolicySpec spec) : FlushPolicy(spec) {}
  DequeueBudget Budget(const DequeueContext&) const override { return {spec_.frames}; }
};

// buffer:N[:T] — DPDK rte_eth_tx_buffer + drain timer: accumulate until N frames, or until the
// first of them has waited T µs (l2fwd drains every 100 µs).
class BufferPolicy final : public FlushPolicy {
 public:
  BufferPolicy(PolicySpec spec, double tsc_hz)
      : FlushPolicy(spec, spec.timeout_us > 0
                              ? static_cast<Tsc>(spec.timeout_us * tsc_hz / 1e6)
                              : kNever) {}
  DequeueBudget Budget(const DequeueContext&) const override { return {spec_.frames}; }
};

// bql — frames while their bytes fit dql_avail, in one driver call. A driver without BQL
// (nothing reports completions) gets one frame per dequeue, as Linux's bytelimit of 0 gives.
class BqlPolicy final : public FlushPolicy {
 public:
  explicit BqlPolicy(PolicySpec spec) : FlushPolicy(spec) {}
  DequeueBudget Budget(const DequeueContext& ctx) const override;
};

// linux-2014 and linux-2025 (`cap_by_quota`): see the top of this file.
class LinuxBulkPolicy final : public FlushPolicy {
 public:
  explicit LinuxBulkPolicy(PolicySpec spec)
      : FlushPolicy(spec), cap_by_quota_(spec.kind == PolicyKind::kLinux2025) {}
  DequeueBudget Budget(const DequeueContext& ctx) const override;

 private:
  bool cap_by_quota_;
};

// blist-2007 — as many frames as the driver has free slots, on a list drained in one call.
class BlistPolicy final : public FlushPolicy {
 public:
  explicit BlistPolicy(PolicySpec spec) : FlushPolicy(spec) {}
  DequeueBudget Budget(const DequeueContext& ctx) const override;
};

std::unique_ptr<FlushPolicy> MakeFlushPolicy(const PolicySpec& spec, double tsc_hz);

}  // namespace txbatch
