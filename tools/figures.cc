#include "tools/figures.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

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

// What txbatch-plot draws for a sweep (bufferbloat where the records have a --probe), as
// `drew DIR/{...}` lists it.
constexpr const char* kFigureFiles[] = {
    "latency.svg",  "latency.png",  "throughput.svg",  "throughput.png",  "cost.svg",    "cost.png",
    "batching.svg", "batching.png", "bufferbloat.svg", "bufferbloat.png", "figures.json"};
// A figure file's name, as txbatch-plot's FIGURE_FILE has it: a name figures.json lists that is
// not one of these is never removed, whatever the file says.
// tests/e2e/plot_test.py (FigureStems) checks this list against FIGURE_FILE.
constexpr const char* kFigureStems[] = {"latency",  "throughput", "cost",
                                        "batching", "compare",    "bufferbloat"};
constexpr const char* kFigureFormats[] = {"svg", "png", "pdf"};
// Those txbatch drew itself before 2026-12-05, which no figures.json lists: named, never removed.
constexpr const char* kOldFigureFiles[] = {"calls.svg", "onoff.svg"};
// The largest figures.json read back (txbatch-plot's MAX_MANIFEST_BYTES).
inline constexpr off_t kMaxManifestBytes = 64 << 20;

bool IsFigureFileName(const std::string& name) {
  for (const char* stem : kFigureStems)
    for (const char* format : kFigureFormats)
      if (name == fmt::format("{}.{}", stem, format)) return true;
  return false;
}

// DIR/figures.json, where it is a regular file of txbatch-plot's shape (never followed through a
// link, never waited on as a FIFO); null otherwise.
nlohmann::json ReadManifest(const std::filesystem::path& dir) {
  const int fd =
      open((dir / "figures.json").c_str(), O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return nullptr;
  std::string text;
  struct stat st {};
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size <= kMaxManifestBytes) {
    text.resize(static_cast<size_t>(st.st_size));
    const ssize_t n = read(fd, text.data(), text.size());
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  close(fd);
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object() || !doc.contains("figures") || !doc["figures"].is_array() ||
      !doc.contains("files") || !doc["files"].is_object())
    return nullptr;
  return doc;
}

// Whether DIR/name is still the file txbatch-plot recorded in figures.json as `was`: the same
// inode, size, modification and change times (a write, chmod, link or rename since changes the
// change time; a file put in its place is another inode).
bool StillAsDrawn(const std::filesystem::path& dir, const std::string& name,
                  const nlohmann::json& was) {
  struct stat st {};
  if (lstat((dir / name).c_str(), &st) != 0 || !S_ISREG(st.st_mode) || !was.is_object())
    return false;
  const auto is = [&was](const char* key, uint64_t value) {
    const auto it = was.find(key);
    return it != was.end() && it->is_number_unsigned() && it->get<uint64_t>() == value;
  };
  const auto ns = [](const timespec& t) {
    return static_cast<uint64_t>(t.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(t.tv_nsec);
  };
  return is("ino", st.st_ino) && is("size", static_cast<uint64_t>(st.st_size)) &&
         is("mtime_ns", ns(st.st_mtim)) && is("ctime_ns", ns(st.st_ctim));
}

// Removes the figures an earlier run drew in `dir`: those its figures.json lists that are still
// as drawn, then figures.json. Returns the figure-named files it leaves there (not drawn by
// txbatch, or changed since), for the user to be told.
std::vector<std::string> RemoveEarlierFigures(const std::string& dir) {
  const std::filesystem::path d(dir);
  const nlohmann::json manifest = ReadManifest(d);
  if (manifest.is_object()) {
    for (const auto& [name, was] : manifest["files"].items())
      if (IsFigureFileName(name) && StillAsDrawn(d, name, was)) unlink((d / name).c_str());
    unlink((d / "figures.json").c_str());
  }
  std::vector<std::string> left;
  const auto note = [&left, &d](const std::string& name) {
    struct stat st {};
    if (lstat((d / name).c_str(), &st) == 0) left.push_back(name);
  };
  for (const char* stem : kFigureStems)
    for (const char* format : kFigureFormats) note(fmt::format("{}.{}", stem, format));
  note("figures.json");
  for (const char* name : kOldFigureFiles) note(name);
  return left;
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
    out.why_not = WIFEXITED(status)
                      ? fmt::format("{} exited {}", program, WEXITSTATUS(status))
                      : fmt::format("{} was ended by signal {}", program, WTERMSIG(status));
    return out;
  }
  // What it drew, as it is there: the figures its figures.json lists (a user's bufferbloat.svg
  // beside a sweep without a probe is not one), and figures.json.
  const nlohmann::json drawn = ReadManifest(dir);
  for (const char* f : kFigureFiles)
    if (std::filesystem::exists(std::filesystem::path(dir) / f) &&
        (std::string_view(f) == "figures.json" || !drawn.is_object() ||
         drawn["files"].contains(f)))
      out.files.push_back(f);
  if (out.files.empty()) out.why_not = fmt::format("{} drew none", program);
  return out;
}

void SayWrittenAndDraw(const std::string& dir) {
  std::printf("wrote %s/{tables.txt,results.csv,results.json,latency_hist.csv}\n", dir.c_str());
  std::fflush(stdout);
  const Figures f = DrawFigures(dir);
  if (f.files.empty()) {
    // An earlier run's figures would sit beside data they were not drawn from: those txbatch
    // drew go; a file that only has a figure's name stays, and is named.
    const std::vector<std::string> left = RemoveEarlierFigures(dir);
    std::string kept;
    for (const auto& name : left) kept += (kept.empty() ? "" : ", ") + name;
    if (!kept.empty())
      kept = fmt::format(" (left as they are, not drawn by txbatch or changed since: {})", kept);
    std::fprintf(stderr, "txbatch: no figures in %s: %s%s\n", dir.c_str(), f.why_not.c_str(),
                 kept.c_str());
    return;
  }
  std::string list;
  for (const auto& name : f.files) list += (list.empty() ? "" : ",") + name;
  std::printf("drew %s/{%s}\n", dir.c_str(), list.c_str());
}

}  // namespace txbatch
