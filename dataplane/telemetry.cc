#include "dataplane/telemetry.h"

#include <rte_telemetry.h>

#include <algorithm>
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

// A string longer than a dict value holds (22.11 cuts it at RTE_TEL_MAX_STRING_LEN - 1 bytes)
// goes as an array of pieces that do, cut between UTF-8 characters: a client joins them.
void AddString(rte_tel_data* d, const std::string& key, const std::string& value) {
  constexpr size_t kPiece = RTE_TEL_MAX_STRING_LEN - 1;
  if (value.size() <= kPiece) {
    rte_tel_data_add_dict_string(d, key.c_str(), value.c_str());
    return;
  }
  rte_tel_data* pieces = rte_tel_data_alloc();
  if (pieces == nullptr) return;
  rte_tel_data_start_array(pieces, RTE_TEL_STRING_VAL);
  for (size_t at = 0; at < value.size();) {
    size_t n = std::min(kPiece, value.size() - at);
    while (at + n < value.size() && n > 1 &&
           (static_cast<unsigned char>(value[at + n]) & 0xC0) == 0x80)
      --n;  // not inside a character
    rte_tel_data_add_array_string(pieces, value.substr(at, n).c_str());
    at += n;
  }
  if (rte_tel_data_add_dict_container(d, key.c_str(), pieces, 0) != 0) rte_tel_data_free(pieces);
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
      AddString(d, key, std::get<std::string>(value));
    }
  }
  return 0;
}

int InfoCommand(const char*, const char*, rte_tel_data* d) { return Reply(TelemetryInfo(), d); }

int StatsCommand(const char*, const char*, rte_tel_data* d) { return Reply(TelemetryStats(), d); }

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

void PublishTelemetryStats(TelemetryDict stats, bool wait) {
  Board& b = TheBoard();
  std::unique_lock lock(b.mu, std::defer_lock);
  if (wait) {
    lock.lock();
  } else if (!lock.try_lock()) {
    return;  // the telemetry thread is copying the last one: the next publish comes soon
  }
  b.stats.swap(stats);
  lock.unlock();  // the old snapshot is freed outside
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
