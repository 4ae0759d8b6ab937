#include "results/records.h"

#include <optional>
#include <string>

#include "dataplane/producer.h"
#include "engine/cost_model_file.h"
#include "txbatch_config.h"

namespace txbatch {
namespace {

using nlohmann::json;

json OptionalNumber(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }
// Receive-side counts are null where nothing receives (net_null, a TX-only pcap): never 0.
json RxCount(const Books& k, uint64_t v) { return k.rx_side ? json(v) : json(nullptr); }

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

// fq_codel's xstats, as `tc -s qdisc show` names them.
json FqCodelJson(const QdiscCountersOf<uint64_t>& f) {
  return {{"dropped_codel", f.dropped_codel},   {"drop_overlimit", f.drop_overlimit},
          {"drop_overmemory", f.drop_overmemory}, {"ecn_mark", f.ecn_mark},
          {"new_flow_count", f.new_flow_count}, {"maxpacket", f.maxpacket}};
}

// An mq root's children (null for a cell of one queue).
json MqJson(const std::vector<QdiscChildResult>& children) {
  if (children.empty()) return nullptr;
  json out = json::array();
  for (const QdiscChildResult& c : children)
    out.push_back({{"queue", c.queue},
                   {"sent", c.sent},
                   {"dropped", c.dropped},
                   {"requeues", c.requeues},
                   {"backlog", c.backlog},
                   {"queue_stops", c.queue_stops},
                   {"queue_wakes", c.queue_wakes},
                   {"fq_codel", c.fq_codel ? FqCodelJson(*c.fq_codel) : json(nullptr)}});
  return out;
}

json Summary(const std::optional<LatencySummary>& l) {
  if (!l) return nullptr;
  return {{"min", l->min}, {"avg", l->avg},   {"p50", l->p50}, {"p90", l->p90},
          {"p99", l->p99}, {"p999", l->p999}, {"max", l->max}, {"count", l->count}};
}

// The latency histogram's bins that hold samples, each [lo_ns, hi_ns, count], and the exact
// extremes; null where latency is.
json HistJson(const std::vector<HistBin>& bins, const std::optional<LatencySummary>& l) {
  if (!l || bins.empty()) return nullptr;
  json out = json::array();
  for (const HistBin& b : bins) out.push_back(json::array({b.lo_ns, b.hi_ns, b.count}));
  return {{"min", l->min}, {"max", l->max}, {"count", l->count}, {"bins", std::move(out)}};
}

// One flow's counts and latency (a results.per_flow entry, results.probe).
json FlowJson(const CellResult::Flow& f) {
  return {{"flow", f.id},
          {"generated", f.generated},
          {"received", f.counts.received},
          {"lost", f.counts.lost},
          {"duplicated", f.counts.duplicated},
          {"reordered", f.counts.reordered},
          {"latency_ns", Summary(f.latency)}};
}

json ResultJson(const CellResult& r) {
  json hist = json::object();
  for (const auto& [lo, n] : r.batch_hist) hist[std::to_string(lo)] = n;
  json dequeue_sizes = json::object();
  for (const auto& [size, n] : r.dequeue_sizes) dequeue_sizes[std::to_string(size)] = n;
  const json latency = Summary(r.latency);
  json stages = nullptr;
  if (r.lat_before_driver) {
    const bool fill = r.before_driver_is_batch_fill;
    stages = {{"qdisc", fill ? json(nullptr) : Summary(r.lat_before_driver)},
              {"batch_fill", fill ? Summary(r.lat_before_driver) : json(nullptr)},
              {"driver_ring", Summary(r.lat_driver_ring)},
              {"wire", Summary(r.lat_wire)}};
  }
  json by_position = json::array();
  for (const auto& [positions, s] : r.lat_by_position) {
    json e = Summary(s);
    e["positions"] = positions;
    by_position.push_back(std::move(e));
  }
  json per_flow = nullptr;
  if (!r.flows.empty()) {
    per_flow = json::array();
    for (const auto& f : r.flows) per_flow.push_back(FlowJson(f));
  }
  const Books& k = r.books;
  json ceiling = nullptr;
  if (r.ceiling_mpps) ceiling = {{"mpps", *r.ceiling_mpps}, {"mb_per_s", *r.ceiling_mb_per_s}};
  return {{"packets", r.packets},
          {"window_s", r.window_s},
          {"mb_per_s", r.mb_per_s},
          {"mpps", r.mpps},
          {"wire_gbps", r.wire_gbps},
          {"counted_at", r.counted_at},
          {"link_layer", r.link_layer.empty() ? json(nullptr) : json(r.link_layer)},
          {"avg_batch", r.avg_batch},
          {"batch_hist", hist},
          {"dequeue_sizes", dequeue_sizes},
          {"xmit_calls_per_pkt", r.xmit_calls_per_pkt},
          {"doorbells_per_pkt", OptionalNumber(r.doorbells_per_pkt)},
          {"cycles_per_pkt", r.cycles_per_pkt},
          {"cpu_ns_per_pkt", r.cpu_ns_per_pkt},
          {"receiver", r.receiver ? json{{"cycles_per_pkt", r.receiver->cycles_per_pkt},
                                         {"cpu_ns_per_pkt", r.receiver->cpu_ns_per_pkt}}
                                  : json(nullptr)},
          {"completions", r.completion_frames_per_call
                              ? json{{"frames_per_call", *r.completion_frames_per_call},
                                     {"cycles_per_call", r.completion_cycles_per_call.value_or(0)}}
                              : json(nullptr)},
          {"requeues", r.requeues},
          {"requeued_frames", r.requeued_frames},
          {"qdisc_missed", r.qdisc_missed},
          {"bypassed", r.bypassed},
          {"queue_stops", r.queue_stops},
          {"queue_wakes", r.queue_wakes},
          {"producer_waits", r.producer_waits},
          {"tsq_waits", r.tsq_waits},
          {"tsq", r.tsq ? json{{"samples", r.tsq->samples},
                               {"below_p50", r.tsq->below_p50},
                               {"below_p90", r.tsq->below_p90},
                               {"limit", r.tsq->limit},
                               {"pacing_rate", r.tsq->pacing_rate}}
                        : json(nullptr)},
          {"reschedules", r.reschedules},
          {"drops", r.drops},
          {"drops_total", r.drops_total},
          {"flush_triggers",
           {{"full", r.flush_triggers[static_cast<size_t>(FlushTrigger::kFull)]},
            {"timer", r.flush_triggers[static_cast<size_t>(FlushTrigger::kTimer)]},
            {"write_done", r.flush_triggers[static_cast<size_t>(FlushTrigger::kWriteDone)]},
            {"end", r.flush_triggers[static_cast<size_t>(FlushTrigger::kEnd)]}}},
          {"latency_ns", latency},
          {"latency_hist_ns", HistJson(r.latency_hist, r.latency)},
          {"per_flow", per_flow},
          {"probe", r.probe ? FlowJson(*r.probe) : json(nullptr)},
          {"fairness", r.fairness ? json{{"flows", r.fairness->flows},
                                         {"jain", r.fairness->jain},
                                         {"min_received", r.fairness->min_received},
                                         {"max_received", r.fairness->max_received}}
                                  : json(nullptr)},
          {"link", r.link ? json{{"offered", r.link->offered},
                                 {"lost", r.link->lost},
                                 {"dropped_limit", r.link->dropped_limit},
                                 {"duplicated", r.link->duplicated},
                                 {"corrupted", r.link->corrupted},
                                 {"reordered", r.link->reordered},
                                 {"dup_failed", r.link->dup_failed},
                                 {"frames_lost", r.link->frames_lost},
                                 {"receiver_reordered", r.link->sink_reordered},
                                 {"receiver_corrupt", r.link->sink_corrupt}}
                          : json(nullptr)},
          {"bql", r.bql ? json{{"limit", r.bql->limit},
                               {"limit_max", r.bql->limit_max},
                               {"stops", r.bql->stops}}
                        : json(nullptr)},
          {"fq_codel", r.fq_codel ? FqCodelJson(*r.fq_codel) : json(nullptr)},
          {"mq", MqJson(r.mq)},
          {"driver_counters", r.driver_counters},
          {"latency_stages_ns", stages},
          {"latency_by_position_ns", by_position},
          {"accounting",
           {{"generated", k.generated},
            {"sent", k.sent},
            {"dropped", k.dropped},
            {"dropped_queued", k.dropped_queued},
            {"queued", k.queued},
            {"received", RxCount(k, k.received)},
            {"lost", RxCount(k, k.lost)},
            {"duplicated", RxCount(k, k.duplicated)},
            {"in_flight", RxCount(k, k.in_flight)},
            {"link_lost", k.link_lost ? json(*k.link_lost) : json(nullptr)},
            {"balanced", k.balanced}}},
          {"mbufs_in_use_at_exit", k.mbufs_in_use},
          {"link_ceiling", ceiling},
          {"link_bound", r.link_bound ? json(*r.link_bound) : json(nullptr)},
          {"link_utilisation", OptionalNumber(r.link_utilisation)},
          {"model_checks",
           {{"last_departure_s", r.last_departure_s},
            {"stopped_at_s", r.stopped_at_s},
            {"drained_at_s", r.drained_at_s},
            {"arrival_before_tx", r.arrival_before_tx},
            {"wire_max_idle_us", r.wire_max_idle_us},
            {"wire_stalled_us", r.wire_stalled_us},
            {"irq_max_late_us", r.irq_max_late_us}}},
          {"foreign_frames", r.foreign},
          {"alloc_failures", r.alloc_failures},
          {"voluntary_ctxsw", r.voluntary_ctxsw},
          {"involuntary_ctxsw", r.involuntary_ctxsw},
          {"txirq_realtime", r.txirq_realtime},
          {"unregistered_threads", r.unregistered_threads},
          {"interrupted", r.interrupted}};
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
