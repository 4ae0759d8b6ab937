#include "batching/flush_policy.h"

#include <fmt/format.h>

#include <charconv>

namespace txbatch {

std::string PolicySpec::ToString() const { return fmt::format("count:{}", frames); }

Result<PolicySpec> ParsePolicySpec(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return MakeError(EINVAL, fmt::format("policy '{}' {}; valid: count:N with N in 1..{}", text,
                                         why, kMaxBatch));
  };
  constexpr std::string_view kCount = "count:";
  if (!text.starts_with(kCount)) return bad("is unknown");
  std::string_view num = text.substr(kCount.size());
  unsigned n = 0;
  auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), n);
  if (ec != std::errc() || ptr != num.data() + num.size() || num.empty())
    return bad("has no valid frame count");
  if (n < 1 || n > kMaxBatch) return bad("is out of range");
  return PolicySpec{PolicyKind::kCount, static_cast<uint16_t>(n)};
}

std::unique_ptr<FlushPolicy> MakeFlushPolicy(const PolicySpec& spec) {
  return std::make_unique<CountPolicy>(spec);
}

}  // namespace txbatch
