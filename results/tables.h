#pragma once
// The human tables: the run's header, one table per policy (lmbench bw_tcp shape, books under
// each) and where the latency goes. records.h writes the same runs as JSON.

#include <cstdio>
#include <string>
#include <vector>

#include "engine/record.h"

namespace txbatch {

// "rootlock inline", "nolock dedicated", "qdisc none".
std::string ShapeName(const CellConfig& c);

void PrintHeader(std::FILE* out, const std::vector<CellConfig>& cells, const RunEnv& env);
// One table per policy (the lmbench bw_tcp shape), a row per cell with the medians over its
// rounds, books under each; with two or more rounds, the cells of later policies get verdicts
// against the first policy's same cell (MB/s and cycles/pkt).
void PrintTables(std::FILE* out, const std::vector<CellRecord>& records,
                 const std::vector<PolicySpec>& policies);
// Prints the tables on stdout and returns them as text too (for --out).
std::string PrintAndKeepTables(const std::vector<CellRecord>& records,
                               const std::vector<PolicySpec>& policies);

}  // namespace txbatch
