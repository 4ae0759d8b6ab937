#pragma once
// What the engines hand to results/: one measured cell run (a CellRecord) and the environment
// every record's `env` block and the run header name (RunEnv). results/ turns them into JSON
// records and tables (DESIGN.md "Result records").

#include <map>
#include <string>
#include <vector>

#include "engine/cell.h"

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

// DPDK's version, the kernel, the CPU model, the command line and the start time.
RunEnv CollectEnv(int argc, char** argv);

struct CellRecord {
  CellConfig config;
  CellResult result;
  int round = 0;     // 1.. in an interleaved run; 0 when the grid ran once
  std::string side;  // "A" or "B" in a comparison
  int cell = 0;      // the cell's index in the plan (rounds of one cell share it)
};

}  // namespace txbatch
