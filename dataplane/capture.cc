// librte_pcapng is experimental in 22.11 (and the API dpdk-dumpcap itself uses).
#define ALLOW_EXPERIMENTAL_API 1
#include "dataplane/capture.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <pthread.h>
#include <rte_cycles.h>
#include <rte_errno.h>
#include <rte_pcapng.h>
#include <rte_ring.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <ctime>
#include <thread>

#include "base/output_file.h"
#include "dataplane/eal.h"
#include "txbatch_config.h"

namespace txbatch {
namespace {

// How long the writer may take nothing off the ring after a stop signal before a stalled
// reader's share is discarded (WaitForWriter): output_file's grace for the same case.
constexpr auto kStalledCaptureS = std::chrono::seconds(1);

// A frame of `mtu` bytes of L3 with its Ethernet header and a VLAN tag.
unsigned SnapFor(unsigned mtu) { return mtu + 18; }

// A copy's data room: what rte_pcapng_mbuf_size asks for a frame of `snap`, and the 12-byte
// RSS-hash option 22.11's rte_pcapng_copy appends to a frame a NIC hashed, which that size
// leaves out (without it every full-size frame of such a NIC fails to copy).
uint32_t RoomFor(unsigned snap) { return rte_pcapng_mbuf_size(snap) + 12; }

// Runs `f` with SIGPIPE held back, and takes back a SIGPIPE it raised: a write on the control
// thread to a reader that went away fails with EPIPE instead of ending the process. errno is
// f's: sigtimedwait, finding no SIGPIPE, sets EAGAIN (a capture on /dev/full said "Resource
// temporarily unavailable" for ENOSPC).
template <class F>
auto WithoutSigpipe(F&& f) {
  sigset_t pipe, old;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, &old);
  auto r = f();
  const int err = errno;
  const timespec now{0, 0};
  while (sigtimedwait(&pipe, nullptr, &now) == SIGPIPE) {
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = err;
  return r;
}

// Whether a capture written to `fd` may be cut back to its last whole block where a write
// fails: a regular file, not appended to, and not the file standard output or error is (a
// `--capture -` into `> f 2>&1` shares it with what else goes there).
bool MayTruncate(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (::fcntl(fd, F_GETFL) & O_APPEND) != 0)
    return false;
  for (const int shared : {STDOUT_FILENO, STDERR_FILENO}) {
    struct stat o {};
    if (::fstat(shared, &o) == 0 && o.st_dev == st.st_dev && o.st_ino == st.st_ino) return false;
  }
  return true;
}

}  // namespace

std::atomic<Capture*> Capture::active_{nullptr};

uint64_t Capture::PoolBytes(unsigned mtu) {
  // Each object: its rte_mbuf, its data room and the pool's per-object header (two objects may
  // share a 4 KiB page, not cross one: a page each pair); and the ring of pointers.
  return uint64_t{kPoolFrames} * (sizeof(rte_mbuf) + RoomFor(SnapFor(mtu)) + 64) +
         uint64_t{kPoolFrames} * 2 * sizeof(void*) + (1u << 20);
}

Result<PoolPtr> Capture::MakePool(unsigned mtu) {
  // As dpdk-dumpcap sizes its own: the packet block's header goes in the headroom.
  const uint32_t room = RoomFor(SnapFor(mtu));
  rte_mempool* mp = rte_pktmbuf_pool_create_by_ops(
      "txbatch_capture", kPoolFrames, 0, 0, static_cast<uint16_t>(room), SOCKET_ID_ANY, kPoolOps);
  if (mp == nullptr)
    return MakeError(rte_errno, fmt::format("cannot make the capture's pool of {} frames: {}",
                                            kPoolFrames, rte_strerror(rte_errno)));
  return PoolPtr(mp);
}

Result<std::unique_ptr<Capture>> Capture::Start(int fd, PoolPtr pool, unsigned mtu) {
  const unsigned snap = SnapFor(mtu);
  rte_ring* ring = rte_ring_create("txbatch_capture", kPoolFrames, SOCKET_ID_ANY,
                                   RING_F_SC_DEQ | RING_F_EXACT_SZ);
  if (ring == nullptr) {
    ::close(fd);
    return MakeError(rte_errno,
                     fmt::format("cannot make the capture's ring: {}", rte_strerror(rte_errno)));
  }
  char host[256] = "";
  (void)gethostname(host, sizeof host - 1);
  rte_errno = 0;
  errno = 0;
  // The section and interface blocks are written here, on this thread.
  rte_pcapng_t* out = WithoutSigpipe([&] {
    return rte_pcapng_fdopen(fd, nullptr, host[0] ? host : nullptr, "txbatch " TXBATCH_VERSION,
                             nullptr);
  });
  if (out == nullptr) {
    const int err = rte_errno ? rte_errno : errno ? errno : EIO;
    ::close(fd);
    rte_ring_free(ring);
    return MakeError(err, fmt::format("cannot write its first blocks (the section header, an "
                                      "interface block per port): {}",
                                      std::strerror(err)));
  }
  std::unique_ptr<Capture> c(new Capture(out, fd, std::move(pool), ring, snap));
  active_.store(c.get(), std::memory_order_release);
  return c;
}

