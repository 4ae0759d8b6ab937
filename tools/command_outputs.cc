#include "tools/command_outputs.h"

#include "tools/session.h"

namespace txbatch {

Result<CommandOutputs> OpenOutputs(const OutputNames& names) {
  std::vector<std::pair<std::string, std::string>> named = {{"--json", names.json},
                                                            {"--stats-json", names.stats_json},
                                                            {"--capture", names.capture}};
  named.insert(named.end(), names.more.begin(), names.more.end());
  if (Status st = DistinctOutputs(named); !st) return st.error();
  auto json = PrepareOutput(names.json);
  if (!json) return json.error();
  auto capture = PrepareCapture(names.capture, names.capture_mtu);
  if (!capture) return capture.error();
  std::optional<CaptureReserve> opened;
  if (names.open_capture_now) {
    auto r = OpenCaptureFile(*capture);
    if (!r) return r.error();
    opened.emplace(std::move(*r));
  }
  // Opened last: the stream's file is made here, and nothing after it refuses (a capture opened
  // above is removed again if this fails: CaptureReserve).
  auto stream = StatsStream::Open(names.stats_json);
  if (!stream) return stream.error();
  CommandOutputs out{std::move(*json), std::move(*capture), std::nullopt, std::move(*stream)};
  if (opened) out.capture_opened.emplace(std::move(*opened));
  return out;
}

}  // namespace txbatch
