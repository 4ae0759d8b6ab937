#include "results/summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "results/tables.h"

namespace txbatch {
namespace {

// The median over rounds of a value that may be null; null if it is null in every round.
template <class Get>
std::optional<double> MedianOpt(const std::vector<const CellRecord*>& runs, Get get) {
  std::vector<double> v;
  for (const CellRecord* r : runs)
    if (const std::optional<double> x = get(r->result)) v.push_back(*x);
  return v.empty() ? std::nullopt : std::optional<double>(txbatch::Median(v));
}

std::optional<RatioEstimate> Versus(const std::vector<const CellRecord*>& base,
                                    const std::vector<const CellRecord*>& cell,
                                    Metric m) {
  // Each round's pair: the rounds of an interleaved run by their number (where some were left
  // out of one cell, calibrate --check's disturbed runs, the others still pair with their own
  // round: the machine moves between rounds), else by position.
  std::vector<double> a, b;
  const auto numbered = [](const std::vector<const CellRecord*>& runs) {
    return std::all_of(runs.begin(), runs.end(), [](const CellRecord* r) { return r->round > 0; });
  };
  const auto add = [&](const CellRecord* x, const CellRecord* y) {
    a.push_back(RowOf(m).of(x->result).value_or(0));
    b.push_back(RowOf(m).of(y->result).value_or(0));
  };
  if (numbered(base) && numbered(cell)) {
    for (const CellRecord* x : base)
      for (const CellRecord* y : cell)
        if (y->round == x->round) add(x, y);
  } else {
    for (size_t i = 0; i < std::min(base.size(), cell.size()); ++i) add(base[i], cell[i]);
  }
  auto e = EstimateRatio(a, b);
  if (!e || e->rounds < 2) return std::nullopt;
  return e;
}

}  // namespace

bool SameCellOtherPolicy(const CellConfig& x, const CellConfig& y) {
  CellConfig a = x;
  if (x.sync_auto && y.sync_auto) a.shape.nolock = y.shape.nolock;
  return x.driver == y.driver && ShapeName(a) == ShapeName(y) && x.size == y.size &&
         x.procs == y.procs && x.proto == y.proto && x.offload == y.offload;
}

std::vector<CellSummary> Summarise(const std::vector<CellRecord>& records,
                                   const PolicySpec& baseline) {
  std::map<int, std::vector<const CellRecord*>> by_cell;
  for (const auto& rec : records) by_cell[rec.cell].push_back(&rec);
  std::vector<CellSummary> rows;
  for (const auto& [index, runs] : by_cell) {
    CellSummary s;
    s.config = runs.front()->config;
    s.runs = runs;
    for (const MetricRow& m : kMetrics)
      s.metrics[static_cast<size_t>(m.metric)] =
          m.column == Column::kFlag
              ? std::optional<double>(std::all_of(runs.begin(), runs.end(),
                                                  [&](const CellRecord* r) {
                                                    return m.of(r->result).value_or(0) != 0;
                                                  }))
              : MedianOpt(runs, m.of);
    s.before_driver_is_batch_fill = runs.front()->result.before_driver_is_batch_fill;
    s.first_in_batch_p50_ns = MedianOpt(runs, [](const CellResult& r) {
      return r.lat_by_position.empty() || r.lat_by_position.front().first != "0"
                 ? std::nullopt
                 : std::optional<double>(r.lat_by_position.front().second.p50);
    });
    for (const CellRecord* run : runs)
      if (!run->result.lat_by_position.empty() &&
          run->result.lat_by_position.back().first.size() >= s.last_positions.size())
        s.last_positions = run->result.lat_by_position.back().first;
    s.last_in_batch_p50_ns = MedianOpt(runs, [&](const CellResult& r) {
      for (const auto& [pos, l] : r.lat_by_position)
        if (pos == s.last_positions) return std::optional<double>(l.p50);
      return std::optional<double>();
    });
    rows.push_back(std::move(s));
  }
  for (CellSummary& s : rows) {
    if (s.config.policy == baseline) continue;
    for (const CellSummary& base : rows)
      if (base.config.policy == baseline && SameCellOtherPolicy(base.config, s.config)) {
        s.bw_vs_off = Versus(base.runs, s.runs, Metric::kMbPerS);
        s.cycles_vs_off = Versus(base.runs, s.runs, Metric::kCyclesPerPkt);
        if (s.bw_vs_off) s.bw_verdict = Judge(*s.bw_vs_off, true);
        if (s.cycles_vs_off) s.cycles_verdict = Judge(*s.cycles_vs_off, false);
      }
  }
  return rows;
}

std::string ShortVerdict(const std::optional<RatioEstimate>& e, Verdict v) {
  if (!e) return "-";
  switch (v) {
    case Verdict::kEquivalent:
      return "equiv";
    case Verdict::kBetter:
      return fmt::format("better {:.2f}x", e->ratio);
    case Verdict::kWorse:
      return fmt::format("worse {:.2f}x", e->ratio);
    case Verdict::kInconclusive:
      return "inconcl.";
  }
  return "-";
}

}  // namespace txbatch
