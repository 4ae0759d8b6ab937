#pragma once
// `txbatch compare`: the plan's two configurations in interleaved rounds (compare.h has what it
// computes and prints).

#include "engine/record.h"
#include "tools/run_options.h"

namespace txbatch {

int CompareCommand(const RunPlan& plan, const EalUserArgs& eal_user_args, RunEnv env);

}  // namespace txbatch
