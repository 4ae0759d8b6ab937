#include "tools/command_outputs.h"

#include "tools/session.h"

namespace txbatch {

Result<CommandOutputs> OpenOutputs(const OutputNames& names) {
  std::vector<std::pair<std::string, std::string>> named = {{"--json", names.json},
                                                            {"--stats-json", names.stats_json},
                                                            {"--capture", names.capture}};
  named.insert(named.end(), names.more.begin(), names.more.end());
  if (Status st = DistinctOutputs(named); !st) return st.error();
  // Every check first (each claims standard output where it names it, in this order: --json,
  // --stats-json, --capture, so the same pair is refused with the same sentence every time).
  auto json = PrepareOutput(names.json);
  if (!json) return json.error();
  auto stream_file = StatsStream::Check(names.stats_json);
  if (!stream_file) return stream_file.error();
  auto capture = PrepareCapture(names.capture, names.capture_mtu);
  if (!capture) return capture.error();
  // Then what is made: the stream's file, and run's capture file last (it truncates a capture
  // already there, which nothing may refuse after).
  auto stream = StatsStream::Open(std::move(*stream_file));
  if (!stream) return stream.error();
  CommandOutputs out{std::move(*json), std::move(*capture), std::nullopt, std::move(*stream)};
  if (names.open_capture_now) {
    auto r = OpenCaptureFile(out.capture);
    if (!r) return r.error();
    out.capture_opened.emplace(std::move(*r));
  }
  return out;
}

}  // namespace txbatch
