#include "dataplane/telemetry.h"

#include <rte_telemetry.h>

#include <mutex>

namespace txbatch {
namespace {

struct Board {
  std::mutex mu;
  TelemetryDict info{{"state", std::string("starting")}};
  TelemetryDict stats{{"state", std::string("starting")}};
};

Board& TheBoard() {
  // Never destroyed: EAL's telemetry thread may still answer while the process exits.
  static Board* board = new Board;
  return *board;
}

int Reply(const TelemetryDict& dict, rte_tel_data* d) {
  rte_tel_data_start_dict(d);
  for (const auto& [key, value] : dict) {
    if (const auto* u = std::get_if<uint64_t>(&value)) {
      rte_tel_data_add_dict_u64(d, key.c_str(), *u);
    } else if (const auto* i = std::get_if<int64_t>(&value)) {
      // 22.11 has no signed 64-bit dict value: an int where it fits, else its digits.
      if (*i >= INT32_MIN && *i <= INT32_MAX)
        rte_tel_data_add_dict_int(d, key.c_str(), static_cast<int>(*i));
      else
        rte_tel_data_add_dict_string(d, key.c_str(), std::to_string(*i).c_str());
    } else {
      rte_tel_data_add_dict_string(d, key.c_str(), std::get<std::string>(value).c_str());
    }
  }
  return 0;
}

int InfoCommand(const char*, const char*, rte_tel_data* d) {
  Board& b = TheBoard();
  std::lock_guard lock(b.mu);
  return Reply(b.info, d);
}

int StatsCommand(const char*, const char*, rte_tel_data* d) {
  Board& b = TheBoard();
  std::lock_guard lock(b.mu);
  return Reply(b.stats, d);
}

}  // namespace

Status RegisterTelemetry() {
  static std::once_flag once;
  static int rc = 0;
  std::call_once(once, [] {
    rc = rte_telemetry_register_cmd("/txbatch/info", InfoCommand,
                                    "What this txbatch runs: command, configuration, versions. "
                                    "Takes no parameters.");
    if (rc == 0)
      rc = rte_telemetry_register_cmd("/txbatch/stats", StatsCommand,
                                      "This txbatch's counters so far (at_s: when published). "
                                      "Takes no parameters.");
  });
  if (rc != 0)
    return MakeError(-rc,
                     "cannot register txbatch's telemetry commands (/txbatch/info, "
                     "/txbatch/stats) with DPDK telemetry");
  return {};
}

void PublishTelemetryInfo(TelemetryDict info) {
  Board& b = TheBoard();
  std::lock_guard lock(b.mu);
  b.info = std::move(info);
}

void PublishTelemetryStats(TelemetryDict stats) {
  Board& b = TheBoard();
  std::lock_guard lock(b.mu);
  b.stats = std::move(stats);
}

TelemetryDict TelemetryInfo() {
  Board& b = TheBoard();
  std::lock_guard lock(b.mu);
  return b.info;
}

TelemetryDict TelemetryStats() {
  Board& b = TheBoard();
  std::lock_guard lock(b.mu);
  return b.stats;
}

}  // namespace txbatch
