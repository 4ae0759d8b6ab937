#include "tests/txbatch_run.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <regex>

#include "tests/test_files.h"
#include "tests/txbatch_bin.h"

namespace txbatch::test {

TxbatchRun RunTxbatchAsGiven(const std::string& args) {
  const std::string dir = ::testing::TempDir(), tag = std::to_string(getpid());
  const std::string out = dir + "/run_" + tag + ".out", err = dir + "/run_" + tag + ".err";
  const int rc = std::system((TxbatchBinary() + " " + args + " >" + out + " 2>" + err).c_str());
  TxbatchRun r;
  r.status = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
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
