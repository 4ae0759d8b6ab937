#pragma once
// --stats-json FILE: live, machine-readable statistics as NDJSON — one JSON object a line, written
// as it happens, in iperf3 --json-stream's shape: {"event": "start"|"interval"|"cell"|"end",
// "data": {...}} (doc/usage.md lists each command's events and fields). `-` is standard output,
// which then carries the stream alone. Control plane.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/output_file.h"
#include "tools/session.h"

namespace txbatch {

class StatsStream {
 public:
  // No stream (--stats-json not given): Event does nothing.
  StatsStream() = default;
  // Checks and opens `path` before anything runs (an empty one: no stream). Standard output
  // already claimed (--json -) is refused (OutputFile::Check).
  static Result<StatsStream> Open(const std::string& path);
  // The same in two steps, for a command that checks its other outputs in between: Check
  // (nothing made; "-" claims standard output now), then Open what it checked (the file made).
  static Result<std::optional<OutputFile>> Check(const std::string& path);
  static Result<StatsStream> Open(std::optional<OutputFile> checked);

  explicit operator bool() const { return out_.has_value(); }
  // Writes one event line. A write that fails is said once on stderr and ends the stream;
  // Finish then turns the exit status into 2.
  void Event(std::string_view event, nlohmann::json data);
  // `status`, or 2 (bad input: the named output could not be written) where a write failed and
  // nothing worse happened.
  int Finish(int status) const;

 private:
  std::optional<LineStream> out_;
};

// --stats-json of a command that measures cells: the start event once its session runs, then a
// cell event as each cell run finishes (its record as results.json holds it, through
// Session::on_record). `cell_runs`: those planned (tune may add a finer pass).
void StartCellStream(StatsStream& stream, Session& s, const char* command, size_t cell_runs,
                     int rounds);
// The end event, once every other output is written: how the command ended, its exit status
// and `extra` (compare's verdict, tune's recommendation).
void EndCellStream(StatsStream& stream, const std::vector<CellRecord>& records, int status,
                   bool balanced, int exit_status, nlohmann::json extra = nlohmann::json::object());

// --stats-json on a command; `what` says when its lines come.
void AddStatsJsonOption(CLI::App& cmd, std::string& path, const std::string& what);

}  // namespace txbatch
