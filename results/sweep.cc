#include "results/sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string_view>

#include "results/plot.h"
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

// The series a row belongs to: everything but the batch limit.
std::string SeriesName(const CellSummary& r) {
  return fmt::format("{} {} {}B x{}", r.config.driver, ShapeName(r.config), r.config.size,
                     r.config.procs);
}

std::map<std::string, std::vector<const CellSummary*>> BySeries(
    const std::vector<CellSummary>& rows) {
  std::map<std::string, std::vector<const CellSummary*>> out;
  for (const auto& r : rows) out[SeriesName(r)].push_back(&r);
  return out;
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

std::vector<std::pair<std::string, std::string>> SweepPlots(const std::vector<CellSummary>& rows) {
  const auto series = BySeries(rows);
  const auto line = [&](const std::string& suffix, auto get, bool dashed = false) {
    std::vector<PlotSeries> out;
    for (const auto& [name, cells] : series) {
      PlotSeries s{name + suffix, {}, dashed};
      for (const CellSummary* c : cells)
        if (const std::optional<double> y = get(*c))
          s.points.emplace_back(c->config.policy.frames, *y);
      if (!s.points.empty()) out.push_back(std::move(s));
    }
    return out;
  };
  std::vector<std::pair<std::string, std::string>> plots;
  plots.emplace_back(
      "throughput.svg",
      LinePlotSvg("Throughput vs batch size", "batch limit (frames)", "Mpps",
                  line("", [](const CellSummary& c) { return std::optional(c.mpps); }), true));
  auto lat = line(" p50", [](const CellSummary& c) {
    return c.lat_p50_ns ? std::optional(*c.lat_p50_ns / 1e3) : std::nullopt;
  });
  auto p99 = line(
      " p99",
      [](const CellSummary& c) {
        return c.lat_p99_ns ? std::optional(*c.lat_p99_ns / 1e3) : std::nullopt;
      },
      true);
  lat.insert(lat.end(), p99.begin(), p99.end());
  plots.emplace_back("latency.svg", LinePlotSvg("Latency vs batch size (p50 solid, p99 dashed)",
                                                "batch limit (frames)", "microseconds", lat, true,
                                                "no latency: nothing receives on these drivers"));
  plots.emplace_back(
      "cost.svg",
      LinePlotSvg("TX cycles per frame vs batch size", "batch limit (frames)", "cycles/pkt",
                  line("", [](const CellSummary& c) { return std::optional(c.cycles_per_pkt); }),
                  true));
  plots.emplace_back("calls.svg",
                     LinePlotSvg("Doorbells (or driver calls) per frame vs batch size",
                                 "batch limit (frames)", "per frame",
                                 line("",
                                      [](const CellSummary& c) {
                                        return c.doorbells_per_pkt
                                                   ? c.doorbells_per_pkt
                                                   : std::optional(c.xmit_calls_per_pkt);
                                      }),
                                 true));
  std::vector<BarGroup> groups;
  for (const auto& [name, cells] : series) {
    const CellSummary* off = cells.front();
    const CellSummary* on = cells.back();
    for (const CellSummary* c : cells) {
      if (c->config.policy.frames < off->config.policy.frames) off = c;
      if (c->config.policy.frames > on->config.policy.frames) on = c;
    }
    groups.push_back({name, {off->mb_per_s, on->mb_per_s}});
  }
  plots.emplace_back("onoff.svg",
                     BarPlotSvg("Batching off vs the largest batch, per cell", "MB/s",
                                {"smallest batch limit", "largest batch limit"}, groups));
  return plots;
}

Status WriteSweepOutputs(const OutputDir& dir, const std::string& tables, json doc,
                         const std::vector<CellSummary>& rows) {
  doc["summary"] = SweepSummaryJson(rows);
  std::vector<std::pair<std::string, std::string>> files = {
      {"tables.txt", tables},
      {"results.csv", SweepCsv(rows)},
      {"results.json", doc.dump(2) + "\n"},
      {"latency_hist.csv", LatencyHistCsv(rows)}};
  for (auto& p : SweepPlots(rows)) files.push_back(std::move(p));
  return dir.WriteAll(files);
}

}  // namespace txbatch
