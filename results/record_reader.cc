#include "results/record_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

#include "base/input_file.h"
#include "dataplane/rx_sink.h"
#include "drivers/factory.h"
#include "engine/cost_model_file.h"
#include "results/json_read.h"
#include "results/result_fields.h"

namespace txbatch {

std::string Printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      out += fmt::format("\\x{:02x}", c);
    } else if (c == 0xc2 && i + 1 < text.size() &&
               static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(text[++i]));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

namespace {

using nlohmann::json;

// A record's `config.rate`: as ParseRate, but "Nbps" is N bits/s — the records written until
// 2026-12-05 said so (tc's bps, bytes, is what --rate takes now, and records say "Nbit").
std::optional<RateSpec> RecordRate(const std::string& text) {
  if (text.ends_with("bps") && !text.ends_with("kbps") && !text.ends_with("mbps") &&
      !text.ends_with("gbps") && !text.ends_with("tbps") && !text.ends_with("ibps"))
    return RecordRate(text.substr(0, text.size() - 3) + "bit");
  if (auto r = ParseRate(text)) return *r;
  return std::nullopt;
}

CellConfig ConfigFrom(const json& c) {
  CellConfig cfg;
  cfg.driver = c.value("driver_given", c.at("driver").get<std::string>());
  if (auto spec = ParseDriverSpec(c.at("driver").get<std::string>())) cfg.driver_spec = *spec;
  cfg.proto = c.at("proto") == "udp" ? Proto::kUdp : Proto::kTcp;
  // Records before --offload: none.
  if (auto o = ParseOffload(c.value("offload", "none"))) cfg.offload = *o;
  // Records before --tsq, and cells where it did not run: 0.
  if (c.contains("tsq") && !c["tsq"].is_null()) cfg.tsq = Whole{c["tsq"]};
  if (auto p = ParsePolicySpec(c.at("policy").get<std::string>())) cfg.policy = *p;
  cfg.size = Whole{c.at("size")};
  cfg.procs = Whole{c.at("procs")};
  cfg.mtu = Whole{c.at("mtu")};
  cfg.txqueuelen = Whole{c.at("txqueuelen")};
  cfg.duration_s = c.at("duration_s");
  cfg.warmup_s = c.at("warmup_s");
  if (auto r = RecordRate(c.at("rate").get<std::string>())) cfg.rate = *r;
  cfg.stream = c.at("producer") == "stream";
  cfg.shape.noqueue = c.at("qdisc") == "none";
  cfg.shape.dedicated = c.at("runner") == "dedicated";
  cfg.shape.nolock = c.at("sync") == "nolock";
  cfg.shape.pfifo = c.at("qdisc") == "pfifo";
  if (c.at("qdisc") == "fq_codel") {
    std::string error;
    const json& words = c.value("qdisc_params", json());
    if (words.is_string()) cfg.shape.fq_codel = ParseFqCodel(words.get<std::string>(), &error);
    if (!cfg.shape.fq_codel)
      throw json::type_error::create(
          302, fmt::format("fq_codel's parameters as tc words were expected, not {}{}",
                           words.dump(), error.empty() ? "" : " (" + error + ")"),
          &words);
  }
  cfg.bypass = c.value("bypass", false);
  cfg.sync_auto = c.value("sync_auto", false);
  cfg.timing = c.value("timing", true);
  cfg.latency_sample = c.value("latency_sample", 1u);  // before 2026-12-07: every frame
  if (cfg.latency_sample < 1)
    throw json::type_error::create(302, "latency_sample of 1 or more was expected, not 0",
                                   &c.at("latency_sample"));
  cfg.per_flow = c.value("per_flow", false);
  const json& flows = c.value("flows", json(1));  // before 2026-12-07: one a producer
  cfg.flows = Whole{flows};
  if (cfg.flows < 1)
    throw json::type_error::create(302, "flows (each producer's) of 1 or more was expected, not 0",
                                   &flows);
  if (uint64_t{cfg.flows} * cfg.procs > kMaxFlows)
    throw json::type_error::create(
        302,
        fmt::format("at most {} flows in all (procs x flows) were expected, not {} x {}",
                    kMaxFlows, cfg.procs, cfg.flows),
        &flows);
  if (const json& p = c.value("probe", json()); p.is_string()) cfg.probe = RecordRate(p);
  if (const json& b = c.value("bql", json()); b.is_object())
    cfg.bql = BqlBounds{Whole{b.at("limit_min")}, Whole{b.at("limit_max")},
                        b.at("hold_time_ms").get<double>() / 1e3};
  cfg.seed = Whole{c.at("seed")};
  if (c.contains("link") && c["link"].is_string())
    if (auto l = ParseLinkSpec(c["link"].get<std::string>())) cfg.link = *l;
  cfg.engine = c.value("engine", "real") == "sim" ? Engine::kSim : Engine::kReal;
  cfg.queues = c.contains("queues") ? Whole{c["queues"]} : 1u;
  cfg.pool_size = c.contains("pool_size") ? Whole{c["pool_size"]} : 0u;
  if (const json& m = c.value("cost_model", json()); m.is_object())
    if (auto cost = CostModelFromJson(m, "in the record")) cfg.cost = *cost;
  return cfg;
}

// How deep `doc` nests arrays and objects (a scalar: 0), walked without recursion: the depth
// rule must not itself be a way to exhaust the stack.
int Depth(const json& doc) {
  int deepest = 0;
  std::vector<std::pair<const json*, int>> pending{{&doc, 0}};
  while (!pending.empty()) {
    const auto [j, depth] = pending.back();
    pending.pop_back();
    if (!j->is_structured()) continue;
    deepest = std::max(deepest, depth + 1);
    if (deepest > kMaxResultDepth) return deepest;  // enough to refuse it
    for (const json& child : *j) pending.emplace_back(&child, depth + 1);
  }
  return deepest;
}

std::map<std::string, uint64_t> PrintableKeys(const std::map<std::string, uint64_t>& m) {
  std::map<std::string, uint64_t> out;
  for (const auto& [k, v] : m) out[Printable(k)] = v;
  return out;
}

// Every string in `j`, keys too, made Printable (a compare document's `comparison`).
json PrintableJson(const json& j) {
  if (j.is_string()) return Printable(j.get<std::string>());
  if (j.is_array()) {
    json out = json::array();
    for (const json& e : j) out.push_back(PrintableJson(e));
    return out;
  }
  if (j.is_object()) {
    json out = json::object();
    for (const auto& [k, v] : j.items()) out[Printable(k)] = PrintableJson(v);
    return out;
  }
  return j;
}

// What report prints of a record, its strings Printable.
void MakePrintable(CellRecord& r) {
  r.config.driver = Printable(r.config.driver);
  r.side = Printable(r.side);
  r.result.counted_at = Printable(r.result.counted_at);
  r.result.link_layer = Printable(r.result.link_layer);
  r.result.emulator_bound_why = Printable(r.result.emulator_bound_why);
  r.result.drops = PrintableKeys(r.result.drops);
  r.result.driver_counters = PrintableKeys(r.result.driver_counters);
  for (auto& [positions, summary] : r.result.lat_by_position) positions = Printable(positions);
}

}  // namespace

