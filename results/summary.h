#pragma once
// One row per cell of a grid that ran in rounds: the medians over its rounds and, for cells of a
// later policy, the verdict against the same cell with the first policy (batching off). The
// human tables, the CSV, the JSON summary and the plots all read these rows.

#include <optional>
#include <string>
#include <vector>

#include "engine/record.h"
#include "results/metrics.h"
#include "results/verdict.h"

namespace txbatch {

struct CellSummary {
  CellConfig config;
  std::vector<const CellRecord*> runs;  // its rounds, in order
  // Each metric of kMetrics over the rounds (metrics.h): the median, a flag's "in every round";
  // none where no round measured it.
  std::array<std::optional<double>, kMetricCount> metrics;
  std::optional<double> Find(Metric m) const { return metrics[static_cast<size_t>(m)]; }
  double Value(Metric m) const { return Find(m).value_or(0); }
  // Where the latency goes, besides the stage metrics: whether the stage before the driver is
  // the producer's batch fill (--qdisc none), and the whole latency of the first and the last
  // positions of a driver call (p50s, medians over rounds).
  bool before_driver_is_batch_fill = false;
  std::optional<double> first_in_batch_p50_ns, last_in_batch_p50_ns;
  std::string last_positions;  // the highest position bucket seen, e.g. "16-31"
  // Against the first policy's same cell (same driver, shape, size, procs); empty for the
  // baseline itself or with fewer than two rounds.
  std::optional<RatioEstimate> bw_vs_off, cycles_vs_off;
  Verdict bw_verdict = Verdict::kInconclusive, cycles_verdict = Verdict::kInconclusive;
};

// The same cell but its policy — what a row is judged against batching off by: where --sync
// auto gave each policy its kernel's qdisc, the synchronisation is the policy's, so it is not
// compared.
bool SameCellOtherPolicy(const CellConfig& x, const CellConfig& y);

// Rows in plan order (by each record's `cell`), `records` outliving them.
std::vector<CellSummary> Summarise(const std::vector<CellRecord>& records,
                                   const PolicySpec& baseline);

// For a table column: "equiv", "better 1.83x", "worse 0.55x", "inconcl.", or "-" (none).
std::string ShortVerdict(const std::optional<RatioEstimate>& e, Verdict v);

}  // namespace txbatch
