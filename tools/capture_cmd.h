#pragma once
// --capture FILE on the forwarding commands (bridge, respond, sink): what their DPDK ports sent
// and received, in pcapng (dataplane/capture.h). Control plane.

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/output_file.h"
#include "dataplane/capture.h"
#include "engine/cell.h"

namespace txbatch {

void AddCaptureOption(CLI::App& cmd, std::string& path);

// The capture asked for, checked before anything runs (none for an empty `path`), and what its
// pool adds to EAL's memory.
struct CaptureFile {
  std::optional<OutputFile> file;
  unsigned mtu = 0;
  uint64_t pool_bytes() const { return file ? Capture::PoolBytes(mtu) : 0; }
};
Result<CaptureFile> PrepareCapture(const std::string& path, unsigned mtu);

// What a capture needs ready before its ports wait for their peers, so that nothing slow is
// left between a link coming up and the first poll (a memif peer sends at once): its pool
// (Capture::MakePool: its pages faulted in) and its file, open (truncated: 0.1-0.3 s for a
// large earlier capture here). Made once EAL runs, held after it (the pool is EAL's) and given
// to StartCapture; dropped unstarted (a link that never came up), it closes the file and removes
// it where it is a regular file, so a failed start leaves no empty capture behind.
struct CaptureReserve {
  PoolPtr pool;
  int fd = -1;
  std::string remove;  // the regular file to remove if the capture never starts (cleared once
                       // it has: StartCapture, or run's caller once its session started it)
  CaptureReserve() = default;
  CaptureReserve(CaptureReserve&& o) noexcept
      : pool(std::move(o.pool)), fd(std::exchange(o.fd, -1)), remove(std::move(o.remove)) {}
  CaptureReserve& operator=(CaptureReserve&&) = delete;
  ~CaptureReserve();
};
Result<CaptureReserve> ReserveCapture(CaptureFile& c);

// run --capture: every cell on one ethdev driver (rte_pcapng names the ports once, when it
// opens, and emu and verbs have none), on the real engine; else one sentence.
Status CheckRunCapture(const std::vector<CellConfig>& cells);
// run's file, open before the session starts (its pool is the session's: StartSession); a
// reserve without a pool.
Result<CaptureReserve> OpenCaptureFile(CaptureFile& c);

// Starts it once every port exists (rte_pcapng names the ports there are when it opens) and
// their links are up; null without one.
Result<std::unique_ptr<Capture>> StartCapture(CaptureFile& c, CaptureReserve& r);

// Stops it (everything posted is written) and says what the file holds; false where writing
// failed (the sentence is printed on stderr).
bool FinishCapture(std::unique_ptr<Capture>& capture, const CaptureFile& c);

}  // namespace txbatch
