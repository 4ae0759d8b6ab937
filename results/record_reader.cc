#include "results/record_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <map>
#include <type_traits>
#include <utility>

#include "base/input_file.h"
#include "batching/batch.h"
#include "dataplane/rx_sink.h"
#include "drivers/factory.h"
#include "engine/cost_model_file.h"

namespace txbatch {
namespace {

using nlohmann::json;

// `text` with its control characters (C0, DEL, and C1 as UTF-8) escaped, as what report prints
// from a document: an ESC in a driver name would otherwise drive the terminal.
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

// An integer field read from a document: converts to the integer type it is assigned to, and
// refuses (a json type_error, reported as an incomplete document) anything but a JSON integer in
// that type's range — converting a float or an out-of-range value would be undefined behaviour.
struct Whole {
  const json& j;
  template <class T>
  requires std::is_integral_v<T>
  operator T() const {
    if (j.is_number_unsigned()) {
      if (const auto v = j.get<uint64_t>(); std::in_range<T>(v)) return static_cast<T>(v);
    } else if (j.is_number_integer()) {
      if (const auto v = j.get<int64_t>(); std::in_range<T>(v)) return static_cast<T>(v);
    }
    throw json::type_error::create(
        302,
        fmt::format("an integer in {}..{} was expected, not {}", std::numeric_limits<T>::min(),
                    std::numeric_limits<T>::max(), j.dump()),
        &j);
  }
};

// A batch_hist (or dequeue_sizes, `field`) key: a batch size 1..kMaxBatch written in decimal (a
// type_error otherwise, as Whole's).
unsigned BatchSize(const std::string& key, const json& hist,
                   std::string_view field = "batch_hist") {
  unsigned n = 0;
  const auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), n);
  if (ec != std::errc{} || end != key.data() + key.size() || n < 1 || n > kMaxBatch)
    throw json::type_error::create(
        302,
        fmt::format("a batch size 1..{} was expected as a {} key, not '{}'", kMaxBatch, field,
                    Printable(key)),
        &hist);
  return n;
}

// latency_hist_ns.bins: an array of [lo_ns, hi_ns, count], lo < hi, in order, none overlapping
// (a type_error otherwise, as Whole's).
std::vector<HistBin> HistBins(const json& bins) {
  const auto refuse = [&bins](const std::string& what) {
    return json::type_error::create(302, "latency_hist_ns.bins: " + what, &bins);
  };
  if (!bins.is_array()) throw refuse("an array of [lo_ns, hi_ns, count] was expected");
  std::vector<HistBin> out;
  for (const json& b : bins) {
    if (!b.is_array() || b.size() != 3 || !b[0].is_number() || !b[1].is_number())
      throw refuse(fmt::format("a bin [lo_ns, hi_ns, count] was expected, not {}", b.dump()));
    const HistBin bin{b[0].get<double>(), b[1].get<double>(), Whole{b[2]}};
    if (!(bin.lo_ns < bin.hi_ns) || (!out.empty() && bin.lo_ns < out.back().hi_ns))
      throw refuse(fmt::format("a bin with lo < hi, above the one before it, was expected, not {}",
                               b.dump()));
    out.push_back(bin);
  }
  return out;
}

// fq_codel's xstats (FqCodelJson), every one an integer.
QdiscCountersOf<uint64_t> FqCodelFrom(const json& q) {
  QdiscCountersOf<uint64_t> f;
  f.dropped_codel = Whole{q.at("dropped_codel")};
  f.drop_overlimit = Whole{q.at("drop_overlimit")};
  f.drop_overmemory = Whole{q.at("drop_overmemory")};
  f.ecn_mark = Whole{q.at("ecn_mark")};
  f.new_flow_count = Whole{q.at("new_flow_count")};
  f.maxpacket = Whole{q.at("maxpacket")};
  return f;
}

// A map of counters ("drops", "driver_counters"): every value an integer.
std::map<std::string, uint64_t> Counts(const json& j) {
  std::map<std::string, uint64_t> out;
  for (const auto& [k, v] : j.items()) out[k] = Whole{v};
  return out;
}

std::optional<double> OptNum(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  return j[key].get<double>();
}

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

std::optional<LatencySummary> SummaryFrom(const json& l) {
  if (l.is_null()) return std::nullopt;
  return LatencySummary{l.at("min"), l.at("avg"),  l.at("p50"), l.at("p90"),
                        l.at("p99"), l.at("p999"), l.at("max"), Whole{l.at("count")}};
}

