#pragma once
// Output: the human tables (lmbench bw_tcp shape, one per policy, books under each) and the
// JSON result records (DESIGN.md "Result records", schema_version 1).

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/experiment.h"

namespace txbatch {

// What every record's `env` block and the run header need.
struct RunEnv {
  std::string dpdk_version, kernel, cpu, pinning, command_line, started_at;
  double tsc_hz = 0;
  std::vector<int> cpus;
  std::vector<std::string> eal_args;
  std::string eal_mode, eal_why;
  // Driver spec -> the link layer its device turned out to have, where the driver names one
  // (verbs: "ib", "roce_v2"), known once the session opened it; the header says it.
  std::map<std::string, std::string> link_layers;
};

RunEnv CollectEnv(int argc, char** argv);

struct CellRecord {
  CellConfig config;
  CellResult result;
  int round = 0;     // 1.. in an interleaved run; 0 when the grid ran once
  std::string side;  // "A" or "B" in a comparison
  int cell = 0;      // the cell's index in the plan (rounds of one cell share it)
};

nlohmann::json ToJson(const std::vector<CellRecord>& records, const RunEnv& env);

// "rootlock inline", "nolock dedicated", "qdisc none".
std::string ShapeName(const CellConfig& c);

void PrintHeader(std::FILE* out, const std::vector<CellConfig>& cells, const RunEnv& env);
// One table per policy (the lmbench bw_tcp shape), a row per cell with the medians over its
// rounds, books under each; with two or more rounds, the cells of later policies get verdicts
// against the first policy's same cell (MB/s and cycles/pkt).
void PrintTables(std::FILE* out, const std::vector<CellRecord>& records,
                 const std::vector<PolicySpec>& policies);

}  // namespace txbatch
