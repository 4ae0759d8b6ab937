#pragma once
// `txbatch run` and `txbatch sweep`: a grid of cells measured, printed as tables and written as
// records (--json), and for a sweep the CSV, JSON and figures of its --out folder.

#include <string>

#include "engine/record.h"
#include "tools/run_options.h"

namespace txbatch {

// Runs `plan`'s grid. `out_dir`: a sweep's folder (results.json, results.csv, tables.txt, the
// figures); `capture`: run --capture's file. Either may be empty.
int RunCommand(const RunPlan& plan, const EalUserArgs& eal_user_args, RunEnv env,
               const std::string& out_dir = "", const std::string& capture = "");

// sweep: run's grid against batch limits (1..64 unless --batch or --policy names them), every
// policy one with a limit N, into `sweep_out`.
int SweepCommand(RunArgs& sweep_args, const std::string& sweep_out, const EalUserArgs& eal_args,
                 const RunEnv& env);

}  // namespace txbatch
