#pragma once
// What a command writes besides its tables, checked and opened in one step once every other
// option has been checked (bad input: one sentence, nothing written — the --stats-json stream,
// which is opened here, last): every output named apart from the others, the --json file, the
// --capture file and the --stats-json stream. run, sweep, compare, tune, bridge, respond and
// sink compose it.

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
