#include "batching/flush_policy.h"

#include <fmt/format.h>

#include <charconv>

namespace txbatch {

std::string PolicySpec::ToString() const {
  if (kind == PolicyKind::kCount) return fmt::format("count:{}", frames);
  return timeout_us > 0 ? fmt::format("buffer:{}:{:g}", frames, timeout_us)
                        : fmt::format("buffer:{}", frames);
}

Result<PolicySpec> ParsePolicySpec(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return MakeError(EINVAL, fmt::format("policy '{}' {}; valid: count:N or buffer:N[:T] with N "
                                         "in 1..{} and T in 1..1000000 microseconds",
                                         text, why, kMaxBatch));
  };
  PolicySpec spec;
  std::string_view rest;
  if (text.starts_with("count:")) {
    spec.kind = PolicyKind::kCount;
    rest = text.substr(6);
  } else if (text.starts_with("buffer:")) {
    spec.kind = PolicyKind::kBuffer;
    rest = text.substr(7);
  } else {
    return bad("is unknown");
  }
  std::string_view num = rest.substr(0, rest.find(':'));
  unsigned n = 0;
  auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), n);
  if (ec != std::errc() || ptr != num.data() + num.size() || num.empty())
    return bad("has no valid frame count");
  if (n < 1 || n > kMaxBatch) return bad("is out of range");
  spec.frames = static_cast<uint16_t>(n);
  if (const size_t colon = rest.find(':'); colon != std::string_view::npos) {
    if (spec.kind != PolicyKind::kBuffer) return bad("takes no timeout");
    const std::string_view t = rest.substr(colon + 1);
    double us = 0;
    auto [tp, tec] = std::from_chars(t.data(), t.data() + t.size(), us);
    if (tec != std::errc() || tp != t.data() + t.size() || t.empty() || !(us >= 1) || us > 1e6)
      return bad("has no valid timeout");
    spec.timeout_us = us;
  }
  return spec;
}

std::unique_ptr<FlushPolicy> MakeFlushPolicy(const PolicySpec& spec, double tsc_hz) {
  if (spec.kind == PolicyKind::kBuffer) return std::make_unique<BufferPolicy>(spec, tsc_hz);
  return std::make_unique<CountPolicy>(spec);
}

}  // namespace txbatch
