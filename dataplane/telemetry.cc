#include "dataplane/telemetry.h"

#include <fmt/format.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_memzone.h>
#include <rte_telemetry.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <optional>
#include <vector>

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

// DPDK 22.11's own /eal/heap_info and /eal/memzone_info index arrays with the client's number
// unchecked: `/eal/heap_info,999999`, `,-5`, `/eal/memzone_info,2560` killed the process (a lab
// bridge with its books), `/eal/heap_info,32` spun the telemetry thread. Registered after them
// under the same names, these are found first (22.11 inserts a name before its equal, and the
// lookup takes the first); they answer the same keys from public APIs, and null for a number
// that names nothing.

// `params` as a whole decimal number below `limit`, else nothing.
std::optional<unsigned> IndexParam(const char* params, unsigned limit) {
  if (params == nullptr || *params == '\0') return std::nullopt;
  uint64_t v = 0;
  for (const char* p = params; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') return std::nullopt;
    v = v * 10 + static_cast<unsigned>(*p - '0');
    if (v >= limit) return std::nullopt;
  }
  return static_cast<unsigned>(v);
}

// Internal heap i is socket index i's (22.11's malloc_heap_init); txbatch makes no external heap.
int HeapInfoCommand(const char*, const char* params, rte_tel_data* d) {
  const std::optional<unsigned> id = IndexParam(params, rte_socket_count());
  if (!id) return -EINVAL;
  const int socket = rte_socket_id_by_idx(*id);
  rte_malloc_socket_stats st{};
  if (socket < 0 || rte_malloc_get_socket_stats(socket, &st) != 0) return -EINVAL;
  char name[32];
  std::snprintf(name, sizeof name, "socket_%d", socket);
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_int(d, "Heap_id", static_cast<int>(*id));
  rte_tel_data_add_dict_string(d, "Name", name);
  rte_tel_data_add_dict_u64(d, "Heap_size", st.heap_totalsz_bytes);
  rte_tel_data_add_dict_u64(d, "Free_size", st.heap_freesz_bytes);
  rte_tel_data_add_dict_u64(d, "Alloc_size", st.heap_allocsz_bytes);
  rte_tel_data_add_dict_u64(d, "Greatest_free_size", st.greatest_free_size);
  rte_tel_data_add_dict_u64(d, "Alloc_count", st.alloc_count);
  rte_tel_data_add_dict_u64(d, "Free_count", st.free_count);
  return 0;
}

// The memzones in use, in the order rte_memzone_walk visits them: /eal/memzone_list's numbers
// and /eal/memzone_info's index are positions in it (both txbatch's, so they agree).
std::vector<const rte_memzone*> Memzones() {
  std::vector<const rte_memzone*> zones;
  zones.reserve(64);
  rte_memzone_walk(
      [](const rte_memzone* mz, void* arg) {
        static_cast<std::vector<const rte_memzone*>*>(arg)->push_back(mz);
      },
      &zones);
  return zones;
}

int MemzoneListCommand(const char*, const char*, rte_tel_data* d) {
  rte_tel_data_start_array(d, RTE_TEL_INT_VAL);
  const size_t n = Memzones().size();
  for (size_t i = 0; i < n; ++i) rte_tel_data_add_array_int(d, static_cast<int>(i));
  return 0;
}

int MemzoneInfoCommand(const char*, const char* params, rte_tel_data* d) {
  const std::vector<const rte_memzone*> zones = Memzones();
  const std::optional<unsigned> i = IndexParam(params, static_cast<unsigned>(zones.size()));
  if (!i) return -EINVAL;
  const rte_memzone* mz = zones[*i];
  char addr[32];
  std::snprintf(addr, sizeof addr, "%p", mz->addr);
  rte_tel_data_start_dict(d);
  rte_tel_data_add_dict_int(d, "Zone", static_cast<int>(*i));
  rte_tel_data_add_dict_string(d, "Name", mz->name);
  rte_tel_data_add_dict_u64(d, "Length", mz->len);
  rte_tel_data_add_dict_string(d, "Address", addr);
  rte_tel_data_add_dict_int(d, "Socket", mz->socket_id);
  rte_tel_data_add_dict_int(d, "Flags", static_cast<int>(mz->flags));
  rte_tel_data_add_dict_u64(d, "Hugepage_size", mz->hugepage_sz);
  return 0;
}

