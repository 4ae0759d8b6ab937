#include "engine/cost_model_file.h"

#include <fmt/format.h>

#include <cmath>
#include <utility>

#include "base/input_file.h"

namespace txbatch {
namespace {

// Every cost by its name in the file.
constexpr std::pair<const char*, double CostModel::*> kCosts[] = {
    {"write", &CostModel::write},
    {"frame", &CostModel::frame},
    {"lock", &CostModel::lock},
    {"lock_contended", &CostModel::lock_contended},
    {"enqueue", &CostModel::enqueue},
    {"dequeue", &CostModel::dequeue},
    {"dequeue_frame", &CostModel::dequeue_frame},
    {"run_xmit", &CostModel::run_xmit},
    {"bypass", &CostModel::bypass},
    {"xmit_call", &CostModel::xmit_call},
    {"xmit_frame", &CostModel::xmit_frame},
    {"completion", &CostModel::completion},
    {"completion_frame", &CostModel::completion_frame},
    {"deliver", &CostModel::deliver},
    {"gso_segment", &CostModel::gso_segment},
    {"futex", &CostModel::futex},
    {"context_switch", &CostModel::context_switch},
    {"wakeup", &CostModel::wakeup},
    {"remote_wake", &CostModel::remote_wake},
    {"halt_after", &CostModel::halt_after},
    {"remote_wake_halted", &CostModel::remote_wake_halted},
    {"wakeup_halted", &CostModel::wakeup_halted},
    {"timer_arm", &CostModel::timer_arm},
    {"timer_wake", &CostModel::timer_wake},
    {"timer_irq", &CostModel::timer_irq},
    {"tick", &CostModel::tick},
    {"tick_interval", &CostModel::tick_interval},
    {"pi_unlock", &CostModel::pi_unlock},
    {"pi_handover", &CostModel::pi_handover},
    {"slice", &CostModel::slice},
    {"handover", &CostModel::handover},
    {"handover_bulk", &CostModel::handover_bulk},
    {"recycle", &CostModel::recycle},
    {"deliver_remote", &CostModel::deliver_remote},
};

std::string CostNames() {
  std::string s;
  for (const auto& [name, member] : kCosts) s += fmt::format("{}{}", s.empty() ? "" : ", ", name);
  return s;
}

}  // namespace

nlohmann::json CostModelJson(const CostModel& model) {
  nlohmann::json cycles = nlohmann::json::object();
  for (const auto& [name, member] : kCosts) cycles[name] = model.*member;
  return {
      {"tsc_hz", model.tsc_hz}, {"cpus", model.cpus}, {"source", model.source}, {"cycles", cycles}};
}

// A TSC runs between 100 MHz and 100 GHz: outside that a model describes no machine (tsc_hz 1e300
// turned every rate into -nan with exit 0).
inline constexpr double kMinTscHz = 1e8, kMaxTscHz = 1e11;
// No step of the modelled path costs more than 0.1 s of a 1 GHz CPU: the largest real ones, a
// scheduler's tick interval or time slice, are a few million cycles; 1e12 for one write made a
// cell that could not drain in any time ("this is a txbatch bug", exit 1).
inline constexpr double kMaxCostCycles = 1e8;

Result<CostModel> CostModelFromJson(const nlohmann::json& doc, const std::string& where) {
  const auto bad = [&](const std::string& what) {
    return MakeError(EINVAL, fmt::format("cost model {}: {}; valid: {{\"tsc_hz\": HZ, \"cpus\": "
                                         "0..{}, \"source\": TEXT, \"cycles\": {{{}: cycles "
                                         "0..{:.0e}}}}}",
                                         where, what, kMaxModelCpus, CostNames(), kMaxCostCycles));
  };
  if (!doc.is_object()) return bad("not a JSON object");
  CostModel m;
  bool has_bypass = false;
  for (const auto& [key, value] : doc.items()) {
    if (key == "tsc_hz") {
      if (!value.is_number() || !(value.get<double>() >= kMinTscHz) ||
          !(value.get<double>() <= kMaxTscHz))
        return bad(fmt::format("tsc_hz must be {:.0e}..{:.0e} (a TSC of 100 MHz to 100 GHz)",
                               kMinTscHz, kMaxTscHz));
      m.tsc_hz = value.get<double>();
    } else if (key == "cpus") {
      if (!value.is_number_unsigned() || value.get<uint64_t>() > kMaxModelCpus)
        return bad(fmt::format("cpus must be a whole number 0..{}", kMaxModelCpus));
      m.cpus = value.get<unsigned>();
    } else if (key == "source") {
      if (!value.is_string()) return bad("source must be text");
      m.source = value.get<std::string>();
    } else if (key == "cycles") {
      if (!value.is_object()) return bad("cycles must be an object");
      for (const auto& [name, v] : value.items()) {
        double CostModel::*member = nullptr;
        for (const auto& [n, mp] : kCosts)
          if (name == n) member = mp;
        if (member == nullptr) return bad(fmt::format("unknown cost '{}'", name));
        if (!v.is_number() || !(v.get<double>() >= 0) || !(v.get<double>() <= kMaxCostCycles))
          return bad(fmt::format("cost '{}' must be a number of cycles 0..{:.0e}", name,
                                 kMaxCostCycles));
        m.*member = v.get<double>();
        has_bypass |= member == &CostModel::bypass;
      }
    } else if (key != "fit") {  // calibrate's report of the fit travels with the model
      return bad(fmt::format("unknown key '{}'", key));
    }
  }
  // A model from before the bypass was costed (2026-12-04) charges what the bypass skips, its
  // own enqueue and dequeue, not the built-in's.
  if (!has_bypass) m.bypass = m.enqueue + m.dequeue + m.dequeue_frame;
  return m;
}

Result<CostModel> LoadCostModel(const std::string& path) {
  auto text = ReadInputFile(path, "--cost-model", kMaxCostModelFileBytes,
                            "a JSON file as txbatch calibrate writes");
  if (!text) return text.error();
  const nlohmann::json doc = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded())
    return MakeError(EINVAL, fmt::format("--cost-model '{}' is not valid JSON; valid: a JSON file "
                                         "as txbatch calibrate writes",
                                         path));
  return CostModelFromJson(doc, "'" + path + "'");
}

}  // namespace txbatch
