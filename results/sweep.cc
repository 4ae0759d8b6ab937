#include "results/sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string_view>

#include "base/json_text.h"
#include "results/tables.h"

namespace txbatch {
namespace {

using nlohmann::json;

std::string Opt(const std::optional<double>& v) { return v ? fmt::format("{:.6g}", *v) : ""; }

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// The columns that name a cell, first in results.csv and latency_hist.csv.
constexpr std::string_view kCellColumns = "driver,qdisc_shape,proto,size,procs,policy,batch,rounds";

std::string CellFields(const CellSummary& r) {
  return fmt::format("{},{},{},{},{},{},{},{}", CsvField(r.config.driver), ShapeName(r.config),
                     ProtoName(r.config.proto), r.config.size, r.config.procs,
                     CsvField(r.config.policy.ToString()), r.config.policy.frames, r.runs.size());
}

}  // namespace

std::vector<HistBin> MergedLatencyHist(const CellSummary& r) {
  std::map<double, HistBin> by_lo;
  for (const CellRecord* run : r.runs)
    for (const HistBin& b : run->result.latency_hist) {
      HistBin& m = by_lo.try_emplace(b.lo_ns, HistBin{b.lo_ns, b.hi_ns, 0}).first->second;
      m.hi_ns = std::max(m.hi_ns, b.hi_ns);  // the overflow bin ends at each round's max
      m.count += b.count;
    }
  std::vector<HistBin> out;
  for (const auto& [lo, b] : by_lo) out.push_back(b);
  return out;
}

std::string LatencyHistCsv(const std::vector<CellSummary>& rows) {
  std::string csv = fmt::format("{},bin_lo_ns,bin_hi_ns,count\n", kCellColumns);
  for (const CellSummary& r : rows) {
    const std::string cell = CellFields(r);
    for (const HistBin& b : MergedLatencyHist(r))
      csv += fmt::format("{},{},{},{}\n", cell, b.lo_ns, b.hi_ns, b.count);
  }
  return csv;
}

std::string SweepCsv(const std::vector<CellSummary>& rows) {
  std::string csv(kCellColumns);
  for (const MetricRow& m : kMetrics)
    if (m.column != Column::kNone) csv += fmt::format(",{}", m.key);
  csv +=
      ",bw_ratio_vs_off,bw_ci_lo,bw_ci_hi,bw_verdict,"
      "cycles_ratio_vs_off,cycles_ci_lo,cycles_ci_hi,cycles_verdict,balanced,interrupted\n";
  const auto vs = [](const std::optional<RatioEstimate>& e, Verdict v) {
    if (!e) return std::string(",,,");
    return fmt::format("{:.6g},{:.6g},{:.6g},{}", e->ratio, e->ci_lo, e->ci_hi, VerdictName(v));
  };
  for (const CellSummary& r : rows) {
    csv += CellFields(r);
    for (const MetricRow& m : kMetrics) {
      const std::optional<double> v = r.Find(m.metric);
      if (m.column == Column::kFlag) csv += v.value_or(0) != 0 ? ",true" : ",false";
      if (m.column == Column::kNumber || m.column == Column::kMaybe) csv += "," + Opt(v);
    }
    bool balanced = true;
    bool interrupted = false;
    for (const CellRecord* run : r.runs) {
      balanced &= run->result.books.balanced;
      interrupted |= run->result.interrupted;
    }
    csv += fmt::format(",{},{},{},{}\n", vs(r.bw_vs_off, r.bw_verdict),
                       vs(r.cycles_vs_off, r.cycles_verdict), balanced ? "true" : "false",
                       interrupted ? "true" : "false");
  }
  return csv;
}

json SweepSummaryJson(const std::vector<CellSummary>& rows) {
  json out = json::array();
  const auto vs = [](const std::optional<RatioEstimate>& e, Verdict v) -> json {
    if (!e) return nullptr;
    return {{"ratio", e->ratio}, {"ci95", {e->ci_lo, e->ci_hi}}, {"verdict", VerdictName(v)}};
  };
  for (const CellSummary& r : rows) {
    json row = {{"driver", r.config.driver},
                {"qdisc_shape", ShapeName(r.config)},
                {"proto", ProtoName(r.config.proto)},
                {"size", r.config.size},
                {"procs", r.config.procs},
                {"policy", r.config.policy.ToString()},
                {"batch", r.config.policy.frames},
                {"rounds", r.runs.size()}};
    for (const MetricRow& m : kMetrics) {
      const std::optional<double> v = r.Find(m.metric);
      if (m.column == Column::kFlag) row[std::string(m.key)] = v.value_or(0) != 0;
      if (m.column == Column::kNumber) row[std::string(m.key)] = v.value_or(0);
      if (m.column == Column::kMaybe) row[std::string(m.key)] = v ? json(*v) : json(nullptr);
    }
    row["bw_vs_off"] = vs(r.bw_vs_off, r.bw_verdict);
    row["cycles_vs_off"] = vs(r.cycles_vs_off, r.cycles_verdict);
    out.push_back(std::move(row));
  }
  return out;
}

Status WriteSweepOutputs(const OutputDir& dir, const std::string& tables, json doc,
                         const std::vector<CellSummary>& rows) {
  doc["summary"] = SweepSummaryJson(rows);
  std::vector<std::pair<std::string, std::string>> files = {
      {"tables.txt", tables},
      {"results.csv", SweepCsv(rows)},
      {"results.json", DumpDocument(doc)},
      {"latency_hist.csv", LatencyHistCsv(rows)}};
  return dir.WriteAll(files);
}

}  // namespace txbatch
