#include "tests/txbatch_run.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <regex>

#include "tests/test_files.h"
#include "tests/txbatch_bin.h"

namespace txbatch::test {

TxbatchRun RunTxbatchAsGiven(const std::string& args, const std::string& dir) {
  const std::string tag = std::to_string(getpid());
  const std::string out =
      dir.empty() ? ::testing::TempDir() + "/run_" + tag + ".out" : dir + "/stdout";
  const std::string err =
      dir.empty() ? ::testing::TempDir() + "/run_" + tag + ".err" : dir + "/stderr";
  // Through bash, as a user's shell: process substitution (<(…), >(…)) works in `args`.
  const std::string cmd = TxbatchBinary() + " " + args + " >" + out + " 2>" + err;
  const char* const argv[] = {"bash", "-c", cmd.c_str(), nullptr};
  pid_t pid = -1;
  int rc = -1;
  if (const int e =
          posix_spawnp(&pid, "bash", nullptr, nullptr, const_cast<char* const*>(argv), environ);
      e != 0) {
    ADD_FAILURE() << "bash could not be started for txbatch " << args << ": " << std::strerror(e);
  } else {
    pid_t got;
    while ((got = waitpid(pid, &rc, 0)) < 0 && errno == EINTR) {
    }
    if (got < 0) ADD_FAILURE() << "waitpid for txbatch " << args << ": " << std::strerror(errno);
  }
  TxbatchRun r;
  r.status = rc != -1 && WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
  r.out = Slurp(out);
  // Another txbatch polling this one's CPU adds a note to stderr: not the command's output.
  r.err = WithoutCpuNote(Slurp(err));
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

TxbatchRun RunTxbatch(const std::string& args) {
  const std::string json = ::testing::TempDir() + "/run_" + std::to_string(getpid()) + ".json";
  std::filesystem::remove(json);
  // EAL arguments after "--" must stay last.
  std::string own = args, eal;
  if (const size_t dd = args.find(" -- "); dd != std::string::npos) {
    own = args.substr(0, dd);
    eal = args.substr(dd);
  }
  // A run measures one round unless the test asks for more: tests read one record per cell.
  if (own.starts_with("run") && own.find("--rounds") == std::string::npos) own += " --rounds 1";
  // report reads a result file and writes none.
  const std::string json_arg = own.starts_with("report") ? "" : " --json " + json;
  TxbatchRun r = RunTxbatchAsGiven(own + json_arg + eal);
  if (std::filesystem::exists(json)) r.doc = nlohmann::json::parse(Slurp(json));
  std::filesystem::remove(json);
  return r;
}

std::optional<CaptureSaid> CaptureLine(const std::string& out) {
  std::smatch said;
  if (!std::regex_search(
          out, said,
          std::regex(
              R"(capture: (\d+) frames written to \S+( \((\d+) more dropped by the capture)?)")))
    return std::nullopt;
  return CaptureSaid{std::stoull(said[1]), said[3].matched ? std::stoull(said[3]) : 0};
}

}  // namespace txbatch::test
