#include "tools/stats_stream.h"

#include <fmt/format.h>

#include <cstdio>

#include "engine/session.h"
#include "tools/run_options.h"

namespace txbatch {

Result<StatsStream> StatsStream::Open(const std::string& path) {
  StatsStream s;
  if (path.empty()) return s;
  auto out = OutputFile::Check(path, "--stats-json file");
  if (!out) return out.error();
  auto stream = LineStream::Open(std::move(*out));
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

void AddStatsJsonOption(CLI::App& cmd, std::string& path, const std::string& what) {
  cmd.add_option("--stats-json", path,
                 "Write live statistics to this file as NDJSON (- for standard output): a start "
                 "event, " +
                     what + ", an end event")
      ->check(NonEmpty("--stats-json needs a file name (or - for standard output)"));
}

}  // namespace txbatch