Result<ReadBack> ReadResults(const std::string& path) {
  auto text =
      ReadInputFile(path, "result file", kMaxResultFileBytes, "a file txbatch wrote with --json");
  if (!text) return text.error();
  return ParseResults(*text, path);
}

Result<ReadBack> ParseResults(std::string_view text, std::string_view path) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::exception& e) {
    return MakeError(EINVAL, fmt::format("'{}' is not JSON ({}); valid: a file txbatch wrote with "
                                         "--json",
                                         path, e.what()));
  }
  if (Depth(doc) > kMaxResultDepth)
    return MakeError(EINVAL, fmt::format("'{}' nests arrays and objects deeper than the {} levels "
                                         "txbatch reads; valid: a file txbatch wrote with --json",
                                         path, kMaxResultDepth));
  // `sink --json` writes a document of its own (schema_version 1, kind "sink", no records).
  if (doc.is_object() && doc.value("kind", json()) == "sink")
    return MakeError(EINVAL, fmt::format("'{}' is a txbatch sink record; report reads "
                                         "run/compare/sweep/tune/calibrate result documents",
                                         path));
  // value("schema_version", 0) would throw on a version that is not a number ("1").
  if (doc.is_object() && doc.contains("schema_version") &&
      !(doc["schema_version"].is_number_integer() && doc["schema_version"] == 1))
    return MakeError(EINVAL, fmt::format("'{}' has schema_version {}, and txbatch reads "
                                         "schema_version 1 (the integer); valid: a file txbatch "
                                         "wrote with --json",
                                         path, doc["schema_version"].dump()));
  if (!doc.is_object() || !doc.contains("schema_version") || !doc.contains("records") ||
      !doc["records"].is_array() || doc["records"].empty())
    return MakeError(EINVAL, fmt::format("'{}' holds no txbatch records (schema_version 1 with a "
                                         "non-empty records array); valid: a file txbatch wrote "
                                         "with --json",
                                         path));
  ReadBack out;
  std::vector<std::string> seen;  // configurations by first use (their JSON, env excluded)
  try {
    for (const json& rec : doc["records"]) {
      CellRecord r;
      r.config = ConfigFrom(rec.at("config"));
      r.result = ResultFrom(rec.at("results"));
      r.round = rec.contains("round") ? Whole{rec["round"]} : 0;
      r.side = rec.value("side", std::string());
      const std::string key = rec.at("config").dump();
      auto it = std::find(seen.begin(), seen.end(), key);
      r.cell = static_cast<int>(it - seen.begin());
      if (it == seen.end()) {
        seen.push_back(key);
        out.cells.push_back(r.config);
      }
      if (std::none_of(out.policies.begin(), out.policies.end(),
                       [&](const PolicySpec& p) { return p == r.config.policy; }))
        out.policies.push_back(r.config.policy);
      out.records.push_back(std::move(r));
    }
    const json& env = doc["records"][0].at("env");
    RunEnv& e = out.env;
    e.dpdk_version = env.at("dpdk_version");
    e.kernel = env.at("kernel");
    e.cpu = env.at("cpu");
    e.tsc_hz = env.at("tsc_hz");
    e.eal_mode = env.at("eal_mode");
    e.eal_why = env.value("eal_why", std::string("as recorded"));
    e.command_line = env.at("command_line");
    e.started_at = env.at("started_at");
    e.eal_args = doc["records"][0].at("config").at("eal").get<std::vector<std::string>>();
    for (const CellRecord& r : out.records)
      if (!r.result.link_layer.empty())
        e.link_layers[r.config.driver_spec.ToString()] = r.result.link_layer;
    unsigned most = 0;
    for (const json& rec : doc["records"])
      if (const unsigned procs = Whole{rec.at("config").at("procs")}; procs >= most) {
        most = procs;
        e.pinning = rec.at("env").at("pinning");
      }
  } catch (const json::exception& e) {
    return MakeError(EINVAL, fmt::format("'{}' is not a complete txbatch result document ({}); "
                                         "valid: a file txbatch wrote with --json",
                                         path, e.what()));
  }
  for (CellRecord& r : out.records) MakePrintable(r);
  for (CellConfig& c : out.cells) c.driver = Printable(c.driver);
  RunEnv& e = out.env;
  for (std::string* f : {&e.dpdk_version, &e.kernel, &e.cpu, &e.pinning, &e.command_line,
                         &e.started_at, &e.eal_mode, &e.eal_why})
    *f = Printable(*f);
  for (std::string& a : e.eal_args) a = Printable(a);
  std::map<std::string, std::string> layers;
  for (const auto& [k, v] : e.link_layers) layers[Printable(k)] = Printable(v);
  e.link_layers = std::move(layers);
  if (doc.contains("comparison")) out.comparison = PrintableJson(doc["comparison"]);
  out.document = std::move(doc);
  return out;
}

}  // namespace txbatch
