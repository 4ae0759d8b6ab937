#include "results/records.h"

#include <optional>
#include <string>

#include "dataplane/producer.h"
#include "engine/cost_model_file.h"
#include "results/result_fields.h"
#include "txbatch_config.h"

namespace txbatch {
namespace {

using nlohmann::json;

json ConfigJson(const CellConfig& c, const RunEnv& env) {
  return {{"driver", c.driver_spec.ToString()},
          {"driver_given", c.driver},
          {"proto", ProtoName(c.proto)},
          {"offload", OffloadName(c.offload)},
          {"tsq", TsqActive(c) ? json(c.tsq) : json(nullptr)},
          {"policy", c.policy.ToString()},
          {"batch", c.policy.frames},
          {"size", c.size},
          {"procs", c.procs},
          {"queues", c.queues},
          {"runner", c.shape.dedicated ? "dedicated" : "inline"},
          {"sync", c.shape.noqueue  ? "none"
                   : c.shape.nolock ? "nolock"
                                    : "rootlock"},
          {"qdisc", QdiscName(c.shape)},
          {"qdisc_params", c.shape.fq_codel ? json(DescribeFqCodel(*c.shape.fq_codel))
                                            : json(nullptr)},
          {"bql",
           {{"limit_min", c.bql.limit_min},
            {"limit_max", c.bql.limit_max},
            {"hold_time_ms", c.bql.hold_s * 1e3}}},
          {"bypass", c.bypass},
          {"era_mix", EraMix(c).empty() ? json(nullptr) : json(EraMix(c))},
          {"sync_auto", c.sync_auto},
          {"timing", c.timing},
          {"latency_sample", c.latency_sample},
          {"per_flow", c.per_flow},
          {"flows", c.flows},
          {"probe", c.probe ? json(c.probe->ToString()) : json(nullptr)},
          {"txqueuelen", c.txqueuelen},
          {"producer", c.stream ? "stream" : "datagram"},
          {"rate", c.rate.ToString()},
          {"mtu", c.mtu},
          {"duration_s", c.duration_s},
          {"warmup_s", c.warmup_s},
          {"seed", c.seed},
          {"link", c.link ? json(c.link->ToString()) : json(nullptr)},
          {"engine", EngineName(c.engine)},
          {"pool_size", c.pool_size},
          {"cost_model", c.engine == Engine::kSim ? CostModelJson(c.cost) : json(nullptr)},
          {"eal", env.eal_args}};
}

}  // namespace

json ToJson(const std::vector<CellRecord>& records, const RunEnv& env) {
  json out = {{"schema_version", 1}, {"records", json::array()}};
  for (const auto& rec : records) {
    json r = {{"config", ConfigJson(rec.config, env)},
              {"results", ResultJson(rec.result)},
              {"env",
               {{"txbatch_version", TXBATCH_VERSION},
                {"dpdk_version", env.dpdk_version},
                {"kernel", env.kernel},
                {"cpu", env.cpu},
                {"tsc_hz", env.tsc_hz},
                {"tsc_hz_source", "rte_get_tsc_hz"},
                {"pinning", DescribePinning(Producers(rec.config), env.cpus)},
                {"eal_mode", env.eal_mode},
                {"eal_why", env.eal_why},
                {"command_line", env.command_line},
                {"started_at", env.started_at},
                {"cell_wall_s", rec.result.wall_s}}}};
    if (rec.round > 0) r["round"] = rec.round;
    if (!rec.side.empty()) r["side"] = rec.side;
    out["records"].push_back(std::move(r));
  }
  return out;
}

}  // namespace txbatch