// results.fairness: the load's flows (2 or more: none with one), Jain's index over them
// (1/flows..1, give or take kJainSlack of rounding) and the least and most a flow received.
constexpr double kJainSlack = 1e-9;
CellResult::Fairness FairnessFrom(const json& f) {
  const auto n = static_cast<unsigned>(Whole{f.at("flows")});
  const double jain = f.at("jain").get<double>();
  const uint64_t lo = Whole{f.at("min_received")}, hi = Whole{f.at("max_received")};
  if (n < 2)
    throw json::type_error::create(
        302, fmt::format("fairness over 2 or more flows was expected, not {}", n), &f);
  if (!(jain >= 1.0 / n - kJainSlack && jain <= 1 + kJainSlack))
    throw json::type_error::create(
        302,
        fmt::format("Jain's index over {} flows in 1/{}..1 was expected, not {}", n, n,
                    f.at("jain").dump()),
        &f);
  if (lo > hi)
    throw json::type_error::create(
        302,
        fmt::format("fairness' min_received at most its max_received was expected, not {} > {}",
                    lo, hi),
        &f);
  return {n, jain, lo, hi};
}

CellResult ResultFrom(const json& r) {
  CellResult x;
  x.packets = Whole{r.at("packets")};
  x.window_s = r.at("window_s");
  x.mb_per_s = r.at("mb_per_s");
  x.mpps = r.at("mpps");
  x.wire_gbps = r.at("wire_gbps");
  x.counted_at = r.at("counted_at");
  if (r.contains("link_layer") && r["link_layer"].is_string()) x.link_layer = r["link_layer"];
  x.avg_batch = r.at("avg_batch");
  for (const auto& [k, v] : r.at("batch_hist").items())
    x.batch_hist[BatchSize(k, r.at("batch_hist"))] = Whole{v};
  if (const json& d = r.value("dequeue_sizes", json()); d.is_object())  // since 2026-12-06
    for (const auto& [k, v] : d.items())
      x.dequeue_sizes[BatchSize(k, d, "dequeue_sizes")] = Whole{v};
  x.xmit_calls_per_pkt = r.at("xmit_calls_per_pkt");
  x.doorbells_per_pkt = OptNum(r, "doorbells_per_pkt");
  x.cycles_per_pkt = r.at("cycles_per_pkt");
  x.cpu_ns_per_pkt = r.at("cpu_ns_per_pkt");
  if (const auto v = r.find("receiver"); v != r.end() && v->is_object())
    x.receiver = ReceiverResult{v->at("cycles_per_pkt").get<double>(),
                                v->at("cpu_ns_per_pkt").get<double>()};
  if (const auto c = r.find("completions"); c != r.end() && c->is_object()) {
    x.completion_frames_per_call = c->at("frames_per_call").get<double>();
    x.completion_cycles_per_call = c->at("cycles_per_call").get<double>();
  }
  x.requeues = Whole{r.at("requeues")};
  x.requeued_frames = Whole{r.at("requeued_frames")};
  x.qdisc_missed = r.contains("qdisc_missed") ? Whole{r["qdisc_missed"]} : uint64_t{0};
  x.bypassed = r.contains("bypassed") ? Whole{r["bypassed"]} : uint64_t{0};
  x.queue_stops = Whole{r.at("queue_stops")};
  x.queue_wakes = Whole{r.value("queue_wakes", json(0))};  // records before 2026-12-06: 0
  x.producer_waits = Whole{r.at("producer_waits")};
  x.tsq_waits = r.contains("tsq_waits") ? Whole{r["tsq_waits"]} : uint64_t{0};
  if (const json& t = r.value("tsq", json()); t.is_object()) {
    TsqSummary s;
    s.samples = Whole{t.at("samples")};
    s.below_p50 = t.at("below_p50").get<double>();
    s.below_p90 = t.at("below_p90").get<double>();
    s.limit = t.at("limit").get<double>();
    s.pacing_rate = t.at("pacing_rate").get<double>();
    x.tsq = s;
  }
  x.reschedules = Whole{r.at("reschedules")};
  x.drops = Counts(r.at("drops"));
  x.drops_total = Whole{r.at("drops_total")};
  x.latency = SummaryFrom(r.at("latency_ns"));
  if (const json& h = r.value("latency_hist_ns", json()); h.is_object())
    x.latency_hist = HistBins(h.at("bins"));
  if (const json& t = r.value("flush_triggers", json()); t.is_object()) {
    x.flush_triggers[static_cast<size_t>(FlushTrigger::kFull)] = Whole{t.at("full")};
    x.flush_triggers[static_cast<size_t>(FlushTrigger::kTimer)] = Whole{t.at("timer")};
    x.flush_triggers[static_cast<size_t>(FlushTrigger::kWriteDone)] = Whole{t.at("write_done")};
    x.flush_triggers[static_cast<size_t>(FlushTrigger::kEnd)] = Whole{t.at("end")};
  }
  if (const json& l = r.value("link", json()); !l.is_null())
    x.link = LinkResult{Whole{l.at("offered")},
                        Whole{l.at("lost")},
                        Whole{l.at("dropped_limit")},
                        Whole{l.at("duplicated")},
                        Whole{l.at("corrupted")},
                        Whole{l.at("reordered")},
                        Whole{l.at("dup_failed")},
                        Whole{l.at("frames_lost")},
                        Whole{l.at("receiver_reordered")},
                        Whole{l.at("receiver_corrupt")}};
  if (const json& b = r.value("bql", json()); !b.is_null())
    x.bql = BqlResult{Whole{b.at("limit")}, Whole{b.at("limit_max")}, Whole{b.at("stops")}};
  if (const json& q = r.value("fq_codel", json()); !q.is_null()) x.fq_codel = FqCodelFrom(q);
  if (const json& mq = r.value("mq", json()); !mq.is_null()) {
    if (!mq.is_array())
      throw json::type_error::create(302, "mq: an array of child qdiscs was expected", &mq);
    for (const json& c : mq) {
      QdiscChildResult& child = x.mq.emplace_back();
      child.queue = Whole{c.at("queue")};
      child.sent = Whole{c.at("sent")};
      child.dropped = Whole{c.at("dropped")};
      child.requeues = Whole{c.at("requeues")};
      child.backlog = Whole{c.at("backlog")};
      child.queue_stops = Whole{c.at("queue_stops")};
      child.queue_wakes = Whole{c.at("queue_wakes")};
      if (const json& f = c.at("fq_codel"); !f.is_null()) child.fq_codel = FqCodelFrom(f);
    }
  }
  x.driver_counters = Counts(r.value("driver_counters", json::object()));
  if (const json& st = r.value("latency_stages_ns", json()); !st.is_null()) {
    x.before_driver_is_batch_fill = !st.at("batch_fill").is_null();
    x.lat_before_driver =
        SummaryFrom(st.at(x.before_driver_is_batch_fill ? "batch_fill" : "qdisc"));
    x.lat_driver_ring = SummaryFrom(st.at("driver_ring"));
    x.lat_wire = SummaryFrom(st.at("wire"));
  }
  const auto flow_from = [](const json& f) {
    return CellResult::Flow{static_cast<unsigned>(Whole{f.at("flow")}),
                            FlowCounts{Whole{f.at("received")}, Whole{f.at("lost")},
                                       Whole{f.at("duplicated")}, Whole{f.at("reordered")}},
                            SummaryFrom(f.at("latency_ns")),
                            Whole{f.value("generated", json(0))}};  // before 2026-12-06: 0
  };
  if (const json& flows = r.value("per_flow", json()); flows.is_array())
    for (const json& f : flows) x.flows.push_back(flow_from(f));
  if (const json& p = r.value("probe", json()); !p.is_null()) x.probe = flow_from(p);
  if (const json& f = r.value("fairness", json()); !f.is_null()) x.fairness = FairnessFrom(f);
  for (const json& p : r.value("latency_by_position_ns", json::array()))
    x.lat_by_position.emplace_back(p.at("positions").get<std::string>(), *SummaryFrom(p));
  const json& a = r.at("accounting");
  Books& k = x.books;
  k.generated = Whole{a.at("generated")};
  k.sent = Whole{a.at("sent")};
  k.dropped = Whole{a.at("dropped")};
  k.dropped_queued = Whole{a.value("dropped_queued", json(0))};  // records before fq_codel: 0
  k.queued = Whole{a.at("queued")};
  k.rx_side = !a.at("received").is_null();
  if (k.rx_side) {
    k.received = Whole{a.at("received")};
    k.lost = Whole{a.at("lost")};
    k.duplicated = Whole{a.at("duplicated")};
    k.in_flight = Whole{a.at("in_flight")};
  }
  k.balanced = a.at("balanced");
  if (a.contains("link_lost") && !a["link_lost"].is_null())
    k.link_lost = static_cast<uint64_t>(Whole{a["link_lost"]});
  k.mbufs_in_use = Whole{r.at("mbufs_in_use_at_exit")};
  if (const json& c = r.at("link_ceiling"); !c.is_null()) {
    x.ceiling_mpps = c.at("mpps").get<double>();
    x.ceiling_mb_per_s = c.at("mb_per_s").get<double>();
  }
  if (!r.at("link_bound").is_null()) x.link_bound = r.at("link_bound").get<bool>();
  x.link_utilisation = OptNum(r, "link_utilisation");
  const json& m = r.at("model_checks");
  x.last_departure_s = m.at("last_departure_s");
  x.stopped_at_s = m.at("stopped_at_s");
  x.drained_at_s = m.at("drained_at_s");
  x.arrival_before_tx = Whole{m.at("arrival_before_tx")};
  x.wire_max_idle_us = m.at("wire_max_idle_us");
  x.wire_stalled_us = m.value("wire_stalled_us", 0.0);  // written since 2026-12-05
  x.irq_max_late_us = m.at("irq_max_late_us");
  x.foreign = Whole{r.at("foreign_frames")};
  x.alloc_failures = Whole{r.at("alloc_failures")};
  if (r.contains("voluntary_ctxsw"))  // written since 2026-12-03
    x.voluntary_ctxsw = Whole{r.at("voluntary_ctxsw")};
  x.involuntary_ctxsw = Whole{r.at("involuntary_ctxsw")};
  x.txirq_realtime = r.at("txirq_realtime");
  x.unregistered_threads = Whole{r.at("unregistered_threads")};
  x.interrupted = r.at("interrupted");
  return x;
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
