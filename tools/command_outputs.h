#pragma once
// What a command writes besides its tables, checked and opened in one step once every other
// option has been checked: every output named apart from the others, the --json file, the
// --stats-json stream and the --capture file. Every check comes before anything is made, so bad
// input is one sentence with nothing written; then the stream's file is made, and run's capture
// file last (opening it truncates one already there). What fails later (EAL, a port, its link)
// finds the stream made. run, sweep, compare, tune, bridge, respond and sink compose it.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/output_file.h"
#include "tools/capture_cmd.h"
#include "tools/stats_stream.h"

namespace txbatch {

struct OutputNames {
  std::string json;        // --json (empty: none)
  std::string stats_json;  // --stats-json
  std::string capture;     // --capture
  unsigned capture_mtu = 0;
  // run's capture: its file opened here, before EAL (OpenCaptureFile), not once EAL runs.
  bool open_capture_now = false;
  // Other files the command writes (a sweep's folder's), named apart from these too.
  std::vector<std::pair<std::string, std::string>> more;
};

struct CommandOutputs {
  std::optional<OutputFile> json;
  CaptureFile capture;  // its pool and start come once EAL runs (ReserveCapture, StartCapture)
  std::optional<CaptureReserve> capture_opened;  // with open_capture_now
  StatsStream stream;
};

Result<CommandOutputs> OpenOutputs(const OutputNames& names);

}  // namespace txbatch