Capture::Capture(rte_pcapng* out, int fd, PoolPtr pool, rte_ring* ring, unsigned snap)
    : out_(out),
      fd_(fd),
      pool_(std::move(pool)),
      ring_(ring),
      snap_(snap),
      tsc_hz_(rte_get_tsc_hz()) {
  timespec ts{};
  tsc0_ = rte_get_tsc_cycles();
  clock_gettime(CLOCK_REALTIME, &ts);
  ns0_ = static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
  uint16_t port = 0;
  RTE_ETH_FOREACH_DEV(port) named_[port] = true;                 // as rte_pcapng_fdopen named them
  if (MayTruncate(fd_)) whole_end_ = ::lseek(fd_, 0, SEEK_CUR);  // after the first blocks
  writer_ = std::thread([this] { Writer(); });
}

void Capture::Stop() {
  if (stopped_) return;
  stopped_ = true;
  active_.store(nullptr, std::memory_order_release);
  stop_.store(true, std::memory_order_release);
  WaitForWriter();
  // Posted after that (none, by the precondition): freed, counted as dropped.
  void* left[64];
  while (const unsigned n = rte_ring_sc_dequeue_burst(ring_, left, 64, nullptr)) {
    for (unsigned i = 0; i < n; ++i) {
      auto* m = static_cast<rte_mbuf*>(left[i]);
      dropped_.fetch_add(1, std::memory_order_relaxed);
      if (m->port < RTE_MAX_ETHPORTS) port_dropped_[m->port].fetch_add(1);
      rte_pktmbuf_free(m);
    }
  }
  if (failure().empty()) {
    // The statistics blocks of the ports the file names and that still exist (22.11's writer
    // refuses a port that is gone: run's are, each cell removes its own). Each one write; one
    // the disk cut short is taken back, and so are those after it.
    WithoutSigpipe([&] {
      for (uint16_t port = 0; port < RTE_MAX_ETHPORTS; ++port) {
        if (!named_[port] || !rte_eth_dev_is_valid_port(port)) continue;
        const ssize_t wrote =
            rte_pcapng_write_stats(out_, port,
                                   "txbatch --capture: frames written, and dropped by the "
                                   "capture (its pool or ring full)",
                                   0, 0, port_written_[port], port_dropped_[port].load());
        int err = errno;
        if (wrote > 0 && whole_end_ < 0) continue;  // a pipe's or a device's: as written
        if (wrote > 0) {
          // Whole, or cut short (the file is write-only: its length cannot be read back)? A
          // short write to a regular file is a full disk or a size limit, which one more byte
          // meets too; a byte that goes in is taken back.
          const off_t end = whole_end_ + wrote;
          if (::write(fd_, "", 1) == 1 && ::ftruncate(fd_, end) == 0 &&
              ::lseek(fd_, end, SEEK_SET) == end) {
            whole_end_ = end;
            continue;
          }
          err = errno;
        }
        Failed(err);
        break;
      }
      return 0;
    });
  }
  rte_pcapng_close(out_);  // closes the file descriptor
  if (drain_ >= 0) ::close(drain_);
  rte_ring_free(ring_);
}

void Capture::CopyForTx(uint16_t port, uint16_t queue, std::span<rte_mbuf* const> frames,
                        std::span<rte_mbuf*> copies) {
  const uint64_t now = rte_get_tsc_cycles();
  // copies[i] for frames[i] (the caller's scratch, as long as the burst); null: counted as
  // dropped if the PMD accepts that frame.
  std::fill_n(copies.begin(), frames.size(), nullptr);
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
  const uint64_t delta = tsc > tsc0_ ? tsc - tsc0_ : 0;  // a CPU's TSC a little behind: no wrap
  const uint64_t ns =
      ns0_ + delta / tsc_hz_ * 1000000000u + delta % tsc_hz_ * 1000000000u / tsc_hz_;
  auto* block = rte_pktmbuf_mtod(copy, uint8_t*);
  const uint32_t hi = static_cast<uint32_t>(ns >> 32), lo = static_cast<uint32_t>(ns);
  std::memcpy(block + 12, &hi, sizeof hi);
  std::memcpy(block + 16, &lo, sizeof lo);
}

void Capture::Sent(uint16_t port, std::span<rte_mbuf*> copies, unsigned accepted) {
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
  // Lock-free (a txirq at SCHED_FIFO posts too, under the TX lock): no wake-up either, the
  // writer polls.
  const unsigned taken =
      rte_ring_mp_enqueue_burst(ring_, reinterpret_cast<void* const*>(copies), n, nullptr);
  captured_.fetch_add(taken, std::memory_order_relaxed);
  for (unsigned i = taken; i < n; ++i) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    if (copies[i]->port < RTE_MAX_ETHPORTS)
      port_dropped_[copies[i]->port].fetch_add(1, std::memory_order_relaxed);
    rte_pktmbuf_free(copies[i]);
  }
}

