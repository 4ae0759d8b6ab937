#pragma once
// txbatch's own DPDK telemetry commands, beside EAL's /ethdev/* and /eal/*, so a running
// command can be watched with the tool a DPDK user already has: `dpdk-telemetry.py -f <file
// prefix>` (the header prints the prefix).
//   /txbatch/info   what runs: the command, its configuration, the versions, the file prefix
//   /txbatch/stats  its counters so far, as the command last published them (`at_s` says when)
// The handlers run on EAL's telemetry thread. The command publishes flat snapshots (DPDK 22.11's
// telemetry nests arrays only: a dict's values are numbers and strings) under a mutex, from its
// control loop at most every kTelemetryPublishS — never a data-path read from another thread.

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "base/error.h"

namespace txbatch {

// Keys: letters, digits, '_' and '/' only (rte_tel_data_add_dict_*); a number that is not a
// whole one goes as a string ("1.2345").
using TelemetryValue = std::variant<uint64_t, int64_t, std::string>;
using TelemetryDict = std::vector<std::pair<std::string, TelemetryValue>>;

// How often a command's loop publishes its counters: fresh enough to watch, rare enough to cost
// nothing (a snapshot is a few dozen entries).
inline constexpr double kTelemetryPublishS = 0.1;

// Registers /txbatch/info and /txbatch/stats, once per process (DPDK cannot take a command back;
// later calls do nothing). Call after Eal::Start. Before anything is published they answer
// {"state": "starting"}.
Status RegisterTelemetry();

// Replace what /txbatch/info and /txbatch/stats answer. Thread-safe.
void PublishTelemetryInfo(TelemetryDict info);
void PublishTelemetryStats(TelemetryDict stats);

// What /txbatch/info or /txbatch/stats would answer now (for tests without a socket).
TelemetryDict TelemetryInfo();
TelemetryDict TelemetryStats();

}  // namespace txbatch
