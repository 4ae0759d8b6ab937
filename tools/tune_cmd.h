#pragma once
// `txbatch tune`: the smallest batch limit reaching a share of the best throughput (within a p99
// budget): a coarse sweep of the given limits, then the limits between the knee and the coarse
// one below it (tune.h has the knee's rule).

#include <string>

#include "tools/option_checks.h"
#include "engine/record.h"
#include "tools/run_options.h"

namespace txbatch {

// --target: percent of the best throughput.
inline constexpr ValueRange kTuneTargetPct{50, 100};

int TuneCommand(const RunArgs& args, double target_pct, const std::string& p99_max,
                const EalUserArgs& eal_user_args, RunEnv env);

}  // namespace txbatch
