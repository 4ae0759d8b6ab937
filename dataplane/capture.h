#pragma once
// --capture FILE: what the DPDK ports sent and received, in pcapng through DPDK's own writer
// (librte_pcapng), for tshark and Wireshark: an interface block per port (rte_pcapng writes one
// for every port that exists when the capture opens), each frame an enhanced packet block with
// its direction, queue and a nanosecond timestamp from the TSC. TX frames are what the PMD
// accepted (copied before the burst, kept for the ones it took); RX frames what a burst
// returned.
//
// Off the data path as far as a copy allows: the port's thread (a forwarder, a producer, the
// SCHED_FIFO txirq) copies each frame into the capture's own pool and enqueues it on a
// lock-free ring (rte_ring, many producers, one consumer); a writer thread polls the ring every
// millisecond and writes the file. What the pool or the ring cannot take is counted (dropped),
// never waited for: no lock and no wake-up on the data path. One capture a process (as
// dpdk-dumpcap attaches one); ports read it through Capture::Active().

#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "base/error.h"
#include "dataplane/mempool.h"

struct rte_pcapng;  // rte_pcapng.h: experimental API, included where it is used
struct rte_ring;

namespace txbatch {

class Capture {
 public:
  // Frames the capture pool holds (copies on their way to the file), and what it takes of EAL's
  // memory for frames of `mtu` (for the EAL estimate).
  static constexpr unsigned kPoolFrames = 8192;
  static uint64_t PoolBytes(unsigned mtu);

  // The pool copies go into, for frames of `mtu`. Made once EAL runs and before a port waits
  // for its peer: populating it faults its pages in (0.6 s for 8192 frames of 1500 bytes on a
  // 2-vCPU VM here), which must not happen while the peer already sends — a sink that started
  // its capture after the link came up polled nothing for that long, and a short run filled
  // its ring and qdisc and sent a few thousand frames in all.
  static Result<PoolPtr> MakePool(unsigned mtu);
  // Starts capturing into `fd` (owned from here: closed at the end) with `pool` (MakePool's),
  // after every port was created; frames of `mtu` are kept whole (longer ones, TSO's, are cut).
  static Result<std::unique_ptr<Capture>> Start(int fd, PoolPtr pool, unsigned mtu);
  // Stops taking frames, writes what is posted and a statistics block per port still there
  // (frames written, and dropped by the capture itself), closes the file. Once; the destructor
  // stops a capture not stopped yet. Precondition: no thread is inside CopyForTx, Sent or
  // Received, nor will be (the ports' data-path threads have stopped: a bridge's directions, a
  // run's cells): Active() is cleared here, but a thread that read it before may not use the
  // capture after Stop returns.
  void Stop();
  ~Capture() { Stop(); }
  Capture(const Capture&) = delete;
  Capture& operator=(const Capture&) = delete;

  // The running capture, or null (read on the data path: one acquire load).
  static Capture* Active() { return active_.load(std::memory_order_acquire); }

  // TX, before rte_eth_tx_burst: copies `frames` into `copies` (the caller's, as large; null where
  // the pool was empty). After the burst, Sent posts the copies of the first `accepted` and
  // frees the rest.
  void CopyForTx(uint16_t port, uint16_t queue, std::span<rte_mbuf* const> frames,
                 std::span<rte_mbuf*> copies);
  void Sent(uint16_t port, std::span<rte_mbuf*> copies, unsigned accepted);
  // RX: what a burst returned, copied and posted.
  void Received(uint16_t port, uint16_t queue, std::span<rte_mbuf* const> frames);

  struct Counts {
    uint64_t captured = 0;  // written, or on their way
    uint64_t dropped = 0;   // the pool or the ring was full, or a port the file does not name
    uint64_t written = 0;   // blocks the writer wrote
  };
  Counts counts() const;
  // Why writing failed (the disk filled, the reader went away); empty while it has not.
  std::string failure() const;

 private:
  Capture(rte_pcapng* out, int fd, PoolPtr pool, rte_ring* ring, unsigned snap);
  void Post(rte_mbuf* const* copies, unsigned n);
  // Waits for the writer to return (it empties the ring first). A reader that stopped reading
  // holds it in DPDK's writev: after a stop signal (GivingUpOnStalledReaders), once a second
  // passed with nothing written, what that reader does not take is read off the pipe here and
  // discarded, and the capture is a failure that says so — the command ends at the signal.
  void WaitForWriter();
  void Stamp(rte_mbuf* copy, uint64_t tsc) const;
  void Writer();
  // Writes `blocks` (n of them) on from byte `done`, where a write stopped short; 0, or the errno
  // that stopped it (ENOSPC, EFBIG, EIO: what the short write did not say).
  int WriteRest(rte_mbuf* const* blocks, unsigned n, uint64_t done);
  // A write failed with `err`: the file is cut back to its last whole block where it may be
  // (whole_end_), and the failure says why. The first failure is the one kept.
  void Failed(int err);

  static std::atomic<Capture*> active_;
  rte_pcapng* out_;
  const int fd_;  // out_'s (rte_pcapng closes it)
  // Where the last whole block ends in the file: after the first blocks, then after each write
  // that went in whole (the writer's, then Stop's); -1 where the file is not one to cut back
  // (a pipe, a device, standard output's file).
  off_t whole_end_ = -1;
  PoolPtr pool_;
  rte_ring* ring_;  // posted copies, in order; kPoolFrames of them at most
  const unsigned snap_;
  const uint64_t tsc_hz_;
  uint64_t tsc0_ = 0, ns0_ = 0;           // a TSC reading and the wall clock's at the same moment
  std::atomic<bool> stop_{false};         // the writer empties the ring and returns
  std::atomic<bool> writer_done_{false};  // it did
  int drain_ = -1;  // a read end of the output's pipe, where a stalled reader's share is read off
  mutable std::mutex mu_;  // failure_ (the writer and the control thread, never the data path)
  bool stopped_ = false;   // Stop ran
  std::string failure_;
  std::atomic<uint64_t> captured_{0}, dropped_{0}, written_{0};
  // Per port id: dropped (by the port's thread) and written (by the writer), for the statistics
  // blocks at the end.
  std::array<std::atomic<uint64_t>, RTE_MAX_ETHPORTS> port_dropped_{};
  std::array<uint64_t, RTE_MAX_ETHPORTS> port_written_{};
  // The ports the file names (those there were when it opened): a frame of another port would
  // point at no interface block, and is dropped (counted).
  std::array<bool, RTE_MAX_ETHPORTS> named_{};
  std::thread writer_;
};

}  // namespace txbatch
