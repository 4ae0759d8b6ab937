#pragma once
// One row per cell of a grid that ran in rounds: the medians over its rounds and, for cells of a
// later policy, the verdict against the same cell with the first policy (batching off). The
// human tables, the CSV, the JSON summary and the plots all read these rows.

#include <optional>
#include <string>
#include <vector>

#include "engine/record.h"
#include "results/verdict.h"

namespace txbatch {

struct CellSummary {
  CellConfig config;
  std::vector<const CellRecord*> runs;  // its rounds, in order
  double mb_per_s = 0, mpps = 0, avg_batch = 0, cycles_per_pkt = 0, cpu_ns_per_pkt = 0;
  double xmit_calls_per_pkt = 0, requeues = 0;
  std::optional<double> ceiling_mb_per_s, doorbells_per_pkt;
  std::optional<double> lat_avg_ns, lat_p50_ns, lat_p99_ns;
  bool link_bound = false;  // in every round
  // Where the latency goes: stage p50s (medians over rounds); null where not measured.
  std::optional<double> before_driver_p50_ns, driver_ring_p50_ns, wire_p50_ns;
  bool before_driver_is_batch_fill = false;
  std::optional<double> first_in_batch_p50_ns, last_in_batch_p50_ns;
  std::string last_positions;  // the highest position bucket seen, e.g. "16-31"
  // Against the first policy's same cell (same driver, shape, size, procs); empty for the
  // baseline itself or with fewer than two rounds.
  std::optional<RatioEstimate> bw_vs_off, cycles_vs_off;
  Verdict bw_verdict = Verdict::kInconclusive, cycles_verdict = Verdict::kInconclusive;
};

// Rows in plan order (by each record's `cell`), `records` outliving them.
std::vector<CellSummary> Summarise(const std::vector<CellRecord>& records,
                                   const PolicySpec& baseline);

// For a table column: "equiv", "better 1.83x", "worse 0.55x", "inconcl.", or "-" (none).
std::string ShortVerdict(const std::optional<RatioEstimate>& e, Verdict v);

}  // namespace txbatch
