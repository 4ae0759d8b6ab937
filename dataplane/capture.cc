// librte_pcapng is experimental in 22.11 (and the API dpdk-dumpcap itself uses).
#define ALLOW_EXPERIMENTAL_API 1
#include "dataplane/capture.h"

#include <fmt/format.h>
#include <pthread.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_lcore.h>
#include <rte_pcapng.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>

#include "txbatch_config.h"

namespace txbatch {
namespace {

// A frame of `mtu` bytes of L3 with its Ethernet header and a VLAN tag.
unsigned SnapFor(unsigned mtu) { return mtu + 18; }

}  // namespace

std::atomic<Capture*> Capture::active_{nullptr};

uint64_t Capture::PoolBytes(unsigned mtu) {
  // Each object: its rte_mbuf and the data room rte_pcapng_mbuf_size asks for, and the pool's
  // per-object header.
  return uint64_t{kPoolFrames} * (sizeof(rte_mbuf) + rte_pcapng_mbuf_size(SnapFor(mtu)) + 64);
}

Result<PoolPtr> Capture::MakePool(unsigned mtu) {
  // As dpdk-dumpcap sizes its own: the packet block's header goes in the headroom.
  const uint32_t room = rte_pcapng_mbuf_size(SnapFor(mtu));
  rte_mempool* mp = rte_pktmbuf_pool_create_by_ops(
      "txbatch_capture", kPoolFrames, 0, 0, static_cast<uint16_t>(room), SOCKET_ID_ANY, kPoolOps);
  if (mp == nullptr)
    return MakeError(rte_errno, fmt::format("cannot make the capture's pool of {} frames: {}",
                                            kPoolFrames, rte_strerror(rte_errno)));
  return PoolPtr(mp);
}

Result<std::unique_ptr<Capture>> Capture::Start(int fd, PoolPtr pool, unsigned mtu) {
  const unsigned snap = SnapFor(mtu);
  char host[256] = "";
  (void)gethostname(host, sizeof host - 1);
  rte_pcapng_t* out =
      rte_pcapng_fdopen(fd, nullptr, host[0] ? host : nullptr, "txbatch " TXBATCH_VERSION, nullptr);
  if (out == nullptr) {
    const int err = rte_errno ? rte_errno : errno;
    ::close(fd);
    return MakeError(err, fmt::format("cannot start the capture file: {}", std::strerror(err)));
  }
  std::unique_ptr<Capture> c(new Capture(out, std::move(pool), snap));
  active_.store(c.get(), std::memory_order_release);
  return c;
}

Capture::Capture(rte_pcapng* out, PoolPtr pool, unsigned snap)
    : out_(out), pool_(std::move(pool)), snap_(snap), tsc_hz_(rte_get_tsc_hz()) {
  timespec ts{};
  tsc0_ = rte_get_tsc_cycles();
  clock_gettime(CLOCK_REALTIME, &ts);
  ns0_ = static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
  mailbox_.reserve(kPoolFrames);
  uint16_t port = 0;
  RTE_ETH_FOREACH_DEV(port) named_[port] = true;  // as rte_pcapng_fdopen named them
  writer_ = std::thread([this] { Writer(); });
}

void Capture::Stop() {
  if (stopped_) return;
  stopped_ = true;
  active_.store(nullptr, std::memory_order_release);
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  writer_.join();
  // The statistics blocks, on this thread: SIGPIPE held back as the writer holds it (a reader
  // gone is no death), and taken again if a write raised it.
  sigset_t pipe, old;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, &old);
  if (failure().empty()) {
    // The ports the file names (run's are gone by now: each cell removes its own).
    for (uint16_t port = 0; port < RTE_MAX_ETHPORTS; ++port) {
      if (!named_[port]) continue;
      (void)rte_pcapng_write_stats(out_, port,
                                   "txbatch --capture: frames written, and dropped by the "
                                   "capture (its pool or mailbox full)",
                                   0, 0, port_written_[port], port_dropped_[port].load());
    }
  }
  const timespec now{0, 0};
  while (sigtimedwait(&pipe, nullptr, &now) == SIGPIPE) {
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  rte_pcapng_close(out_);  // closes the file descriptor
}

void Capture::CopyForTx(uint16_t port, uint16_t queue, std::span<rte_mbuf* const> frames,
                        std::vector<rte_mbuf*>& copies) {
  const uint64_t now = rte_get_tsc_cycles();
  copies.assign(frames.size(), nullptr);  // null: counted as dropped for what the PMD accepts
  if (port >= RTE_MAX_ETHPORTS || !named_[port]) return;
  for (size_t i = 0; i < frames.size(); ++i) {
    copies[i] =
        rte_pcapng_copy(port, queue, frames[i], pool_.get(), snap_, now, RTE_PCAPNG_DIRECTION_OUT);
    if (copies[i] != nullptr) Stamp(copies[i], now);
  }
}

void Capture::Stamp(rte_mbuf* copy, uint64_t tsc) const {
  // The enhanced packet block's timestamp (pcapng: high and low 32 bits of nanoseconds at bytes
  // 12 and 16), from this capture's own TSC-to-wall-clock mapping: Debian's 22.11.11
  // rte_pcapng dated every frame here in the year 2244. Whole seconds apart, then the rest
  // (below tsc_hz_, so times 1e9 stays within 64 bits).
  const uint64_t delta = tsc - tsc0_;
  const uint64_t ns =
      ns0_ + delta / tsc_hz_ * 1000000000u + delta % tsc_hz_ * 1000000000u / tsc_hz_;
  auto* block = rte_pktmbuf_mtod(copy, uint8_t*);
  const uint32_t hi = static_cast<uint32_t>(ns >> 32), lo = static_cast<uint32_t>(ns);
  std::memcpy(block + 12, &hi, sizeof hi);
  std::memcpy(block + 16, &lo, sizeof lo);
}

void Capture::Sent(uint16_t port, std::vector<rte_mbuf*>& copies, unsigned accepted) {
  unsigned kept = 0;
  for (unsigned i = 0; i < copies.size(); ++i) {
    if (i >= accepted) {
      rte_pktmbuf_free(copies[i]);  // the PMD did not take it (null is a no-op)
    } else if (copies[i] == nullptr) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      if (port < RTE_MAX_ETHPORTS) port_dropped_[port].fetch_add(1, std::memory_order_relaxed);
    } else {
      copies[kept++] = copies[i];
    }
  }
  Post(copies.data(), kept);
  copies.clear();
}

