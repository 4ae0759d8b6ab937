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
  std::string csv =
      std::string(kCellColumns) +
      ",mb_per_s,mpps,ceiling_mb_per_s,"
      "link_bound,avg_batch,doorbells_per_pkt,xmit_calls_per_pkt,cycles_per_pkt,cpu_ns_per_pkt,"
      "lat_avg_ns,lat_p50_ns,lat_p99_ns,bw_ratio_vs_off,bw_ci_lo,bw_ci_hi,bw_verdict,"
      "cycles_ratio_vs_off,cycles_ci_lo,cycles_ci_hi,cycles_verdict,balanced,interrupted\n";
  for (const CellSummary& r : rows) {
    const auto vs = [](const std::optional<RatioEstimate>& e, Verdict v) {
      if (!e) return std::string(",,,");
      return fmt::format("{:.6g},{:.6g},{:.6g},{}", e->ratio, e->ci_lo, e->ci_hi, VerdictName(v));
    };
    bool balanced = true;
    bool interrupted = false;
    for (const CellRecord* run : r.runs) {
      balanced &= run->result.books.balanced;
      interrupted |= run->result.interrupted;
    }
    csv += fmt::format(
        "{},{:.6g},{:.6g},{},{},{:.6g},{},{:.6g},{:.6g},{:.6g},{},{},{},{},{},{},{}\n",
        CellFields(r), r.mb_per_s, r.mpps, Opt(r.ceiling_mb_per_s), r.link_bound ? "true" : "false",
        r.avg_batch, Opt(r.doorbells_per_pkt), r.xmit_calls_per_pkt, r.cycles_per_pkt,
        r.cpu_ns_per_pkt, Opt(r.lat_avg_ns), Opt(r.lat_p50_ns), Opt(r.lat_p99_ns),
        vs(r.bw_vs_off, r.bw_verdict), vs(r.cycles_vs_off, r.cycles_verdict),
        balanced ? "true" : "false", interrupted ? "true" : "false");
  }
  return csv;
}

json SweepSummaryJson(const std::vector<CellSummary>& rows) {
  json out = json::array();
  const auto opt = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  const auto vs = [](const std::optional<RatioEstimate>& e, Verdict v) -> json {
    if (!e) return nullptr;
    return {{"ratio", e->ratio}, {"ci95", {e->ci_lo, e->ci_hi}}, {"verdict", VerdictName(v)}};
  };
  for (const CellSummary& r : rows)
    out.push_back({{"driver", r.config.driver},
                   {"qdisc_shape", ShapeName(r.config)},
                   {"proto", ProtoName(r.config.proto)},
                   {"size", r.config.size},
                   {"procs", r.config.procs},
                   {"policy", r.config.policy.ToString()},
                   {"batch", r.config.policy.frames},
                   {"rounds", r.runs.size()},
                   {"mb_per_s", r.mb_per_s},
                   {"mpps", r.mpps},
                   {"ceiling_mb_per_s", opt(r.ceiling_mb_per_s)},
                   {"link_bound", r.link_bound},
                   {"avg_batch", r.avg_batch},
                   {"doorbells_per_pkt", opt(r.doorbells_per_pkt)},
                   {"xmit_calls_per_pkt", r.xmit_calls_per_pkt},
                   {"cycles_per_pkt", r.cycles_per_pkt},
                   {"cpu_ns_per_pkt", r.cpu_ns_per_pkt},
                   {"lat_avg_ns", opt(r.lat_avg_ns)},
                   {"lat_p50_ns", opt(r.lat_p50_ns)},
                   {"lat_p99_ns", opt(r.lat_p99_ns)},
                   {"bw_vs_off", vs(r.bw_vs_off, r.bw_verdict)},
                   {"cycles_vs_off", vs(r.cycles_vs_off, r.cycles_verdict)}});
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
