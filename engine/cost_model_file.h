#pragma once
// The cost-model file (`--cost-model FILE`, written by `txbatch calibrate`): the simulation
// engine's CPU costs as JSON, and the same object in every simulated record's config.
//
//   { "tsc_hz": 2.596e9, "source": "...",
//     "cycles": { "write": 20, "frame": 50, "lock": 16, ... } }
//
// Every key of "cycles" is optional (missing: the default's value; `bypass` missing: the file's
// enqueue + dequeue + dequeue_frame, what the bypass skips); unknown keys are refused.

#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "engine/cost_model.h"

namespace txbatch {

nlohmann::json CostModelJson(const CostModel& model);
// One sentence naming the key and what is valid for anything else.
Result<CostModel> CostModelFromJson(const nlohmann::json& doc, const std::string& where);
Result<CostModel> LoadCostModel(const std::string& path);

}  // namespace txbatch