void Capture::Received(uint16_t port, uint16_t queue, std::span<rte_mbuf* const> frames) {
  const uint64_t now = rte_get_tsc_cycles();
  if (port >= RTE_MAX_ETHPORTS || !named_[port]) {
    dropped_.fetch_add(frames.size(), std::memory_order_relaxed);
    if (port < RTE_MAX_ETHPORTS)
      port_dropped_[port].fetch_add(frames.size(), std::memory_order_relaxed);
    return;
  }
  std::array<rte_mbuf*, 64> copies;
  for (size_t at = 0; at < frames.size(); at += copies.size()) {
    const size_t n = std::min(copies.size(), frames.size() - at);
    unsigned kept = 0;
    for (size_t i = 0; i < n; ++i) {
      rte_mbuf* c = rte_pcapng_copy(port, queue, frames[at + i], pool_.get(), snap_, now,
                                    RTE_PCAPNG_DIRECTION_IN);
      if (c == nullptr) {
        dropped_.fetch_add(1, std::memory_order_relaxed);
        if (port < RTE_MAX_ETHPORTS) port_dropped_[port].fetch_add(1, std::memory_order_relaxed);
      } else {
        Stamp(c, now);
        copies[kept++] = c;
      }
    }
    Post(copies.data(), kept);
  }
}

void Capture::Post(rte_mbuf* const* copies, unsigned n) {
  if (n == 0) return;
  unsigned taken = 0;
  {
    std::lock_guard lock(mu_);
    if (!stop_) {
      taken = std::min<unsigned>(n, kPoolFrames - std::min<size_t>(mailbox_.size(), kPoolFrames));
      mailbox_.insert(mailbox_.end(), copies, copies + taken);
    }
  }
  if (taken > 0) wake_.notify_one();
  captured_.fetch_add(taken, std::memory_order_relaxed);
  for (unsigned i = taken; i < n; ++i) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    if (copies[i]->port < RTE_MAX_ETHPORTS)
      port_dropped_[copies[i]->port].fetch_add(1, std::memory_order_relaxed);
    rte_pktmbuf_free(copies[i]);
  }
}

void Capture::Writer() {
  pthread_setname_np(pthread_self(), "txb-capture");
  // Any of EAL's CPUs, not only the main lcore's it inherited from the thread that made it: there
  // a bridge or sink busy-polls its ports, and would share its CPU with every write.
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  unsigned lcore;
  RTE_LCORE_FOREACH(lcore) {
    rte_cpuset_t s = rte_lcore_cpuset(lcore);
    CPU_OR(&cpus, &cpus, &s);
  }
  if (CPU_COUNT(&cpus) > 0) pthread_setaffinity_np(pthread_self(), sizeof cpus, &cpus);
  // A reader that went away (`--capture - | tshark -c 10`) is EPIPE, said at the end, not a
  // SIGPIPE that kills the process and leaves EAL's files behind.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  std::vector<rte_mbuf*> batch;
  batch.reserve(kPoolFrames);
  for (;;) {
    bool stopping;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stop_ || !mailbox_.empty(); });
      batch.swap(mailbox_);
      stopping = stop_;
    }
    for (size_t at = 0; at < batch.size(); at += 256) {
      const auto n = static_cast<uint16_t>(std::min<size_t>(256, batch.size() - at));
      bool ok;
      {
        std::lock_guard lock(mu_);
        ok = failure_.empty();
      }
      if (ok && rte_pcapng_write_packets(out_, batch.data() + at, n) < 0) {
        std::lock_guard lock(mu_);
        failure_ = std::strerror(rte_errno);
        ok = false;
      }
      for (uint16_t i = 0; i < n; ++i) {
        rte_mbuf* m = batch[at + i];
        if (ok && m->port < RTE_MAX_ETHPORTS) ++port_written_[m->port];
        rte_pktmbuf_free(m);
      }
      if (ok) written_.fetch_add(n, std::memory_order_relaxed);
    }
    batch.clear();
    if (stopping) {
      std::lock_guard lock(mu_);
      if (mailbox_.empty()) return;
    }
  }
}

Capture::Counts Capture::counts() const {
  return {captured_.load(), dropped_.load(), written_.load()};
}

std::string Capture::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

}  // namespace txbatch