void Capture::WaitForWriter() {
  using Clock = std::chrono::steady_clock;
  uint64_t last = written_.load();
  auto progress = Clock::now();
  while (!writer_done_.load(std::memory_order_acquire)) {
    if (drain_ < 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } else {  // as fast as the writer writes: a pipe holds 64 KiB, the ring megabytes
      pollfd p{drain_, POLLIN, 0};
      (void)::poll(&p, 1, 10);
    }
    if (const uint64_t w = written_.load(); w != last) {
      last = w;
      progress = Clock::now();
    }
    struct stat st {};
    if (drain_ < 0 && GivingUpOnStalledReaders() && Clock::now() - progress > kStalledCaptureS &&
        ::fstat(fd_, &st) == 0 && S_ISFIFO(st.st_mode)) {
      // A FIFO's or a pipe's /proc name opens a read end of it (Linux).
      drain_ =
          ::open(fmt::format("/proc/self/fd/{}", fd_).c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
      if (drain_ >= 0) {
        std::lock_guard lock(mu_);
        if (failure_.empty())
          failure_ =
              "its reader stopped reading, and txbatch discarded what it did not take a second "
              "after the stop signal (the file is cut short)";
      }
    }
    if (drain_ >= 0) {
      char buf[1 << 16];
      while (::read(drain_, buf, sizeof buf) > 0) {
      }
    }
  }
  writer_.join();
}

void Capture::Writer() {
  struct Done {
    std::atomic<bool>& done;
    ~Done() { done.store(true, std::memory_order_release); }
  } done{writer_done_};
  pthread_setname_np(pthread_self(), "txb-capture");
  EnterOutputThread();
  std::array<rte_mbuf*, 256> batch;
  bool ok = true;
  for (;;) {
    // Read before the dequeue: once stopping, an empty ring is all there will be.
    const bool stopping = stop_.load(std::memory_order_acquire);
    const unsigned n = rte_ring_sc_dequeue_burst(ring_, reinterpret_cast<void**>(batch.data()),
                                                 batch.size(), nullptr);
    if (n == 0) {
      if (stopping) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    if (ok) {
      uint64_t bytes = 0;
      for (unsigned i = 0; i < n; ++i) bytes += rte_pktmbuf_pkt_len(batch[i]);
      const ssize_t wrote = rte_pcapng_write_packets(out_, batch.data(), static_cast<uint16_t>(n));
      // A short write (a disk full part-way) says no why: the rest, written on, does, or goes.
      const int err = wrote < 0 ? rte_errno
                      : static_cast<uint64_t>(wrote) == bytes
                          ? 0
                          : WriteRest(batch.data(), n, static_cast<uint64_t>(wrote));
      if (err != 0) {
        Failed(err);
        ok = false;
      } else if (whole_end_ >= 0) {
        whole_end_ += static_cast<off_t>(bytes);
      }
    }
    for (unsigned i = 0; i < n; ++i) {
      rte_mbuf* m = batch[i];
      if (ok && m->port < RTE_MAX_ETHPORTS) ++port_written_[m->port];
      rte_pktmbuf_free(m);
    }
    if (ok) written_.fetch_add(n, std::memory_order_relaxed);
  }
}

int Capture::WriteRest(rte_mbuf* const* blocks, unsigned n, uint64_t done) {
  for (unsigned i = 0; i < n; ++i) {
    for (const rte_mbuf* seg = blocks[i]; seg != nullptr; seg = seg->next) {
      const char* data = rte_pktmbuf_mtod(seg, const char*);
      size_t len = seg->data_len;
      if (done >= len) {  // written already
        done -= len;
        continue;
      }
      data += done;
      len -= done;
      done = 0;
      while (len > 0) {
        const ssize_t w = ::write(fd_, data, len);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return w < 0 ? errno : EIO;
        data += w;
        len -= static_cast<size_t>(w);
      }
    }
  }
  return 0;
}

void Capture::Failed(int err) {
  // The file ends on its last whole block where it can be cut back: a reader takes it whole
  // (tshark said "cut short in the middle of a packet" of the block a full disk split).
  const bool cut = whole_end_ >= 0 && ::ftruncate(fd_, whole_end_) == 0 &&
                   ::lseek(fd_, whole_end_, SEEK_SET) >= 0;
  std::lock_guard lock(mu_);
  if (!failure_.empty()) return;
  failure_ = fmt::format("{}{}", std::strerror(err),
                         cut ? "; it ends on its last whole block, a valid pcapng" : "");
}

Capture::Counts Capture::counts() const {
  return {captured_.load(), dropped_.load(), written_.load()};
}

std::string Capture::failure() const {
  std::lock_guard lock(mu_);
  return failure_;
}

}  // namespace txbatch
