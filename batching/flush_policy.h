#pragma once
// Flush policies: how many of the frames already queued one dequeue takes into a batch.
// A named, testable object (STYLE.md); drivers never decide batch sizes.
//
// Only `count:N` exists so far (DESIGN.md Terms: take at most N frames already queued, never
// wait; N = 1 is batching off). Byte budgets (BQL), accumulate-with-timeout (`buffer:N:T`) and
// the kernel's run quota arrive through the same seam: a policy answers "how much may the next
// dequeue take" and may learn from what the driver completed.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "batching/batch.h"
#include "dataplane/error.h"

namespace txbatch {

// What the next bulk dequeue may take.
struct DequeueBudget {
  uint16_t frames = 1;
  uint32_t bytes = UINT32_MAX;
};

enum class PolicyKind : uint8_t { kCount };

// A parsed --policy / --batch value.
struct PolicySpec {
  PolicyKind kind = PolicyKind::kCount;
  uint16_t frames = 1;           // N of count:N
  std::string ToString() const;  // "count:32"
  bool batching() const { return frames > 1; }
};

// Parses "count:N" (N in 1..kMaxBatch). Bad input gets one sentence naming the valid forms.
Result<PolicySpec> ParsePolicySpec(std::string_view text);

class FlushPolicy {
 public:
  virtual ~FlushPolicy() = default;
  // Budget of the next bulk dequeue. Called under the qdisc's root lock, once per batch.
  virtual DequeueBudget Budget() const = 0;
  virtual const PolicySpec& spec() const = 0;
};

// count:N — Linux bulk dequeue: at most N frames already queued, never waits for more.
class CountPolicy final : public FlushPolicy {
 public:
  explicit CountPolicy(PolicySpec spec) : spec_(spec) {}
  DequeueBudget Budget() const override { return {spec_.frames, UINT32_MAX}; }
  const PolicySpec& spec() const override { return spec_; }

 private:
  PolicySpec spec_;
};

std::unique_ptr<FlushPolicy> MakeFlushPolicy(const PolicySpec& spec);

}  // namespace txbatch
