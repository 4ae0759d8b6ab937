#include "tools/figures.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <span>

extern char** environ;

namespace txbatch {
namespace {

// txbatch-plot beside this binary, or what TXBATCH_PLOT names ("" where it is set empty).
std::string PlotProgram() {
  if (const char* e = std::getenv("TXBATCH_PLOT")) return e;
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  return (self.parent_path() / "txbatch-plot").string();
}

// What txbatch-plot draws for a sweep, and what txbatch drew itself before 2026-12-05.
constexpr const char* kFigureFiles[] = {"latency.svg",    "latency.png",  "throughput.svg",
                                        "throughput.png", "cost.svg",     "cost.png",
                                        "batching.svg",   "batching.png", "figures.json"};
constexpr const char* kOldFigureFiles[] = {"calls.svg", "onoff.svg"};

void Remove(const std::string& dir, std::span<const char* const> names) {
  for (const char* name : names) std::filesystem::remove(std::filesystem::path(dir) / name);
}

}  // namespace

Figures DrawFigures(const std::string& dir) {
  Figures out;
  const std::string program = PlotProgram();
  if (program.empty()) {
    out.why_not = "TXBATCH_PLOT is set empty";
    return out;
  }
  // A bare name (TXBATCH_PLOT=txbatch-plot) is looked for on PATH, as a shell would.
  const bool on_path = program.find('/') == std::string::npos;
  if (!on_path && access(program.c_str(), X_OK) != 0) {
    out.why_not = fmt::format("{} is not there to draw them ({})", program, std::strerror(errno));
    return out;
  }
  // Its standard output (the files it wrote) is said here instead; its errors go to ours. The
  // child starts with no signal blocked and SIGINT, SIGTERM and SIGPIPE at their defaults,
  // whatever this process's threads hold.
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  // None of this process's other files (EAL's, a capture's) goes with it.
  posix_spawn_file_actions_addclosefrom_np(&fa, STDERR_FILENO + 1);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, defaults;
  sigemptyset(&none);
  sigemptyset(&defaults);
  for (int s : {SIGINT, SIGTERM, SIGPIPE}) sigaddset(&defaults, s);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  const std::string format = "svg,png";
  // "--" before the folder: a --out folder named "-x" is the folder, not an option of its.
  char* argv[] = {const_cast<char*>(program.c_str()), const_cast<char*>("--format"),
                  const_cast<char*>(format.c_str()),  const_cast<char*>("--"),
                  const_cast<char*>(dir.c_str()),     nullptr};
  pid_t pid = 0;
  const int err =
      (on_path ? posix_spawnp : posix_spawn)(&pid, program.c_str(), &fa, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (err != 0) {
    out.why_not = fmt::format("{} could not be started ({})", program, std::strerror(err));
    return out;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    out.why_not =
        WIFEXITED(status)
            ? fmt::format("{} exited {}", program, WEXITSTATUS(status))
            : fmt::format("{} was ended by signal {}", program, WTERMSIG(status));
    return out;
  }
  for (const char* f : kFigureFiles)  // what it drew, as it is there
    if (std::filesystem::exists(std::filesystem::path(dir) / f)) out.files.push_back(f);
  if (out.files.empty()) out.why_not = fmt::format("{} drew none", program);
  return out;
}

void SayWrittenAndDraw(const std::string& dir) {
  std::printf("wrote %s/{tables.txt,results.csv,results.json,latency_hist.csv}\n", dir.c_str());
  std::fflush(stdout);
  const Figures f = DrawFigures(dir);
  if (f.files.empty()) {
    // An earlier run's figures would sit beside data they were not drawn from.
    Remove(dir, kFigureFiles);
    Remove(dir, kOldFigureFiles);
    std::fprintf(stderr, "txbatch: no figures in %s: %s\n", dir.c_str(), f.why_not.c_str());
    return;
  }
  Remove(dir, kOldFigureFiles);
  std::string list;
  for (const auto& name : f.files) list += (list.empty() ? "" : ",") + name;
  std::printf("drew %s/{%s}\n", dir.c_str(), list.c_str());
}

}  // namespace txbatch
