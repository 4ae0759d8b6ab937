#pragma once
// The JSON result records (DESIGN.md "Result records", schema_version 1): one per cell run, its
// config, results and env. record_reader.h reads them back; tables.h prints the same runs for
// people.

#include <nlohmann/json.hpp>
#include <vector>

#include "engine/record.h"

namespace txbatch {

nlohmann::json ToJson(const std::vector<CellRecord>& records, const RunEnv& env);

}  // namespace txbatch