int StatsCommand(const char*, const char*, rte_tel_data* d) { return Reply(TelemetryStats(), d); }

}  // namespace

TelemetryFit FitTelemetryString(const std::string& text, size_t max_bytes) {
  constexpr size_t kPiece = RTE_TEL_MAX_STRING_LEN - 1;
  // Bytes of `n` bytes with `escaped` of them written as two (a quote, a backslash, a control
  // character), in pieces: each piece quoted and followed by a comma (a piece may come up to 3
  // bytes short of kPiece where a UTF-8 character is not cut: counted as 4), and the brackets.
  const auto json_bytes = [](size_t n, size_t escaped) {
    return n + escaped + (n / (kPiece - 3) + 1) * 3 + 2;
  };
  TelemetryFit fit;
  size_t escaped = 0, end = 0;  // the words that fit: text[0, end)
  for (size_t at = 0; at <= text.size();) {
    size_t next = text.find(' ', at);
    if (next == std::string::npos) next = text.size();
    size_t word_escaped = 0;
    for (size_t i = at; i < next; ++i) {
      const unsigned char c = static_cast<unsigned char>(text[i]);
      word_escaped += c == '"' || c == '\\' || c < 0x20;
    }
    if (json_bytes(next, escaped + word_escaped) > max_bytes) {  // this word and those after
      fit.words_left_out = 1 + static_cast<uint64_t>(std::count(
                                   text.begin() + static_cast<ptrdiff_t>(at), text.end(), ' '));
      break;
    }
    escaped += word_escaped;
    end = next;
    at = next + 1;
  }
  fit.text = text.substr(0, end);
  return fit;
}

namespace {

// txbatch's commands, and DPDK's /eal ones it registers in front of DPDK's own, which check no
// bounds (above).
struct TelemetryCommand {
  const char* path;
  telemetry_cb handler;
  const char* help;
};
constexpr TelemetryCommand kCommands[] = {
    {"/txbatch/info", InfoCommand,
     "What this txbatch runs: command, configuration, versions. Takes no parameters."},
    {"/txbatch/stats", StatsCommand,
     "This txbatch's counters so far (at_s: when published). Takes no parameters."},
    {"/eal/heap_info", HeapInfoCommand,
     "Returns malloc heap stats. Parameters: int heap_id (as /eal/heap_list gives; txbatch's, "
     "bounds-checked)"},
    {"/eal/memzone_list", MemzoneListCommand,
     "Returns the memzones' indexes (txbatch's: positions among those in use). Takes no "
     "parameters"},
    {"/eal/memzone_info", MemzoneInfoCommand,
     "Returns a memzone's info. Parameters: int mz_id (as /eal/memzone_list gives; txbatch's, "
     "bounds-checked)"},
};

}  // namespace

Status RegisterTelemetry() {
  static std::once_flag once;
  static int rc = 0;
  std::call_once(once, [] {
    for (const TelemetryCommand& c : kCommands)
      if (rc == 0) rc = rte_telemetry_register_cmd(c.path, c.handler, c.help);
  });
  if (rc != 0) {
    std::string paths;
    for (const TelemetryCommand& c : kCommands)
      paths += fmt::format("{}{}", paths.empty() ? "" : ", ", c.path);
    return MakeError(-rc, fmt::format("cannot register txbatch's telemetry commands ({}) with DPDK "
                                      "telemetry",
                                      paths));
  }
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
