#include "results/latency_text.h"

#include <fmt/format.h>

#include <algorithm>

namespace txbatch {

LatencyUnit ColumnUnit(const std::vector<std::optional<double>>& ns) {
  double largest = 0;
  for (const auto& v : ns)
    if (v) largest = std::max(largest, *v);
  return largest >= kMsColumnNs ? LatencyUnit::kMs : LatencyUnit::kUs;
}

std::string LatencyText(const std::optional<double>& ns, LatencyUnit unit) {
  if (!ns) return "-";
  return unit == LatencyUnit::kMs ? fmt::format("{:.3f}ms", *ns / 1e6)
                                  : fmt::format("{:.1f}us", *ns / 1e3);
}

std::string LatencyText(double ns) { return LatencyText(ns, ColumnUnit({ns})); }

}  // namespace txbatch
