#pragma once
// txbatch's own DPDK telemetry commands, beside EAL's /ethdev/* and /eal/*, so a running
// command can be watched with the tool a DPDK user already has: `dpdk-telemetry.py -f <file
// prefix>` (the header prints the prefix).
//   /txbatch/info   what runs: the command, its configuration, the versions, the file prefix
//   /txbatch/stats  its counters so far, as the command last published them (`at_s` says when)
// The handlers run on EAL's telemetry thread and copy the last snapshot under a mutex. The
// command publishes flat snapshots (DPDK 22.11's dicts hold numbers, strings and arrays, no
// dicts) from its control loop at most every kTelemetryPublishS — never a data-path read from
// another thread.

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "base/error.h"

namespace txbatch {

// Keys: letters, digits, '_' and '/' only (rte_tel_data_add_dict_*); a number that is not a
// whole one goes as a string ("1.2345"); a string longer than 127 bytes as an array of pieces.
using TelemetryValue = std::variant<uint64_t, int64_t, std::string>;
using TelemetryDict = std::vector<std::pair<std::string, TelemetryValue>>;

// How often a command's loop publishes its counters: fresh enough to watch, rare enough to cost
// nothing (a snapshot is a few dozen entries).
inline constexpr double kTelemetryPublishS = 0.1;

// DPDK 22.11's reply buffer for a telemetry command (lib/telemetry/telemetry.c MAX_OUTPUT_LEN):
// what does not fit is left out without a mark — a value too long for what is left of it drops
// its key, an array drops the pieces that do not fit and takes later shorter ones.
inline constexpr size_t kTelemetryReplyBytes = 16 * 1024;
// What of that a command line may take in /txbatch/info: the other keys (pid, versions, counts)
// need a few hundred bytes; this leaves them 4 KB.
inline constexpr size_t kTelemetryCommandLineBytes = 12 * 1024;

// `text`'s space-separated words from the first, as many as fit `max_bytes` of a reply once
// escaped as DPDK writes JSON and cut into pieces (AddString's arrays), and how many words were
// left out (0: all of it).
struct TelemetryFit {
  std::string text;
  uint64_t words_left_out = 0;
};
TelemetryFit FitTelemetryString(const std::string& text, size_t max_bytes);

// Registers /txbatch/info and /txbatch/stats, once per process (DPDK cannot take a command back;
// later calls do nothing). Call after Eal::Start. Before anything is published they answer
// {"state": "starting"}.
Status RegisterTelemetry();

// Replace what /txbatch/info and /txbatch/stats answer. Thread-safe. A loop that forwards or
// measures publishes with `wait` false: where the telemetry thread holds the board (copying the
// last snapshot for a client) it skips this one rather than wait on a thread the scheduler may
// have preempted.
void PublishTelemetryInfo(TelemetryDict info);
void PublishTelemetryStats(TelemetryDict stats, bool wait = true);

// What /txbatch/info or /txbatch/stats would answer now (for tests without a socket).
TelemetryDict TelemetryInfo();
TelemetryDict TelemetryStats();

}  // namespace txbatch
