#include "results/result_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "batching/batch.h"
#include "results/json_read.h"

namespace txbatch {
namespace {

using nlohmann::json;

// Whether a record may lack a field.
enum class Absent {
  kRefused,  // every record has it: without it the document is incomplete
  kDefault,  // records written before it existed lack it: it reads as zero, none or empty
};

// One field of a struct S in a record: where it sits (a JSON pointer below S's object, which
// nests: "/model_checks/stopped_at_s"; plain keys, no "~" escapes), how it is written and how
// it is read back from its value. Fields are listed once, in the order the record's
// documentation gives them, and read in that order.
template <class S>
struct Field {
  std::string_view path;
  json (*write)(const S&);
  void (*read)(const json&, S&);
  Absent absent = Absent::kRefused;
};

// `fields`: an array of Field<S>.
template <class S, class Fields>
json WriteFields(const S& s, const Fields& fields) {
  json out = json::object();
  for (const Field<S>& f : fields) out[json::json_pointer(std::string(f.path))] = f.write(s);
  return out;
}

// The value at `path` in `j`, each step as at() takes it (refusing a value that is no object, or
// an object without the key, with json's own messages); nullptr where the record lacks a field
// it may lack.
const json* Find(const json& j, std::string_view path, Absent absent) {
  const json* at = &j;
  for (size_t from = 1; from <= path.size();) {
    const size_t to = std::min(path.find('/', from), path.size());
    const std::string key(path.substr(from, to - from));
    if (!at->is_object())
      throw json::type_error::create(304, fmt::format("cannot use at() with {}", at->type_name()),
                                     at);
    if (absent == Absent::kDefault && !at->contains(key)) return nullptr;
    at = &at->at(key);
    from = to + 1;
  }
  return at;
}

template <class S, class Fields>
void ReadFields(const json& j, S& s, const Fields& fields) {
  for (const Field<S>& f : fields)
    if (const json* v = Find(j, f.path, f.absent)) f.read(*v, s);
}

// Values: numbers, booleans and strings as themselves, an unset optional as null; integers
// read back through Whole (a float or an out-of-range value refused).
template <class T>
json Put(const T& v) {
  return json(v);
}
template <class T>
json Put(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}
void Get(const json& j, double& v) { v = j.get<double>(); }
void Get(const json& j, bool& v) { v = j.get<bool>(); }
void Get(const json& j, std::string& v) { v = j.get<std::string>(); }
template <class T>
requires(std::is_integral_v<T> && !std::is_same_v<T, bool>)
void Get(const json& j, T& v) {
  v = Whole{j};
}
template <class T>
void Get(const json& j, std::optional<T>& v) {
  if (j.is_null()) {
    v.reset();
  } else {
    T x{};
    Get(j, x);
    v = x;
  }
}

template <class M>
struct MemberOf;
template <class S, class T>
struct MemberOf<T S::*> {
  using Struct = S;
};
template <auto M>
using StructOf = typename MemberOf<decltype(M)>::Struct;

// A member written as its value.
template <auto M>
constexpr Field<StructOf<M>> Plain(std::string_view path, Absent absent = Absent::kRefused) {
  using S = StructOf<M>;
  return {path, [](const S& s) { return Put(s.*M); }, [](const json& j, S& s) { Get(j, s.*M); },
          absent};
}
// A member of a member (the books' counts, under "accounting").
template <auto Outer, auto Inner>
constexpr Field<StructOf<Outer>> Plain(std::string_view path, Absent absent = Absent::kRefused) {
  using S = StructOf<Outer>;
  return {path, [](const S& s) { return Put(s.*Outer.*Inner); },
          [](const json& j, S& s) { Get(j, s.*Outer.*Inner); }, absent};
}

// A text written as null where it is empty (and read so).
template <auto M>
constexpr Field<StructOf<M>> TextOrNull(std::string_view path) {
  using S = StructOf<M>;
  return {path,
          [](const S& s) { return (s.*M).empty() ? json(nullptr) : json(s.*M); },
          [](const json& j, S& s) {
            if (j.is_null())
              (s.*M).clear();
            else
              Get(j, s.*M);
          },
          Absent::kDefault};
}

// An optional struct (M: std::optional<Sub> S::*) as an object of its own fields (kFields), or
// null where it is unset; Check (if given) refuses values no run writes.
template <auto M, const auto& kFields, auto Check = nullptr>
constexpr Field<StructOf<M>> Group(std::string_view path, Absent absent = Absent::kRefused) {
  using S = StructOf<M>;
  return {path,
          [](const S& s) {
            const auto& o = s.*M;
            return o ? WriteFields(*o, kFields) : json(nullptr);
          },
          [](const json& j, S& s) {
            auto& o = s.*M;
            if (j.is_null()) {
              o.reset();
              return;
            }
            // Assigned, not emplaced: clang finds a nested struct with member initialisers
            // (CellResult::Flow) not default-constructible for optional::emplace's constraint.
            o = typename std::remove_reference_t<decltype(o)>::value_type{};
            ReadFields(j, *o, kFields);
            if constexpr (!std::is_null_pointer_v<decltype(Check)>) Check(j, *o);
          },
          absent};
}

// A vector of structs (M: std::vector<E> S::*) at kPath as an array of objects of kFields (each
// one of kItems), or null where it is empty.
template <auto M, const auto& kFields, const char* kPath, const char* kItems>
constexpr Field<StructOf<M>> List() {
  using S = StructOf<M>;
  return {kPath,
          [](const S& s) {
            if ((s.*M).empty()) return json(nullptr);
            json out = json::array();
            for (const auto& e : s.*M) out.push_back(WriteFields(e, kFields));
            return out;
          },
          [](const json& j, S& s) {
            if (j.is_null()) return;
            if (!j.is_array())
              throw json::type_error::create(
                  302, fmt::format("{}: an array of {} was expected", kPath + 1, kItems), &j);
            for (const json& e : j) ReadFields(e, (s.*M).emplace_back(), kFields);
          },
          Absent::kDefault};
}

// A map of counters (drops, driver_counters): every value an integer.
template <auto M>
constexpr Field<StructOf<M>> Counts(std::string_view path, Absent absent = Absent::kRefused) {
  using S = StructOf<M>;
  return {path, [](const S& s) { return json(s.*M); },
          [](const json& j, S& s) {
            for (const auto& [k, v] : j.items()) (s.*M)[k] = Whole{v};
          },
          absent};
}

// A batch_hist (or dequeue_sizes) key: a batch size 1..kMaxBatch written in decimal (a
// type_error otherwise, as Whole's).
unsigned BatchSize(const std::string& key, const json& hist, std::string_view field) {
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

// A histogram by batch size (M: std::map<unsigned, uint64_t> S::*) keyed by the size in decimal.
template <auto M, const char* kName>
constexpr Field<StructOf<M>> SizeHist(Absent absent) {
  using S = StructOf<M>;
  return {kName,
          [](const S& s) {
            json out = json::object();
            for (const auto& [size, n] : s.*M) out[std::to_string(size)] = n;
            return out;
          },
          [](const json& j, S& s) {
            for (const auto& [k, v] : j.items()) (s.*M)[BatchSize(k, j, kName + 1)] = Whole{v};
          },
          absent};
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

// results.fairness: the load's flows (2 or more: none with one), Jain's index over them
// (1/flows..1, give or take kJainSlack of rounding) and the least and most a flow received.
constexpr double kJainSlack = 1e-9;
void CheckFairness(const json& f, const CellResult::Fairness& x) {
  if (x.flows < 2)
    throw json::type_error::create(
        302, fmt::format("fairness over 2 or more flows was expected, not {}", x.flows), &f);
  if (!(x.jain >= 1.0 / x.flows - kJainSlack && x.jain <= 1 + kJainSlack))
    throw json::type_error::create(
        302,
        fmt::format("Jain's index over {} flows in 1/{}..1 was expected, not {}", x.flows, x.flows,
                    f.at("jain").dump()),
        &f);
  if (x.min_received > x.max_received)
    throw json::type_error::create(
        302,
        fmt::format("fairness' min_received at most its max_received was expected, not {} > {}",
                    x.min_received, x.max_received),
        &f);
}

// Receive-side counts are null where nothing receives (net_null, a TX-only pcap): never 0. The
// first of them (`received`, read before the others) says which (Books::rx_side); the others are
// then integers, or ignored.
template <auto M, bool kSaysRxSide = false>
constexpr Field<CellResult> RxCount(std::string_view path) {
  return {path,
          [](const CellResult& r) { return r.books.rx_side ? json(r.books.*M) : json(nullptr); },
          [](const json& j, CellResult& r) {
            if constexpr (kSaysRxSide) r.books.rx_side = !j.is_null();
            if (r.books.rx_side) r.books.*M = Whole{j};
          }};
}

// The lists: each struct's fields, in its documentation's order.

constexpr Field<LatencySummary> kLatency[] = {
    Plain<&LatencySummary::min>("/min"), Plain<&LatencySummary::avg>("/avg"),
    Plain<&LatencySummary::p50>("/p50"), Plain<&LatencySummary::p90>("/p90"),
    Plain<&LatencySummary::p99>("/p99"), Plain<&LatencySummary::p999>("/p999"),
    Plain<&LatencySummary::max>("/max"), Plain<&LatencySummary::count>("/count")};

json LatencyJson(const std::optional<LatencySummary>& l) {
  return l ? WriteFields(*l, kLatency) : json(nullptr);
}
std::optional<LatencySummary> LatencyFrom(const json& j) {
  if (j.is_null()) return std::nullopt;
  LatencySummary l;
  ReadFields(j, l, kLatency);
  return l;
}

using Flow = CellResult::Flow;
constexpr Field<Flow> kFlow[] = {
    Plain<&Flow::id>("/flow"),
    // before 2026-12-06: not written (0)
    Plain<&Flow::generated>("/generated", Absent::kDefault),
    Plain<&Flow::counts, &FlowCounts::received>("/received"),
    Plain<&Flow::counts, &FlowCounts::lost>("/lost"),
    Plain<&Flow::counts, &FlowCounts::duplicated>("/duplicated"),
    Plain<&Flow::counts, &FlowCounts::reordered>("/reordered"),
    Group<&Flow::latency, kLatency>("/latency_ns")};

constexpr Field<ReceiverResult> kReceiver[] = {
    Plain<&ReceiverResult::cycles_per_pkt>("/cycles_per_pkt"),
    Plain<&ReceiverResult::cpu_ns_per_pkt>("/cpu_ns_per_pkt")};

constexpr Field<TsqSummary> kTsq[] = {
    Plain<&TsqSummary::samples>("/samples"), Plain<&TsqSummary::below_p50>("/below_p50"),
    Plain<&TsqSummary::below_p90>("/below_p90"), Plain<&TsqSummary::limit>("/limit"),
    Plain<&TsqSummary::pacing_rate>("/pacing_rate")};

using Fairness = CellResult::Fairness;
constexpr Field<Fairness> kFairness[] = {
    Plain<&Fairness::flows>("/flows"), Plain<&Fairness::jain>("/jain"),
    Plain<&Fairness::min_received>("/min_received"),
    Plain<&Fairness::max_received>("/max_received")};

using Machine = CellResult::Machine;
constexpr Field<Machine> kMachine[] = {Plain<&Machine::steal_share>("/steal_share"),
                                       Plain<&Machine::others_share>("/others_share"),
                                       Plain<&Machine::cpus>("/cpus")};

constexpr Field<LinkResult> kLink[] = {
    Plain<&LinkResult::offered>("/offered"),
    Plain<&LinkResult::lost>("/lost"),
    Plain<&LinkResult::dropped_limit>("/dropped_limit"),
    Plain<&LinkResult::duplicated>("/duplicated"),
    Plain<&LinkResult::corrupted>("/corrupted"),
    Plain<&LinkResult::reordered>("/reordered"),
    Plain<&LinkResult::dup_failed>("/dup_failed"),
    Plain<&LinkResult::frames_lost>("/frames_lost"),
    Plain<&LinkResult::sink_reordered>("/receiver_reordered"),
    Plain<&LinkResult::sink_corrupt>("/receiver_corrupt")};

constexpr Field<BqlResult> kBql[] = {Plain<&BqlResult::limit>("/limit"),
                                     Plain<&BqlResult::limit_max>("/limit_max"),
                                     Plain<&BqlResult::stops>("/stops")};

// fq_codel's xstats, as `tc -s qdisc show` names them.
using FqCodel = QdiscCountersOf<uint64_t>;
constexpr Field<FqCodel> kFqCodel[] = {
    Plain<&FqCodel::dropped_codel>("/dropped_codel"),
    Plain<&FqCodel::drop_overlimit>("/drop_overlimit"),
    Plain<&FqCodel::drop_overmemory>("/drop_overmemory"),
    Plain<&FqCodel::ecn_mark>("/ecn_mark"),
    Plain<&FqCodel::new_flow_count>("/new_flow_count"),
    Plain<&FqCodel::maxpacket>("/maxpacket")};

// An mq root's children, queue by queue.
constexpr Field<QdiscChildResult> kChild[] = {
    Plain<&QdiscChildResult::queue>("/queue"),
    Plain<&QdiscChildResult::sent>("/sent"),
    Plain<&QdiscChildResult::dropped>("/dropped"),
    Plain<&QdiscChildResult::requeues>("/requeues"),
    Plain<&QdiscChildResult::backlog>("/backlog"),
    Plain<&QdiscChildResult::queue_stops>("/queue_stops"),
    Plain<&QdiscChildResult::queue_wakes>("/queue_wakes"),
    Group<&QdiscChildResult::fq_codel, kFqCodel>("/fq_codel")};

constexpr char kBatchHist[] = "/batch_hist";
constexpr char kPerFlow[] = "/per_flow";
constexpr char kFlows[] = "flows";
constexpr char kMq[] = "/mq";
constexpr char kChildQdiscs[] = "child qdiscs";
constexpr char kDequeueSizes[] = "/dequeue_sizes";

constexpr std::pair<FlushTrigger, std::string_view> kTriggers[] = {
    {FlushTrigger::kFull, "full"},
    {FlushTrigger::kTimer, "timer"},
    {FlushTrigger::kWriteDone, "write_done"},
    {FlushTrigger::kEnd, "end"}};

// The results object. A field a record may lack says since when it is written.
constexpr Field<CellResult> kResult[] = {
    Plain<&CellResult::packets>("/packets"),
    Plain<&CellResult::window_s>("/window_s"),
    Plain<&CellResult::mb_per_s>("/mb_per_s"),
    Plain<&CellResult::mpps>("/mpps"),
    Plain<&CellResult::wire_gbps>("/wire_gbps"),
    Plain<&CellResult::counted_at>("/counted_at"),
    TextOrNull<&CellResult::link_layer>("/link_layer"),
    Plain<&CellResult::avg_batch>("/avg_batch"),
    SizeHist<&CellResult::batch_hist, kBatchHist>(Absent::kRefused),
    SizeHist<&CellResult::dequeue_sizes, kDequeueSizes>(Absent::kDefault),  // since 2026-12-06
    Plain<&CellResult::xmit_calls_per_pkt>("/xmit_calls_per_pkt"),
    Plain<&CellResult::doorbells_per_pkt>("/doorbells_per_pkt", Absent::kDefault),
    Plain<&CellResult::cycles_per_pkt>("/cycles_per_pkt"),
    Plain<&CellResult::cpu_ns_per_pkt>("/cpu_ns_per_pkt"),
    Group<&CellResult::receiver, kReceiver>("/receiver", Absent::kDefault),
    {"/completions",
     [](const CellResult& r) {
       if (!r.completion_frames_per_call) return json(nullptr);
       return json{{"frames_per_call", *r.completion_frames_per_call},
                   {"cycles_per_call", r.completion_cycles_per_call.value_or(0)}};
     },
     [](const json& j, CellResult& r) {
       if (j.is_null()) return;
       r.completion_frames_per_call = j.at("frames_per_call").get<double>();
       r.completion_cycles_per_call = j.at("cycles_per_call").get<double>();
     },
     Absent::kDefault},
    Plain<&CellResult::requeues>("/requeues"),
    Plain<&CellResult::requeued_frames>("/requeued_frames"),
    Plain<&CellResult::qdisc_missed>("/qdisc_missed", Absent::kDefault),
    Plain<&CellResult::bypassed>("/bypassed", Absent::kDefault),
    Plain<&CellResult::queue_stops>("/queue_stops"),
    Plain<&CellResult::queue_wakes>("/queue_wakes", Absent::kDefault),  // since 2026-12-06
    Plain<&CellResult::producer_waits>("/producer_waits"),
    Plain<&CellResult::tsq_waits>("/tsq_waits", Absent::kDefault),
    Group<&CellResult::tsq, kTsq>("/tsq", Absent::kDefault),
    Plain<&CellResult::reschedules>("/reschedules"),
    Counts<&CellResult::drops>("/drops"),
    Plain<&CellResult::drops_total>("/drops_total"),
    {"/flush_triggers",
     [](const CellResult& r) {
       json out = json::object();
       for (const auto& [t, name] : kTriggers)
         out[std::string(name)] = r.flush_triggers[static_cast<size_t>(t)];
       return out;
     },
     [](const json& j, CellResult& r) {
       if (j.is_null()) return;
       for (const auto& [t, name] : kTriggers)
         r.flush_triggers[static_cast<size_t>(t)] = Whole{j.at(std::string(name))};
     },
     Absent::kDefault},
    Group<&CellResult::latency, kLatency>("/latency_ns"),
    // The bins that hold samples, each [lo_ns, hi_ns, count], and the exact extremes (the
    // latency's own, not read back from here); null where latency is.
    {"/latency_hist_ns",
     [](const CellResult& r) {
       if (!r.latency || r.latency_hist.empty()) return json(nullptr);
       json bins = json::array();
       for (const HistBin& b : r.latency_hist)
         bins.push_back(json::array({b.lo_ns, b.hi_ns, b.count}));
       return json{{"min", r.latency->min},
                   {"max", r.latency->max},
                   {"count", r.latency->count},
                   {"bins", std::move(bins)}};
     },
     [](const json& j, CellResult& r) {
       if (j.is_object()) r.latency_hist = HistBins(j.at("bins"));
     },
     Absent::kDefault},
    List<&CellResult::flows, kFlow, kPerFlow, kFlows>(),
    Group<&CellResult::probe, kFlow>("/probe", Absent::kDefault),
    Group<&CellResult::fairness, kFairness, CheckFairness>("/fairness", Absent::kDefault),
    Group<&CellResult::link, kLink>("/link", Absent::kDefault),
    Group<&CellResult::bql, kBql>("/bql", Absent::kDefault),
    Group<&CellResult::fq_codel, kFqCodel>("/fq_codel", Absent::kDefault),
    List<&CellResult::mq, kChild, kMq, kChildQdiscs>(),
    Counts<&CellResult::driver_counters>("/driver_counters", Absent::kDefault),
    // Before the driver the qdisc's wait, or under --qdisc none the producer's batch fill (the
    // other null); null where no frame carries stage timestamps.
    {"/latency_stages_ns",
     [](const CellResult& r) {
       if (!r.lat_before_driver) return json(nullptr);
       const bool fill = r.before_driver_is_batch_fill;
       return json{{"qdisc", fill ? json(nullptr) : LatencyJson(r.lat_before_driver)},
                   {"batch_fill", fill ? LatencyJson(r.lat_before_driver) : json(nullptr)},
                   {"driver_ring", LatencyJson(r.lat_driver_ring)},
                   {"wire", LatencyJson(r.lat_wire)}};
     },
     [](const json& j, CellResult& r) {
       if (j.is_null()) return;
       r.before_driver_is_batch_fill = !j.at("batch_fill").is_null();
       const bool fill = r.before_driver_is_batch_fill;
       r.lat_before_driver = LatencyFrom(j.at(fill ? "batch_fill" : "qdisc"));
       r.lat_driver_ring = LatencyFrom(j.at("driver_ring"));
       r.lat_wire = LatencyFrom(j.at("wire"));
     },
     Absent::kDefault},
    {"/latency_by_position_ns",
     [](const CellResult& r) {
       json out = json::array();
       for (const auto& [positions, s] : r.lat_by_position) {
         json e = LatencyJson(s);
         e["positions"] = positions;
         out.push_back(std::move(e));
       }
       return out;
     },
     [](const json& j, CellResult& r) {
       for (const json& p : j) {
         std::string positions = p.at("positions").get<std::string>();
         const std::optional<LatencySummary> l = LatencyFrom(p);  // p is an object: never none
         r.lat_by_position.emplace_back(std::move(positions), *l);
       }
     },
     Absent::kDefault},
    Plain<&CellResult::books, &Books::generated>("/accounting/generated"),
    Plain<&CellResult::books, &Books::sent>("/accounting/sent"),
    Plain<&CellResult::books, &Books::dropped>("/accounting/dropped"),
    // before fq_codel: not written (0)
    Plain<&CellResult::books, &Books::dropped_queued>("/accounting/dropped_queued",
                                                      Absent::kDefault),
    Plain<&CellResult::books, &Books::queued>("/accounting/queued"),
    RxCount<&Books::received, true>("/accounting/received"),
    RxCount<&Books::lost>("/accounting/lost"),
    RxCount<&Books::duplicated>("/accounting/duplicated"),
    RxCount<&Books::in_flight>("/accounting/in_flight"),
    Plain<&CellResult::books, &Books::link_lost>("/accounting/link_lost", Absent::kDefault),
    Plain<&CellResult::books, &Books::balanced>("/accounting/balanced"),
    Plain<&CellResult::books, &Books::mbufs_in_use>("/mbufs_in_use_at_exit"),
    {"/link_ceiling",
     [](const CellResult& r) {
       if (!r.ceiling_mpps) return json(nullptr);
       return json{{"mpps", *r.ceiling_mpps}, {"mb_per_s", *r.ceiling_mb_per_s}};
     },
     [](const json& j, CellResult& r) {
       if (j.is_null()) return;
       r.ceiling_mpps = j.at("mpps").get<double>();
       r.ceiling_mb_per_s = j.at("mb_per_s").get<double>();
     }},
    Plain<&CellResult::link_bound>("/link_bound"),
    Plain<&CellResult::link_utilisation>("/link_utilisation", Absent::kDefault),
    // since 2026-12-07: the emulator's self-check (engine/emulator_check.h)
    Plain<&CellResult::emulator_bound>("/emulator_bound", Absent::kDefault),
    TextOrNull<&CellResult::emulator_bound_why>("/emulator_bound_why"),
    Plain<&CellResult::producer_rate_share>("/model_checks/producer_rate_share", Absent::kDefault),
    Plain<&CellResult::last_departure_s>("/model_checks/last_departure_s"),
    Plain<&CellResult::stopped_at_s>("/model_checks/stopped_at_s"),
    Plain<&CellResult::drained_at_s>("/model_checks/drained_at_s"),
    Plain<&CellResult::arrival_before_tx>("/model_checks/arrival_before_tx"),
    Plain<&CellResult::wire_max_idle_us>("/model_checks/wire_max_idle_us"),
    // since 2026-12-05
    Plain<&CellResult::wire_stalled_us>("/model_checks/wire_stalled_us", Absent::kDefault),
    Plain<&CellResult::irq_max_late_us>("/model_checks/irq_max_late_us"),
    // since 2026-12-08: what the machine did to the window beside the run
    Group<&CellResult::machine, kMachine>("/machine", Absent::kDefault),
    Plain<&CellResult::foreign>("/foreign_frames"),
    Plain<&CellResult::alloc_failures>("/alloc_failures"),
    // since 2026-12-03
    Plain<&CellResult::voluntary_ctxsw>("/voluntary_ctxsw", Absent::kDefault),
    Plain<&CellResult::involuntary_ctxsw>("/involuntary_ctxsw"),
    Plain<&CellResult::txirq_realtime>("/txirq_realtime"),
    Plain<&CellResult::unregistered_threads>("/unregistered_threads"),
    Plain<&CellResult::interrupted>("/interrupted")};

}  // namespace

json ResultJson(const CellResult& r) { return WriteFields(r, kResult); }

CellResult ResultFrom(const json& results) {
  CellResult r;
  ReadFields(results, r, kResult);
  return r;
}

}  // namespace txbatch
