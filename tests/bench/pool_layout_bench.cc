// Shows the no-hugepage mempool layout trap (ENV-NOTES, "Measurement trap with --no-huge") and
// its fix: a bare alloc -> rte_eth_tx_burst loop on net_null, timed in TSC cycles per packet.
//
// With --no-huge, rte_pktmbuf_pool_create keeps every mbuf inside one 4 KB page, so all mbuf
// headers share an address modulo 4096 and one L1 set; burst 32 then costs ~3x what it costs
// with hugepages. PoolLayout::kSpread lets objects straddle pages and should close that gap.
//
// Usage: pool_layout_bench --layout spread|default --burst N --iterations N -- EAL-ARGS...
// Prints one line: layout=spread burst=32 mode=no-huge cycles_per_pkt=15.8 l1_sets=32

#include <fmt/format.h>
#include <rte_cycles.h>
#include <rte_dev.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dataplane/eal.h"
#include "dataplane/mempool.h"

namespace txbatch {
namespace {

// Same pool shape as the txbatch default, so the result transfers to the real runs.
inline constexpr unsigned kPoolSize = 8191;
inline constexpr unsigned kMtu = 1500;
inline constexpr unsigned kMaxBurst = 512;
// The vdev is hot-plugged rather than given with --vdev so the EAL arguments stay the caller's.
inline constexpr char kVdevName[] = "net_null0";
inline constexpr char kVdevArgs[] = "net_null0,no-rx=1";
inline constexpr uint16_t kRingSize = 1024;

struct Options {
  PoolLayout layout = PoolLayout::kSpread;
  unsigned burst = 32;
  uint64_t iterations = 1'000'000;
  std::vector<std::string> eal_args;  // everything after "--"
};

const char* LayoutName(PoolLayout layout) {
  return layout == PoolLayout::kSpread ? "spread" : "default";
}

void Usage(const char* prog) {
  fmt::print(stderr,
             "usage: {} --layout spread|default --burst N --iterations N -- EAL-ARGS...\n"
             "  --burst       packets per rte_eth_tx_burst, 1..{} (default 32)\n"
             "  --iterations  timed bursts after the warm-up (default 1000000)\n",
             prog, kMaxBurst);
}

std::optional<uint64_t> ParseCount(std::string_view s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const std::string copy(s);
  errno = 0;
  const unsigned long long v = std::strtoull(copy.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || v == 0 || copy[0] == '-') return std::nullopt;
  return v;
}

std::optional<Options> ParseOptions(int argc, char** argv) {
  Options opts;
  int i = 1;
  for (; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (i + 1 >= argc) {
      fmt::print(stderr, "pool_layout_bench: option '{}' needs a value or is unknown\n", arg);
      return std::nullopt;
    }
    const std::string_view value = argv[++i];
    if (arg == "--layout") {
      if (value == "spread") {
        opts.layout = PoolLayout::kSpread;
      } else if (value == "default") {
        opts.layout = PoolLayout::kDpdkDefault;
      } else {
        fmt::print(stderr, "pool_layout_bench: --layout must be spread or default, not '{}'\n",
                   value);
        return std::nullopt;
      }
    } else if (arg == "--burst") {
      auto v = ParseCount(value);
      if (!v || *v > kMaxBurst) {
        fmt::print(stderr, "pool_layout_bench: --burst must be 1..{}, not '{}'\n", kMaxBurst,
                   value);
        return std::nullopt;
      }
      opts.burst = static_cast<unsigned>(*v);
    } else if (arg == "--iterations") {
      auto v = ParseCount(value);
      if (!v) {
        fmt::print(stderr,
                   "pool_layout_bench: --iterations must be a positive integer, not "
                   "'{}'\n",
                   value);
        return std::nullopt;
      }
      opts.iterations = *v;
    } else {
      fmt::print(stderr, "pool_layout_bench: unknown option '{}'\n", arg);
      return std::nullopt;
    }
  }
  for (; i < argc; ++i) opts.eal_args.emplace_back(argv[i]);
  return opts;
}

// Stops and closes the port on every exit path, before the pool it references is freed (the
// guard is declared after the pool, so it is destroyed first).
class PortGuard {
 public:
  explicit PortGuard(uint16_t port) : port_(port) {}
  ~PortGuard() { Close(); }
  PortGuard(const PortGuard&) = delete;
  PortGuard& operator=(const PortGuard&) = delete;
  void MarkStarted() { started_ = true; }
  void Close() {
    if (closed_) return;
    closed_ = true;
    if (started_) rte_eth_dev_stop(port_);
    rte_eth_dev_close(port_);
  }

