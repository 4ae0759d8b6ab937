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

double Median(const std::vector<const CellRecord*>& runs, double CellResult::*f) {
  return *MedianOpt(runs, [f](const CellResult& r) { return std::optional<double>(r.*f); });
}

std::optional<double> Lat(const CellResult& r, double LatencySummary::*f) {
  return r.latency ? std::optional<double>((*r.latency).*f) : std::nullopt;
}

std::optional<RatioEstimate> Versus(const std::vector<const CellRecord*>& base,
                                    const std::vector<const CellRecord*>& cell,
                                    double CellResult::*f) {
  std::vector<double> a, b;
  for (size_t i = 0; i < std::min(base.size(), cell.size()); ++i) {
    a.push_back(base[i]->result.*f);
    b.push_back(cell[i]->result.*f);
  }
  auto e = EstimateRatio(a, b);
  if (!e || e->rounds < 2) return std::nullopt;
  return e;
}

// The same cell but its policy: where --sync auto gave each policy its kernel's qdisc, the
// synchronisation is the policy's, so it is not compared.
bool SameCellOtherPolicy(const CellConfig& x, const CellConfig& y) {
  CellConfig a = x;
  if (x.sync_auto && y.sync_auto) a.shape.nolock = y.shape.nolock;
  return x.driver == y.driver && ShapeName(a) == ShapeName(y) && x.size == y.size &&
         x.procs == y.procs && x.proto == y.proto && x.offload == y.offload;
}

}  // namespace

std::vector<CellSummary> Summarise(const std::vector<CellRecord>& records,
                                   const PolicySpec& baseline) {
  std::map<int, std::vector<const CellRecord*>> by_cell;
  for (const auto& rec : records) by_cell[rec.cell].push_back(&rec);
  std::vector<CellSummary> rows;
  for (const auto& [index, runs] : by_cell) {
    CellSummary s;
    s.config = runs.front()->config;
    s.runs = runs;
    s.mb_per_s = Median(runs, &CellResult::mb_per_s);
    s.mpps = Median(runs, &CellResult::mpps);
    s.avg_batch = Median(runs, &CellResult::avg_batch);
    s.cycles_per_pkt = Median(runs, &CellResult::cycles_per_pkt);
    s.cpu_ns_per_pkt = Median(runs, &CellResult::cpu_ns_per_pkt);
    s.xmit_calls_per_pkt = Median(runs, &CellResult::xmit_calls_per_pkt);
    s.requeues = *MedianOpt(runs, [](const CellResult& r) {
      return std::optional<double>(static_cast<double>(r.requeues));
    });
    s.ceiling_mb_per_s = MedianOpt(runs, [](const CellResult& r) { return r.ceiling_mb_per_s; });
    s.doorbells_per_pkt = MedianOpt(runs, [](const CellResult& r) { return r.doorbells_per_pkt; });
    s.lat_avg_ns =
        MedianOpt(runs, [](const CellResult& r) { return Lat(r, &LatencySummary::avg); });
    s.lat_p50_ns =
        MedianOpt(runs, [](const CellResult& r) { return Lat(r, &LatencySummary::p50); });
    s.lat_p99_ns =
        MedianOpt(runs, [](const CellResult& r) { return Lat(r, &LatencySummary::p99); });
    const auto p50 = [](const std::optional<LatencySummary>& l) {
      return l ? std::optional<double>(l->p50) : std::nullopt;
    };
    s.before_driver_p50_ns =
        MedianOpt(runs, [&](const CellResult& r) { return p50(r.lat_before_driver); });
    s.driver_ring_p50_ns =
        MedianOpt(runs, [&](const CellResult& r) { return p50(r.lat_driver_ring); });
    s.wire_p50_ns = MedianOpt(runs, [&](const CellResult& r) { return p50(r.lat_wire); });
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
    s.link_bound = std::all_of(runs.begin(), runs.end(), [](const CellRecord* r) {
      return r->result.link_bound.value_or(false);
    });
    rows.push_back(std::move(s));
  }
  for (CellSummary& s : rows) {
    if (s.config.policy == baseline) continue;
    for (const CellSummary& base : rows)
      if (base.config.policy == baseline && SameCellOtherPolicy(base.config, s.config)) {
        s.bw_vs_off = Versus(base.runs, s.runs, &CellResult::mb_per_s);
        s.cycles_vs_off = Versus(base.runs, s.runs, &CellResult::cycles_per_pkt);
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
