// The results object's one table (results/result_fields.cc): what it writes, it reads back.
#include "results/result_fields.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "results/metrics.h"
#include "results/sweep.h"

namespace txbatch {
namespace {

using nlohmann::json;

LatencySummary Latency(double base) {
  return {base, base + 1, base + 2, base + 3, base + 4, base + 5, base + 6,
          static_cast<uint64_t>(base) + 7};
}

// A result with every field set to a value of its own, none zero, false, empty or unset: the
// field written as null (a stage of two that only one holds) is the one exception.
CellResult EveryFieldSet() {
  CellResult r;
  uint64_t n = 1;
  const auto next = [&n] { return n++; };
  r.window_s = 0.5;
  r.packets = next();
  r.mpps = 1.25;
  r.mb_per_s = 2.5;
  r.wire_gbps = 3.75;
  r.counted_at = "sink";
  r.link_layer = "roce_v2";
  r.avg_batch = 4.5;
  r.batch_hist = {{1, next()}, {32, next()}};
  r.dequeue_sizes = {{3, next()}};
  r.xmit_calls_per_pkt = 0.25;
  r.doorbells_per_pkt = 0.125;
  r.cycles_per_pkt = 300;
  r.cpu_ns_per_pkt = 120;
  r.receiver = ReceiverResult{40, 16};
  r.completion_frames_per_call = 12;
  r.completion_cycles_per_call = 80;
  for (uint64_t CellResult::*count :
       {&CellResult::requeues, &CellResult::reschedules, &CellResult::requeued_frames,
        &CellResult::qdisc_missed, &CellResult::bypassed, &CellResult::queue_stops,
        &CellResult::queue_wakes, &CellResult::producer_waits, &CellResult::tsq_waits})
    r.*count = next();
  r.tsq = TsqSummary{next(), 1000, 2000, 3000, 4000};
  r.drops = {{"qdisc_full", next()}};
  r.drops_total = next();
  r.latency = Latency(100);
  r.latency_hist = {{100, 101, next()}, {105, 106, next()}};
  r.link =
      LinkResult{next(), next(), next(), next(), next(), next(), next(), next(), next(), next()};
  r.bql = BqlResult{next(), next(), next()};
  QdiscCountersOf<uint64_t> f{next(), next(), next(), next(), next(), next()};
  r.fq_codel = f;
  r.mq = {QdiscChildResult{1, next(), next(), next(), next(), next(), next(), f}};
  r.driver_counters = {{"cqe_errors", next()}};
  for (uint64_t& t : r.flush_triggers) t = next();
  r.lat_before_driver = Latency(200);
  r.lat_driver_ring = Latency(300);
  r.lat_wire = Latency(400);
  r.before_driver_is_batch_fill = true;
  r.lat_by_position = {{"0", Latency(500)}, {"2-3", Latency(600)}};
  r.flows = {{1, FlowCounts{next(), next(), next(), next()}, Latency(700), next()}};
  r.probe = CellResult::Flow{2, FlowCounts{next(), next(), next(), next()}, Latency(800), next()};
  r.fairness = CellResult::Fairness{2, 0.75, next(), 1000};
  r.machine = CellResult::Machine{0.125, 0.25, 2};
  r.books = Books{next(), next(), next(), next(), next(), next(), next(), next(), next(),
                  next(), next(), true, true};
  r.ceiling_mpps = 5;
  r.ceiling_mb_per_s = 6;
  r.link_bound = true;
  r.link_utilisation = 0.875;
  r.emulator_bound = true;
  r.emulator_bound_why = "producer 0 made 1 of the 2 Mpps it was offered";
  r.producer_rate_share = 0.5;
  r.last_departure_s = 0.75;
  r.drained_at_s = 0.8;
  r.stopped_at_s = 0.7;
  r.arrival_before_tx = next();
  r.wire_max_idle_us = 7;
  r.wire_stalled_us = 8;
  r.irq_max_late_us = 9;
  r.foreign = next();
  r.alloc_failures = next();
  r.voluntary_ctxsw = next();
  r.involuntary_ctxsw = next();
  r.interrupted = true;
  r.txirq_realtime = true;
  r.unregistered_threads = 3;
  return r;
}

// Every scalar and empty object or array in `j` with its path, e.g. "/accounting/sent".
void Leaves(const json& j, const std::string& at, std::vector<std::pair<std::string, json>>* out) {
  if (j.is_structured() && !j.empty()) {
    for (const auto& [k, v] : j.items()) Leaves(v, at + "/" + k, out);
  } else {
    out->emplace_back(at, j);
  }
}

// A field added to CellResult and the table but not to this test's result is written as 0,
// false, "", null, {} or [], and fails the first check; one the reader leaves out, the second.
TEST(ResultFields, EveryFieldWrittenReadsBackAsWritten) {
  const json written = ResultJson(EveryFieldSet());
  std::vector<std::pair<std::string, json>> leaves;
  Leaves(written, "", &leaves);
  for (const auto& [path, v] : leaves) {
    if (path == "/latency_stages_ns/qdisc") continue;  // batch_fill holds the stage
    EXPECT_FALSE(v.is_null() || v == 0 || v == false || v == "" || v.empty())
        << path << " is " << v.dump();
  }
  EXPECT_EQ(ResultJson(ResultFrom(written)), written);
}

// The other sides of the fields written as one thing or another: no receive side (its four
// counts null), the qdisc's wait as the first stage, and every optional unset (null).
TEST(ResultFields, TheFieldsWrittenAsNullOrTheOtherStageReadBackAsWritten) {
  CellResult r = EveryFieldSet();
  r.books.rx_side = false;
  r.before_driver_is_batch_fill = false;
  const json one = ResultJson(r);
  EXPECT_TRUE(one["accounting"]["lost"].is_null());
  EXPECT_TRUE(one["latency_stages_ns"]["batch_fill"].is_null());
  EXPECT_EQ(ResultJson(ResultFrom(one)), one);
  const CellResult none;
  const json empty = ResultJson(none);
  EXPECT_TRUE(empty["receiver"].is_null() && empty["per_flow"].is_null() &&
              empty["link_layer"].is_null() && empty["latency_ns"].is_null());
  EXPECT_EQ(ResultJson(ResultFrom(empty)), empty);
}

// The receive side's counts are all four integers or all four null: a null among integers is
// refused, as is an entry of latency_by_position_ns that is no summary.
TEST(ResultFields, AReceiveSideCountOfNullBesideIntegersIsRefused) {
  json j = ResultJson(EveryFieldSet());
  j["accounting"]["lost"] = nullptr;
  EXPECT_THROW(ResultFrom(j), json::type_error);
  j = ResultJson(EveryFieldSet());
  j["latency_by_position_ns"][0] = nullptr;
  EXPECT_THROW(ResultFrom(j), json::type_error);
}

// A record written before a field existed reads it as zero, none or empty; one that lacks a
// field every record has is refused with the key's name.
TEST(ResultFields, OlderRecordsReadTheirLaterFieldsAsDefaultsAndMissingOnesAreRefused) {
  json old = ResultJson(EveryFieldSet());
  for (const char* later : {"dequeue_sizes", "queue_wakes", "qdisc_missed", "bypassed",
                            "tsq_waits", "voluntary_ctxsw", "driver_counters", "flush_triggers",
                            "emulator_bound", "emulator_bound_why"})
    old.erase(later);
  old["model_checks"].erase("wire_stalled_us");
  old["model_checks"].erase("producer_rate_share");
  old["accounting"].erase("dropped_queued");
  old["probe"].erase("generated");
  const CellResult r = ResultFrom(old);
  EXPECT_TRUE(r.dequeue_sizes.empty());
  EXPECT_EQ(r.queue_wakes, 0u);
  EXPECT_EQ(r.voluntary_ctxsw, 0u);
  EXPECT_EQ(r.wire_stalled_us, 0);
  EXPECT_EQ(r.books.dropped_queued, 0u);
  EXPECT_EQ(r.probe->generated, 0u);
  EXPECT_EQ(r.flush_triggers[1], 0u);
  EXPECT_EQ(r.qdisc_missed + r.bypassed + r.tsq_waits, 0u);
  EXPECT_TRUE(r.driver_counters.empty());
  EXPECT_FALSE(r.emulator_bound);  // not checked then: null, not false
  EXPECT_TRUE(r.emulator_bound_why.empty());
  EXPECT_FALSE(r.producer_rate_share);
  EXPECT_EQ(r.packets, EveryFieldSet().packets);  // the rest as written

  for (const std::string& path : {"/packets", "/model_checks/stopped_at_s", "/accounting/sent",
                                  "/latency_ns", "/probe/lost"}) {
    json j = ResultJson(EveryFieldSet());
    const json::json_pointer p(path);
    j[p.parent_pointer()].erase(p.back());
    try {
      ResultFrom(j);
      ADD_FAILURE() << path << " missing was read";
    } catch (const json::out_of_range& e) {
      EXPECT_NE(std::string(e.what()).find("key '" + p.back() + "' not found"), std::string::npos)
          << e.what();
    }
  }
}

// Each summary metric reads the value of a round's results that its key names: the record's
// field of the same name, or (for the ones the record nests) the one named here. A metric
// wired to another field reads another of EveryFieldSet's distinct values and fails.
TEST(Metrics, EachMetricReadsTheResultsFieldItNames) {
  const CellResult r = EveryFieldSet();
  const json j = ResultJson(r);
  const std::map<std::string_view, std::string> nested = {
      {"ceiling_mb_per_s", "/link_ceiling/mb_per_s"},
      {"lat_avg_ns", "/latency_ns/avg"},
      {"lat_p50_ns", "/latency_ns/p50"},
      {"lat_p99_ns", "/latency_ns/p99"},
      {"before_driver_p50_ns", "/latency_stages_ns/batch_fill/p50"},  // a batch fill here
      {"driver_ring_p50_ns", "/latency_stages_ns/driver_ring/p50"},
      {"wire_p50_ns", "/latency_stages_ns/wire/p50"}};
  for (const MetricRow& m : kMetrics) {
    const auto it = nested.find(m.key);
    const json& v = j.at(json::json_pointer(it == nested.end() ? "/" + std::string(m.key)
                                                               : it->second));
    ASSERT_TRUE(m.of(r).has_value()) << m.key;
    EXPECT_EQ(*m.of(r), v.is_boolean() ? static_cast<double>(v.get<bool>()) : v.get<double>())
        << m.key;
  }
  // And none where the round has none.
  const CellResult bare;
  for (Metric m : {Metric::kCeilingMbPerS, Metric::kDoorbellsPerPkt, Metric::kLatP99Ns,
                   Metric::kWireP50Ns})
    EXPECT_FALSE(RowOf(m).of(bare).has_value()) << RowOf(m).key;
}

// doc/output.md's table of results.csv names the columns SweepCsv writes, in its order: the
// metric table (results/metrics.h) and the reference do not drift apart.
TEST(Metrics, DocumentedColumnsAreTheTables) {
  std::ifstream in(std::string(TXBATCH_SOURCE_DIR) + "/doc/output.md");
  ASSERT_TRUE(in) << "doc/output.md";
  std::string documented;
  bool inside = false;
  const std::regex name("`([a-z0-9_]+)`");
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("## ")) inside = line == "## `DIR/results.csv`";
    if (!inside || !line.starts_with("| `")) continue;
    const std::string first = line.substr(0, line.find('|', 1));
    for (std::sregex_iterator m(first.begin(), first.end(), name), end; m != end; ++m)
      documented += (documented.empty() ? "" : ",") + (*m)[1].str();
  }
  const std::string csv = SweepCsv({});
  EXPECT_EQ(documented, csv.substr(0, csv.find('\n')));
}

}  // namespace
}  // namespace txbatch
