#include "tools/capture_cmd.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <variant>

#include "tools/run_options.h"

namespace txbatch {

void AddCaptureOption(CLI::App& cmd, std::string& path) {
  cmd.add_option("--capture", path,
                 "Write what the ports sent and received to this pcapng file (- for standard "
                 "output), for tshark or Wireshark: an interface a port, each frame's direction "
                 "and a nanosecond timestamp")
      ->check(NonEmpty("--capture needs a file name (or - for standard output)"));
}

Result<CaptureFile> PrepareCapture(const std::string& path, unsigned mtu) {
  CaptureFile c;
  c.mtu = mtu;
  if (path.empty()) return c;
  auto out = OutputFile::Check(path, "--capture file");
  if (!out) return out.error();
  out->ClaimStdout();  // now, before anything else is printed (a no-op but for standard output)
  c.file.emplace(std::move(*out));
  return c;
}

CaptureReserve::~CaptureReserve() {
  if (fd >= 0) ::close(fd);
  if (!remove.empty()) ::unlink(remove.c_str());
}

Status CheckRunCapture(const std::vector<CellConfig>& cells) {
  const auto captured = [](const CellConfig& c) {
    return c.engine == Engine::kReal && c.driver_spec.limits().captured;
  };
  if (!std::all_of(cells.begin(), cells.end(), captured))
    return MakeError(EINVAL,
                     "--capture records what DPDK ports sent and received, and emu, "
                     "verbs and --engine sim have none; valid: --capture with --driver "
                     "ethdev:…");
  for (const CellConfig& c : cells)
    if (c.driver_spec.ToString() != cells.front().driver_spec.ToString() ||
        c.queues != cells.front().queues)
      return MakeError(EINVAL,
                       "--capture takes one --driver and one --queues: the pcapng file "
                       "names its ports once, when it opens; valid: a run per driver, "
                       "each with its own --capture file");
  return {};
}

Result<CaptureReserve> OpenCaptureFile(CaptureFile& c) {
  CaptureReserve r;
  if (!c.file) return r;
  auto fd = c.file->OpenStream();
  if (!fd) return fd.error();
  r.fd = *fd;
  struct stat st {};
  if (!c.file->to_stdout() && ::fstat(r.fd, &st) == 0 && S_ISREG(st.st_mode))
    r.remove = c.file->path();
  return r;
}

Result<CaptureReserve> ReserveCapture(CaptureFile& c) {
  if (!c.file) return CaptureReserve();
  auto pool = Capture::MakePool(c.mtu);
  if (!pool)
    return MakeError(pool.error().err,
                     fmt::format("--capture '{}': {}", c.file->path(), pool.error().message));
  auto r = OpenCaptureFile(c);
  if (!r) return r.error();
  r->pool = std::move(*pool);
  return r;
}

Result<std::unique_ptr<Capture>> StartCapture(CaptureFile& c, CaptureReserve& r) {
  if (!c.file) return std::unique_ptr<Capture>();
  auto capture = Capture::Start(std::exchange(r.fd, -1), std::move(r.pool), c.mtu);
  if (capture)
    r.remove.clear();  // started: the file is the capture's (else its headers may
                       // be half-written: the reserve removes it)
  if (!capture)
    return MakeError(capture.error().err,
                     fmt::format("--capture '{}': {}", c.file->path(), capture.error().message));
  return std::move(*capture);
}

bool FinishCapture(std::unique_ptr<Capture>& capture, const CaptureFile& c) {
  if (!capture) return true;
  capture->Stop();  // the writer drains what was posted, the file gets its statistics blocks
  const Capture::Counts n = capture->counts();
  const std::string failure = capture->failure();
  capture.reset();
  if (!failure.empty()) {
    std::fprintf(stderr, "txbatch: cannot write --capture file '%s': %s (%llu frames written)\n",
                 c.file->path().c_str(), failure.c_str(),
                 static_cast<unsigned long long>(n.written));
    return false;
  }
  // On stderr where the capture is standard output: it carries the file alone.
  std::FILE* say = c.file->to_stdout() ? stderr : stdout;
  fmt::print(say, "capture: {} frames written to {}{}\n", n.written,
             c.file->to_stdout() ? "standard output" : c.file->path(),
             n.dropped ? fmt::format(" ({} more dropped by the capture: its pool or ring was full)",
                                     n.dropped)
                       : std::string());
  return true;
}

}  // namespace txbatch
