#pragma once
// What `txbatch sweep --out DIR` (and `txbatch report FILE --out DIR`) leaves behind: the human
// tables, one row per cell as CSV and as a JSON summary (medians over rounds, and against
// batching off: the ratio, its 95 % interval and the verdict), the full result records and the
// latency histograms. The figures are txbatch-plot's (tools/figures.h). doc/output.md documents
// every file and column.

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/output_file.h"
#include "results/summary.h"

namespace txbatch {

// The CSV: a header line, then one line per row (RFC 4180 quoting where a field needs it).
std::string SweepCsv(const std::vector<CellSummary>& rows);

// A row's latency histogram: its rounds' bins added up, bin by bin.
std::vector<HistBin> MergedLatencyHist(const CellSummary& row);

// latency_hist.csv: the cell columns of results.csv, then one line per bin that holds samples
// (bin_lo_ns, bin_hi_ns, count), the cell's rounds added up. A cell without latency has none.
std::string LatencyHistCsv(const std::vector<CellSummary>& rows);

// The same rows as JSON objects (the `summary` array of results.json).
nlohmann::json SweepSummaryJson(const std::vector<CellSummary>& rows);

// Writes tables.txt, results.csv, results.json (`doc` plus the summary) and latency_hist.csv
// into `dir` (created if needed): all of them or none (OutputDir::WriteAll).
Status WriteSweepOutputs(const OutputDir& dir, const std::string& tables, nlohmann::json doc,
                         const std::vector<CellSummary>& rows);

}  // namespace txbatch
