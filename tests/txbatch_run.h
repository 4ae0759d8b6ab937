#pragma once
// Runs the txbatch binary under test (tests/txbatch_bin.h) to its end and reads back what it
// printed and the JSON document it wrote: one way to do it for every tier that runs the whole
// binary (tests/e2e, tests/system).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace txbatch::test {

struct TxbatchRun {
  int status = -1;
  std::string out, err;
  nlohmann::json doc;  // the --json file, or null when none was written
};

// `args` go after "txbatch", through bash (quote as a user would), and nothing else: the
// exit status and what it printed (without a neighbour txbatch's CPU note on stderr).
// Its standard output and error go to files `stdout` and `stderr` in `dir` (default: the test's
// temp dir), removed after.
TxbatchRun RunTxbatchAsGiven(const std::string& args, const std::string& dir = {});

// `args` go after "txbatch", through the shell (quote as a user would); a --json file in the
// test's temp dir is added (before EAL arguments after " -- ", which must stay last), and `run`
// gets --rounds 1 unless `args` set it (one record per cell); `report` gets no --json.
TxbatchRun RunTxbatch(const std::string& args);

// What a run's "capture: N frames written to FILE (M more dropped by the capture)" line says (the
// part in brackets only where the capture dropped frames); nullopt where `out` has no such line.
struct CaptureSaid {
  uint64_t written = 0, dropped = 0;
};
std::optional<CaptureSaid> CaptureLine(const std::string& out);

}  // namespace txbatch::test
