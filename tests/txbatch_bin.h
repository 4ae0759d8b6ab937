#pragma once
// The txbatch binary the tests run, for every suite: $TXBATCH_BIN (meson test sets it), else the
// one this build made beside the test binary (build/tools/txbatch from build/tests/SUITE/X), so
// a test binary run by hand tests this build's txbatch, not whatever is on PATH. Neither there:
// one sentence, and the test fails.

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace txbatch::test {

inline std::string TxbatchBinary() {
  if (const char* bin = std::getenv("TXBATCH_BIN"); bin != nullptr && *bin != '\0') return bin;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path beside = self.parent_path().parent_path().parent_path() / "tools" /
                                         "txbatch";
    if (::access(beside.c_str(), X_OK) == 0) return beside.string();
  }
  ADD_FAILURE() << "no txbatch binary to test: set TXBATCH_BIN, or build tools/txbatch beside "
                   "this test binary (meson test sets it)";
  return "false";  // a command that fails, so the test's own checks fail too
}

// `err` without the note EAL start-up prints when another txbatch polls this one's main-lcore
// CPU ("txbatch: note: CPU 0, …"): a neighbour's, not the command's, output.
inline std::string WithoutCpuNote(std::string err) {
  size_t at;
  while ((at = err.find("txbatch: note: CPU ")) != std::string::npos) {
    const size_t end = err.find('\n', at);
    err.erase(at, end == std::string::npos ? std::string::npos : end - at + 1);
  }
  return err;
}

}  // namespace txbatch::test
