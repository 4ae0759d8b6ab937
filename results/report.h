#pragma once
// Output: the human tables (lmbench bw_tcp shape, one per policy, books under each) and the
// JSON result records (DESIGN.md "Result records", schema_version 1).

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/record.h"

namespace txbatch {

nlohmann::json ToJson(const std::vector<CellRecord>& records, const RunEnv& env);

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
