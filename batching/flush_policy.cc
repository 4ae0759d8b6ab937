#include "batching/flush_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

namespace txbatch {

namespace {

// The policies without parameters, by name.
struct NamedPolicy {
  std::string_view name;
  PolicyKind kind;
};
constexpr NamedPolicy kNamed[] = {{"bql", PolicyKind::kBql},
                                  {"linux-2014", PolicyKind::kLinux2014},
                                  {"linux-2025", PolicyKind::kLinux2025},
                                  {"blist-2007", PolicyKind::kBlist2007}};

// The byte budget BQL gives a bulk: dql_avail, or 0 (the first frame alone) without BQL.
int64_t BqlBytes(const DequeueContext& ctx) { return ctx.has_bql ? ctx.bql_avail : 0; }

}  // namespace

std::string_view HandoverName(Handover h) {
  switch (h) {
    case Handover::kBurst: return "burst";
    case Handover::kXmitMore: return "xmit_more";
    case Handover::kList: return "list";
  }
  return "?";
}

std::string PolicySpec::ToString() const {
  if (kind == PolicyKind::kCount) return fmt::format("count:{}", frames);
  if (kind == PolicyKind::kBuffer)
    return timeout_us > 0 ? fmt::format("buffer:{}:{:g}", frames, timeout_us)
                          : fmt::format("buffer:{}", frames);
  for (const NamedPolicy& p : kNamed)
    if (p.kind == kind) return std::string(p.name);
  return "?";
}

DequeueBudget BqlPolicy::Budget(const DequeueContext& ctx) const {
  return {kMaxBatch, BqlBytes(ctx), spec_.handover()};
}

DequeueBudget LinuxBulkPolicy::Budget(const DequeueContext& ctx) const {
  if (ctx.requeued > 0) {
    // 2014 (3.18 dequeue_skb): the refused remainder is one list in q->gso_skb, handed back
    // whole with `*packets = 1` and nothing bulked onto it. 2025 (6.x): requeued frames sit in a
    // queue and come back one per dequeue, each a packet, never bulked (the gso_skb path skips
    // the bulk dequeue).
    if (cap_by_quota_) return {1, INT64_MAX, spec_.handover()};
    return {static_cast<uint16_t>(std::min<unsigned>(ctx.requeued, kMaxBatch)), INT64_MAX,
            spec_.handover(), /*one_packet=*/true};
  }
  // try_bulk_dequeue_skb: the first frame, then more while bytes remain; 0345552a653c stops
  // once `++cnt >= budget` (the quota left) frames were added after the first.
  const uint16_t frames =
      cap_by_quota_ ? static_cast<uint16_t>(std::clamp(ctx.quota_left + 1, 1, int{kMaxBatch}))
                    : kMaxBatch;
  return {frames, BqlBytes(ctx), spec_.handover()};
}

DequeueBudget BlistPolicy::Budget(const DequeueContext& ctx) const {
  return {static_cast<uint16_t>(std::clamp<unsigned>(ctx.free_slots, 1, kMaxBatch)), INT64_MAX,
          spec_.handover()};
}

Result<PolicySpec> ParsePolicySpec(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    return MakeError(EINVAL, fmt::format("policy '{}' {}; valid: count:N or buffer:N[:T] with N "
                                         "in 1..{} and T in 1..1000000 microseconds, bql, "
                                         "linux-2014, linux-2025 or blist-2007",
                                         text, why, kMaxBatch));
  };
  PolicySpec spec;
  for (const NamedPolicy& p : kNamed)
    if (text == p.name) {
      spec.kind = p.kind;
      spec.frames = kMaxBatch;
      return spec;
    }
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
  switch (spec.kind) {
    case PolicyKind::kCount: return std::make_unique<CountPolicy>(spec);
    case PolicyKind::kBuffer: return std::make_unique<BufferPolicy>(spec, tsc_hz);
    case PolicyKind::kBql: return std::make_unique<BqlPolicy>(spec);
    case PolicyKind::kLinux2014:
    case PolicyKind::kLinux2025: return std::make_unique<LinuxBulkPolicy>(spec);
    case PolicyKind::kBlist2007: return std::make_unique<BlistPolicy>(spec);
  }
  return std::make_unique<CountPolicy>(spec);
}

}  // namespace txbatch