 private:
  uint16_t port_;
  bool started_ = false;
  bool closed_ = false;
};

Status SetUpPort(uint16_t port, rte_mempool* pool) {
  rte_eth_conf conf{};
  if (int rc = rte_eth_dev_configure(port, 1, 1, &conf); rc != 0)
    return MakeError(-rc, fmt::format("cannot configure {}: {}", kVdevName, rte_strerror(-rc)));
  const int socket = rte_eth_dev_socket_id(port);
  const unsigned socket_id = socket < 0 ? SOCKET_ID_ANY : static_cast<unsigned>(socket);
  // ethdev refuses to start without an RX queue; with no-rx=1 it never hands out an mbuf.
  if (int rc = rte_eth_rx_queue_setup(port, 0, kRingSize, socket_id, nullptr, pool); rc != 0)
    return MakeError(-rc, fmt::format("cannot set up RX queue: {}", rte_strerror(-rc)));
  if (int rc = rte_eth_tx_queue_setup(port, 0, kRingSize, socket_id, nullptr); rc != 0)
    return MakeError(-rc, fmt::format("cannot set up TX queue: {}", rte_strerror(-rc)));
  if (int rc = rte_eth_dev_start(port); rc != 0)
    return MakeError(-rc, fmt::format("cannot start {}: {}", kVdevName, rte_strerror(-rc)));
  return {};
}

struct LoopResult {
  uint64_t cycles = 0;
  uint64_t packets = 0;         // allocated and handed to the driver
  uint64_t alloc_failures = 0;  // bursts skipped: the pool ran dry (should never happen)
};

// The loop under test. Packets the driver refuses are freed here, so the pool never leaks.
LoopResult TxLoop(uint16_t port, rte_mempool* pool, unsigned burst, uint64_t iterations) {
  rte_mbuf* bufs[kMaxBurst];
  LoopResult r;
  const uint64_t start = rte_rdtsc();
  for (uint64_t i = 0; i < iterations; ++i) {
    if (rte_pktmbuf_alloc_bulk(pool, bufs, burst) != 0) {
      ++r.alloc_failures;
      continue;
    }
    const uint16_t sent = rte_eth_tx_burst(port, 0, bufs, static_cast<uint16_t>(burst));
    if (sent < burst) rte_pktmbuf_free_bulk(bufs + sent, burst - sent);
    r.packets += burst;
  }
  r.cycles = rte_rdtsc() - start;
  return r;
}

int RunBench(const Options& opts) {
  if (int rc = rte_dev_probe(kVdevArgs); rc != 0) {
    fmt::print(stderr, "pool_layout_bench: cannot hot-plug '{}': {}\n", kVdevArgs,
               rte_strerror(-rc));
    return 1;
  }
  uint16_t port = 0;
  if (int rc = rte_eth_dev_get_port_by_name(kVdevName, &port); rc != 0) {
    fmt::print(stderr, "pool_layout_bench: no port for '{}': {}\n", kVdevName, rte_strerror(-rc));
    return 1;
  }
  auto pool = CreatePacketPool("bench_pool", kPoolSize, kMtu, opts.layout);
  if (!pool) {
    fmt::print(stderr, "pool_layout_bench: {}\n", pool.error().message);
    return 1;
  }
  rte_mempool* mp = pool->get();
  // How many L1 sets a burst's headers land in: the mechanism behind the trap, shown next to the
  // cost. Measured before the port exists so no mbuf is in flight.
  const unsigned l1_sets = DistinctL1Sets(mp, opts.burst);

  PortGuard guard(port);
  if (Status st = SetUpPort(port, mp); !st) {
    fmt::print(stderr, "pool_layout_bench: {}\n", st.error().message);
    return 1;
  }
  guard.MarkStarted();

  // Warm-up fills the per-lcore mempool cache, the TLB and the branch predictors.
  const uint64_t warmup = std::max<uint64_t>(opts.iterations / 10, 1000);
  TxLoop(port, mp, opts.burst, warmup);
  const LoopResult r = TxLoop(port, mp, opts.burst, opts.iterations);

  guard.Close();
  // A leak here would mean the driver or the loop kept mbufs: the numbers would be suspect.
  if (unsigned in_use = rte_mempool_in_use_count(mp); in_use != 0) {
    fmt::print(stderr, "pool_layout_bench: {} mbufs still in use after closing the port\n", in_use);
    return 1;
  }
  if (r.alloc_failures != 0 || r.packets == 0) {
    fmt::print(stderr, "pool_layout_bench: {} of {} bursts found the pool empty\n",
               r.alloc_failures, opts.iterations);
    return 1;
  }
  fmt::print("layout={} burst={} mode={} cycles_per_pkt={:.1f} l1_sets={}\n",
             LayoutName(opts.layout), opts.burst, rte_eal_has_hugepages() ? "hugepages" : "no-huge",
             static_cast<double>(r.cycles) / static_cast<double>(r.packets), l1_sets);
  return 0;
}

}  // namespace
}  // namespace txbatch

int main(int argc, char** argv) {
  auto opts = txbatch::ParseOptions(argc, argv);
  if (!opts) {
    txbatch::Usage(argv[0]);
    return 2;
  }
  // With EAL arguments given, PlanEal uses them as they are; without, it picks txbatch's defaults.
  auto plan = txbatch::PlanEal(txbatch::PoolBytes(txbatch::kPoolSize, txbatch::kMtu),
                               {opts->eal_args, {}}, txbatch::EalMemory::kAuto);
  if (!plan) {
    fmt::print(stderr, "pool_layout_bench: {}\n", plan.error().message);
    return 1;
  }
  // Eal's destructor runs rte_eal_cleanup and removes the runtime directory it leaves behind
  // (empty only with --no-telemetry, which txbatch's defaults and pool_layout.sh pass); it outlives
  // everything RunBench creates.
  auto eal = txbatch::Eal::Start(*plan);
  if (!eal) {
    fmt::print(stderr, "pool_layout_bench: {}\n", eal.error().message);
    return 1;
  }
  return txbatch::RunBench(*opts);
}
