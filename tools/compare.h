#pragma once
// `txbatch compare`: two configurations — the plan's one axis with two values — run interleaved
// (A, B, A, B … for R rounds) so machine drift hits both alike; per metric the medians, the
// ratio B/A with its 95 % interval and a verdict (results/verdict.h).

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "engine/cell.h"
#include "results/verdict.h"
#include "tools/run_options.h"

namespace txbatch {

// The axis the plan compares along ("--batch/--policy", "--driver", …): exactly one axis with
// two values and every other with one; else one sentence naming what was given.
Result<std::string> CompareAxis(const RunPlan& plan);

// One side's value on the compared axis, as the user would write it ("count:32", "emu:ixgbe",
// "nolock inline", "8").
std::string AxisValue(const std::string& axis, const CellConfig& c);

struct MetricComparison {
  std::string name;  // "Mpps", "cycles/pkt", …
  bool higher_is_better = true;
  std::optional<RatioEstimate> estimate;  // empty when the metric is null on either side
  Verdict verdict = Verdict::kInconclusive;
  bool withheld = false;  // an estimate but no verdict (emulator-bound rounds): text says why
  std::string text;  // DescribeVerdict's sentence, or why there is none
};

// Per metric, pairing round i of A with round i of B. Where most rounds of either side were
// emulator-bound (txbatch's own threads set their rate: the median is), the throughput metrics
// keep their medians and ratio but get no verdict: the text says why.
std::vector<MetricComparison> CompareMetrics(const std::vector<CellResult>& a,
                                             const std::vector<CellResult>& b);

// A sentence when a side's batches fell well short of its policy's N (no backlog formed, so the
// comparison is of the limit, not of batches that size); empty otherwise.
std::string BatchCheck(const char* side, const CellConfig& c, const std::vector<CellResult>& r);

// A sentence when rounds of a side were emulator-bound (CellResult::emulator_bound): their
// rate is txbatch's on this machine, not the compared configuration's — whether the verdicts
// were withheld for it (most rounds) or carry them as noise (fewer); empty otherwise.
std::string EmulatorCheckNote(const char* side, const std::vector<CellResult>& r);

// The notes compare prints under its verdicts and keeps in `batch_checks`: each side's
// BatchCheck, then each side's EmulatorCheckNote, those that say something.
std::vector<std::string> ComparisonChecks(const CellConfig& a, const CellConfig& b,
                                          const std::vector<CellResult>& ra,
                                          const std::vector<CellResult>& rb);

// The per-round table (rows A 1, B 1, A 2 …; the lmbench table's shape) and the verdicts.
void PrintComparison(std::FILE* out, const std::string& axis, const CellConfig& a,
                     const CellConfig& b, const std::vector<CellResult>& ra,
                     const std::vector<CellResult>& rb,
                     const std::vector<MetricComparison>& metrics);

// The `comparison` object of the JSON document.
nlohmann::json ComparisonJson(const std::string& axis, const CellConfig& a, const CellConfig& b,
                              int rounds, const std::vector<MetricComparison>& metrics,
                              const std::vector<std::string>& checks);

}  // namespace txbatch
