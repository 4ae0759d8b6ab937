#pragma once
// Flush policies: how many of the frames already queued one dequeue takes into a batch, and
// when an accumulating batch goes. A named, testable object (STYLE.md); drivers never decide
// batch sizes.
//
// `count:N` (take at most N frames already queued, never wait; N = 1 is batching off) and
// `buffer:N[:T]` (accumulate N frames or until the first has waited T µs) exist; byte budgets
// (BQL) and the kernel's run-quota rules arrive through the same seam: a policy answers "how
// much may the next dequeue take" and may learn from what the driver completed.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "batching/batch.h"
#include "dataplane/error.h"
#include "dataplane/tsc.h"

namespace txbatch {

// What the next bulk dequeue may take.
struct DequeueBudget {
  uint16_t frames = 1;
  uint32_t bytes = UINT32_MAX;
};

enum class PolicyKind : uint8_t { kCount, kBuffer };

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
  uint16_t frames = 1;           // N of count:N / buffer:N
  double timeout_us = 0;         // T of buffer:N:T; 0 = no drain timer
  std::string ToString() const;  // "count:32", "buffer:32:100"
  bool batching() const { return frames > 1; }
  bool operator==(const PolicySpec&) const = default;
};

// Parses "count:N" or "buffer:N[:T]" (N in 1..kMaxBatch, T in µs, 1..1000000). Bad input gets
// one sentence naming the valid forms.
Result<PolicySpec> ParsePolicySpec(std::string_view text);

class FlushPolicy {
 public:
  virtual ~FlushPolicy() = default;
  // Budget of the next bulk dequeue from a qdisc. Called under its root lock, once per batch.
  virtual DequeueBudget Budget() const = 0;
  // Producer-side accumulation (`--qdisc none`): whether a batch of `size` frames, the first
  // of them buffered at `first`, goes to the driver now. `write_done`: the application write
  // that produced them is complete (count:N takes only what is there; buffer:N waits for more).
  virtual FlushTrigger Trigger(uint16_t size, Tsc first, Tsc now, bool write_done) const = 0;
  bool FlushNow(uint16_t size, Tsc first, Tsc now, bool write_done) const {
    return Trigger(size, first, now, write_done) != FlushTrigger::kNone;
  }
  // When a batch whose first frame was buffered at `first` must go at the latest (kNever: no
  // drain timer).
  virtual Tsc FlushBy(Tsc first) const = 0;
  virtual const PolicySpec& spec() const = 0;
};

// count:N — Linux bulk dequeue: at most N frames already queued, never waits for more.
class CountPolicy final : public FlushPolicy {
 public:
  explicit CountPolicy(PolicySpec spec) : spec_(spec) {}
  DequeueBudget Budget() const override { return {spec_.frames, UINT32_MAX}; }
  FlushTrigger Trigger(uint16_t size, Tsc, Tsc, bool write_done) const override {
    if (size >= spec_.frames) return FlushTrigger::kFull;
    return write_done && size > 0 ? FlushTrigger::kWriteDone : FlushTrigger::kNone;
  }
  Tsc FlushBy(Tsc) const override { return kNever; }
  const PolicySpec& spec() const override { return spec_; }

 private:
  PolicySpec spec_;
};

// buffer:N[:T] — DPDK rte_eth_tx_buffer + drain timer: accumulate until N frames, or until the
// first of them has waited T µs (l2fwd drains every 100 µs).
class BufferPolicy final : public FlushPolicy {
 public:
  BufferPolicy(PolicySpec spec, double tsc_hz)
      : spec_(spec),
        timeout_tsc_(spec.timeout_us > 0 ? static_cast<Tsc>(spec.timeout_us * tsc_hz / 1e6)
                                         : kNever) {}
  DequeueBudget Budget() const override { return {spec_.frames, UINT32_MAX}; }
  FlushTrigger Trigger(uint16_t size, Tsc first, Tsc now, bool) const override {
    if (size >= spec_.frames) return FlushTrigger::kFull;
    return size > 0 && now >= FlushBy(first) ? FlushTrigger::kTimer : FlushTrigger::kNone;
  }
  Tsc FlushBy(Tsc first) const override {
    return timeout_tsc_ == kNever ? kNever : first + timeout_tsc_;
  }
  const PolicySpec& spec() const override { return spec_; }

 private:
  PolicySpec spec_;
  Tsc timeout_tsc_;
};

std::unique_ptr<FlushPolicy> MakeFlushPolicy(const PolicySpec& spec, double tsc_hz);

}  // namespace txbatch
