#pragma once
// The summary's metrics (doc/output.md, "results.csv"): the values of a round's results that a
// grid summarises per cell over its rounds. One row each, in results.csv's column order: its
// key (the CSV column and the summary JSON's), how it is written, how rounds make one value,
// compare's name for it where compare shows it and which way is better, and how it is read
// from a round's results. Summarise (summary.cc), results.csv and the summary JSON (sweep.cc)
// and compare read this table; a new metric is a row here and its line in doc/output.md
// (MetricsTest.DocumentedColumnsAreTheTables holds the two together).

#include <array>
#include <optional>
#include <string_view>

#include "engine/record.h"

namespace txbatch {

enum class Metric {
  kMbPerS,
  kMpps,
  kCeilingMbPerS,
  kLinkBound,
  kAvgBatch,
  kDoorbellsPerPkt,
  kXmitCallsPerPkt,
  kCyclesPerPkt,
  kCpuNsPerPkt,
  kLatAvgNs,
  kLatP50Ns,
  kLatP99Ns,
  kLinkUtilisation,
  kRequeues,
  kBeforeDriverP50Ns,
  kDriverRingP50Ns,
  kWireP50Ns,
};

// How a metric stands in results.csv and the summary JSON.
enum class Column {
  kNumber,  // every round has it
  kMaybe,   // empty in the CSV, null in the JSON, where no round has it
  kFlag,    // true only where it holds in every round
  kNone,    // only the human tables show it
};

struct MetricRow {
  Metric metric;
  std::string_view key;
  Column column;
  std::string_view compared;  // compare's name; empty where compare does not show it
  bool higher_is_better;
  // The round's value; none where the round did not measure it. A flag is 1 or 0.
  std::optional<double> (*of)(const CellResult&);
};

namespace metric_detail {
template <auto F>
constexpr std::optional<double> Plain(const CellResult& r) {
  return static_cast<double>(r.*F);
}
template <auto F>
constexpr std::optional<double> Maybe(const CellResult& r) {
  return r.*F;
}
template <double LatencySummary::*F>
constexpr std::optional<double> Latency(const CellResult& r) {
  return r.latency ? std::optional<double>((*r.latency).*F) : std::nullopt;
}
template <auto Stage>
constexpr std::optional<double> StageP50(const CellResult& r) {
  return r.*Stage ? std::optional<double>((r.*Stage)->p50) : std::nullopt;
}
}  // namespace metric_detail

inline constexpr MetricRow kMetrics[] = {
    {Metric::kMbPerS, "mb_per_s", Column::kNumber, "MB/s", true,
     metric_detail::Plain<&CellResult::mb_per_s>},
    {Metric::kMpps, "mpps", Column::kNumber, "Mpps", true, metric_detail::Plain<&CellResult::mpps>},
    {Metric::kCeilingMbPerS, "ceiling_mb_per_s", Column::kMaybe, "", true,
     metric_detail::Maybe<&CellResult::ceiling_mb_per_s>},
    {Metric::kLinkBound, "link_bound", Column::kFlag, "", true,
     [](const CellResult& r) { return std::optional<double>(r.link_bound.value_or(false)); }},
    {Metric::kAvgBatch, "avg_batch", Column::kNumber, "", true,
     metric_detail::Plain<&CellResult::avg_batch>},
    {Metric::kDoorbellsPerPkt, "doorbells_per_pkt", Column::kMaybe, "doorbells/pkt", false,
     metric_detail::Maybe<&CellResult::doorbells_per_pkt>},
    {Metric::kXmitCallsPerPkt, "xmit_calls_per_pkt", Column::kNumber, "xmit calls/pkt", false,
     metric_detail::Plain<&CellResult::xmit_calls_per_pkt>},
    {Metric::kCyclesPerPkt, "cycles_per_pkt", Column::kNumber, "cycles/pkt", false,
     metric_detail::Plain<&CellResult::cycles_per_pkt>},
    {Metric::kCpuNsPerPkt, "cpu_ns_per_pkt", Column::kNumber, "CPU ns/pkt", false,
     metric_detail::Plain<&CellResult::cpu_ns_per_pkt>},
    {Metric::kLatAvgNs, "lat_avg_ns", Column::kMaybe, "", false,
     metric_detail::Latency<&LatencySummary::avg>},
    {Metric::kLatP50Ns, "lat_p50_ns", Column::kMaybe, "latency p50", false,
     metric_detail::Latency<&LatencySummary::p50>},
    {Metric::kLatP99Ns, "lat_p99_ns", Column::kMaybe, "latency p99", false,
     metric_detail::Latency<&LatencySummary::p99>},
    {Metric::kLinkUtilisation, "link_utilisation", Column::kMaybe, "", true,
     metric_detail::Maybe<&CellResult::link_utilisation>},
    {Metric::kRequeues, "requeues", Column::kNone, "", false,
     metric_detail::Plain<&CellResult::requeues>},
    {Metric::kBeforeDriverP50Ns, "before_driver_p50_ns", Column::kNone, "", false,
     metric_detail::StageP50<&CellResult::lat_before_driver>},
    {Metric::kDriverRingP50Ns, "driver_ring_p50_ns", Column::kNone, "", false,
     metric_detail::StageP50<&CellResult::lat_driver_ring>},
    {Metric::kWireP50Ns, "wire_p50_ns", Column::kNone, "", false,
     metric_detail::StageP50<&CellResult::lat_wire>},
};

inline constexpr size_t kMetricCount = std::size(kMetrics);

constexpr const MetricRow& RowOf(Metric m) { return kMetrics[static_cast<size_t>(m)]; }

// The table is indexed by Metric: each row where its enumerator says.
static_assert([] {
  for (size_t i = 0; i < kMetricCount; ++i)
    if (static_cast<size_t>(kMetrics[i].metric) != i) return false;
  return true;
}());

}  // namespace txbatch
