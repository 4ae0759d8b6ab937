#pragma once
// The txbatch binary run as a user runs it, for the unit suite's command-line cases: its exit
// status, standard output and standard error (without a neighbour txbatch's CPU note).

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/txbatch_bin.h"

namespace txbatch::test {

struct Outcome {
  int status;
  std::string out, err;
};

// `args` go through the shell (quote as a user would).
inline Outcome RunTxbatch(const std::string& args) {
  const std::string dir = ::testing::TempDir(), pid = std::to_string(::getpid());
  const std::string out = dir + "/cli_out_" + pid + ".txt", err = dir + "/cli_err_" + pid + ".txt";
  const std::string cmd = TxbatchBinary() + " " + args + " >" + out + " 2>" + err;
  const int rc = std::system(cmd.c_str());
  const auto slurp = [](const std::string& path) {
    std::string s;
    if (FILE* f = std::fopen(path.c_str(), "r")) {
      char buf[4096];
      size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
      std::fclose(f);
    }
    return s;
  };
  // Another txbatch polling this one's CPU adds a note to stderr: not the command's output.
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, slurp(out), WithoutCpuNote(slurp(err))};
}

}  // namespace txbatch::test
