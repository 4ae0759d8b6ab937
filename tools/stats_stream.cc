#include "tools/stats_stream.h"

#include <fmt/format.h>

#include <cstdio>

#include "results/records.h"
#include "tools/run_options.h"
#include "tools/session.h"

namespace txbatch {

Result<StatsStream> StatsStream::Open(const std::string& path) {
  auto checked = Check(path);
  if (!checked) return checked.error();
  return Open(std::move(*checked));
}

Result<std::optional<OutputFile>> StatsStream::Check(const std::string& path) {
  if (path.empty()) return std::optional<OutputFile>();
  auto out = OutputFile::Check(path, "--stats-json file");
  if (!out) return out.error();
  out->ClaimStdout();  // a later output naming standard output is refused, as when it opened
  return std::optional<OutputFile>(std::move(*out));
}

Result<StatsStream> StatsStream::Open(std::optional<OutputFile> checked) {
  StatsStream s;
  if (!checked) return s;
  auto stream = LineStream::Open(std::move(*checked));
  if (!stream) return stream.error();
  s.out_.emplace(std::move(*stream));
  return s;
}

void StatsStream::Event(std::string_view event, nlohmann::json data) {
  if (!out_ || !out_->failure().empty()) return;
  // "event" first, as iperf3 writes it (a line tool can match '^{"event":"interval"'); bad
  // UTF-8 replaced, not thrown: a counter's name never holds any, a port's spec might.
  const std::string line = R"({"event":)" + nlohmann::json(event).dump() + R"(,"data":)" +
                           data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                           "}";
  if (!out_->WriteLine(line))
    std::fprintf(stderr, "txbatch: %s; no more --stats-json lines are written\n",
                 out_->failure().c_str());
}

int StatsStream::Finish(int status) const {
  return status == kExitOk && out_ && !out_->failure().empty() ? kExitBadInput : status;
}

void StartCellStream(StatsStream& stream, Session& s, const char* command, size_t cell_runs,
                     int rounds) {
  if (!stream) return;
  stream.Event("start", {{"command", command},
                         {"command_line", s.env.command_line},
                         {"started_at", s.env.started_at},
                         {"cell_runs", cell_runs},
                         {"rounds", rounds},
                         {"dpdk_version", s.env.dpdk_version},
                         {"tsc_hz", s.env.tsc_hz}});
  s.on_record = [&stream, &s](const CellRecord& r) {
    stream.Event("cell", ToJson({r}, s.env)["records"][0]);
  };
}

void EndCellStream(StatsStream& stream, const std::vector<CellRecord>& records, int status,
                   bool balanced, int exit_status, nlohmann::json extra) {
  if (!stream) return;
  extra["state"] = StopRequested() ? "interrupted" : status == kExitOk ? "done" : "failed";
  extra["cell_runs"] = records.size();
  extra["balanced"] = balanced;
  extra["exit_status"] = exit_status;
  stream.Event("end", std::move(extra));
}

void AddStatsJsonOption(CLI::App& cmd, std::string& path, const std::string& what) {
  cmd.add_option("--stats-json", path,
                 "Write live statistics to this file as NDJSON (- for standard output): a start "
                 "event, " +
                     what + ", an end event")
      ->check(NonEmpty("--stats-json needs a file name (or - for standard output)"));
}

}  // namespace txbatch
