// An ethdev port as a TxDriver, and the ports txbatch makes or attaches for a run (ring pairs and
// loopbacks, a memif pair, devargs, EAL's ports); the bridge's are forwarding_port.cc's.
#include <fmt/format.h>
#include <rte_bus.h>
#include <rte_dev.h>
#include <rte_devargs.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_mempool.h>
#include <rte_ring.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "base/tsan.h"
#include "batching/batch.h"
#include "dataplane/capture.h"
#include "dataplane/eal.h"
#include "dataplane/frame.h"
#include "drivers/ethdev/ethdev.h"
#include "drivers/ethdev/port_setup.h"
#include "drivers/ethdev/ring_size.h"
#include "drivers/ethdev/tx_checksum.h"

namespace txbatch::ethdev {
namespace {

using Drivers = std::vector<std::unique_ptr<TxDriver>>;

constexpr uint16_t kRxBurst = 64;
// How often the completion role polls RX (and retries a full TX ring): ports have no
// completion interrupt here, so the txirq thread polls at this interval while frames are out.
constexpr double kPollNs = 20e3;
// RTE_PMD_RING_MAX_TX_RINGS in DPDK 22.11's net_ring (not in its public header).
constexpr unsigned kMaxRingQueues = 16;

// Why a DPDK call failed: the reason DPDK logged since `mark` (a PMD's own words: "ioctl failed
// (SIOCGIFINDEX):No such device"), else the text of the errno it returned.
std::string Why(uint64_t mark, int err) {
  std::string logged = DpdkErrorSince(mark);
  return logged.empty() ? std::string(rte_strerror(err)) : logged;
}

// PMDs that keep their rings' mbufs after rte_eth_dev_stop, until the port closes (net_virtio
// frees them in virtio_dev_close; e1000, ixgbe, i40e and mlx5 give them back at stop).
bool KeepsMbufsUntilClose(const char* driver_name) {
  return driver_name != nullptr && std::string_view(driver_name) == "net_virtio";
}

// PMDs whose device takes frames from the TX ring on its own time, with no way to ask whether
// it has (MakeQueues's linger): a memif peer process, a virtio backend.
bool SendsOnItsOwnTime(std::string_view driver_name) {
  return driver_name == "net_memif" || driver_name == "net_virtio";
}

// Why a port EAL probed is gone: GiveBackHeldMbufs could not bring it back. Control plane.
std::map<uint16_t, std::string>& LostPorts() {
  static std::map<uint16_t, std::string> lost;
  return lost;
}

class EthdevPort final : public TxDriver {
 public:
  // Transmits on `tx_port`'s TX queue `queue`; frames come back on `rx_port`'s RX queue `queue`
  // (the same port for a loopback, the other end for a pair), or nowhere.
  EthdevPort(uint16_t tx_port, std::optional<uint16_t> rx_port, uint16_t queue, bool virtual_dev,
             std::shared_ptr<PortOwner> owned, std::string spec, FrameReceiver* sink,
             const RunWindow& window, double tsc_hz)
      : port_(tx_port),
        queue_(queue),
        rx_port_(rx_port),
        loopback_(rx_port.has_value()),
        virtual_(virtual_dev),
        owned_(std::move(owned)),
        spec_(std::move(spec)),
        sink_(sink),
        window_(window),
        poll_tsc_(static_cast<Tsc>(kPollNs * tsc_hz / 1e9)),
        write_tcp_checksum_(WritesTcpChecksum(tx_port, loopback_)) {
    // A port EAL probed (ethdev:port=N) outlives the cell, and so do its PMD's counters: they
    // are read here, before this driver accepts a frame, so that ExtraCounters covers what
    // counters_.accepted (the cell's `sent`) covers. The port is started by now (a PMD that
    // clears its counters on start has done so).
    tx_base_ = ReadStats(port_);
    if (loopback_) rx_base_ = ReadStats(*rx_port_);
  }

  ~EthdevPort() override {
    Purge();
    if (took_any_) owned_->sent = true;  // the port lingers if it must
    owned_.reset();  // the last queue of the port stops, closes and removes it
  }

  uint16_t XmitAt(std::span<rte_mbuf* const> frames, Tsc now) override {
    if (frames.empty()) return 0;
    // Counted where the driver accepts them (net_null frees, net_pcap writes, a NIC sends)
    // unless they come back. Lengths are read first: the PMD may free what it accepts.
    const bool count_here = !loopback_ && window_.Contains(now);
    if (count_here)
      for (size_t i = 0; i < frames.size(); ++i) {
        payload_[i] = PayloadBytes(frames[i]);
        bytes_[i] = rte_pktmbuf_pkt_len(frames[i]);
      }
    // A PMD without TCP checksum offload gets complete frames (chosen at setup: one branch a
    // call).
    if (write_tcp_checksum_)
      for (rte_mbuf* m : frames) WriteTcpChecksum(m);
    for (rte_mbuf* m : frames) TsanRelease(m);  // a loopback's RX side reads them (tsan.h)
    // --capture: copied before the burst (the PMD may free what it takes), kept as it took them.
    Capture* const capture = Capture::Active();
    const std::span<rte_mbuf*> copies(capture_copies_.data(), frames.size());
    if (capture != nullptr) capture->CopyForTx(port_, queue_, frames, copies);
    const uint16_t n = rte_eth_tx_burst(port_, queue_, const_cast<rte_mbuf**>(frames.data()),
                                        static_cast<uint16_t>(frames.size()));
    if (capture != nullptr) capture->Sent(port_, copies, n);
    took_any_ |= n > 0;  // its own record: whoever calls it, counted or not
    if (loopback_) in_flight_ += n;
    if (!loopback_) counters_.last_departure.Max(now);
    if (count_here) {
      uint64_t payload = 0, bytes = 0;
      for (uint16_t i = 0; i < n; ++i) {
        payload += payload_[i];
        bytes += bytes_[i];
      }
      counters_.window_frames.Add(n);
      counters_.window_payload_bytes.Add(payload);
      counters_.window_wire_bytes.Add(bytes + uint64_t{kEthWireOverheadBytes} * n);
    }
    if (n < frames.size() && !stopped_) {
      // The PMD's ring is full: the queue stays stopped until the completion role retries,
      // one poll interval from now (not at once: that would spin).
      stopped_ = true;
      retry_at_ = Now() + poll_tsc_;  // from now, not the call's start: a TX-lock wait may lie
                                      // between them, and a retry due at once would spin
      counters_.stops.Add();
    }
    return n;
  }

  bool Stopped() const override { return stopped_; }
  std::string StopCause() const override {
    // A PMD takes nothing while its link is down (net_memif: the peer went away); else the ring
    // is full, which for a port another process reads (memif) means that reader stopped.
    rte_eth_link link{};
    if (rte_eth_link_get_nowait(port_, &link) == 0 && link.link_status == RTE_ETH_LINK_DOWN)
      return "its link is down";
    return "its ring stayed full: whatever takes frames from it (the NIC, or the peer process "
           "of a memif port) stopped";
  }

  unsigned Complete(Tsc now) override {
    unsigned done = 0;
    if (loopback_) {
      std::array<rte_mbuf*, kRxBurst> rx;
      std::array<Tsc, kRxBurst> at;
      while (true) {
        const uint16_t k = rte_eth_rx_burst(*rx_port_, queue_, rx.data(), kRxBurst);
        if (k == 0) break;
        for (uint16_t i = 0; i < k; ++i) TsanAcquire(rx[i]);
        if (Capture* c = Capture::Active()) c->Received(*rx_port_, queue_, {rx.data(), k});
        const Tsc now = Now();
        for (uint16_t i = 0; i < k; ++i) {
          at[i] = now;  // the frame's own RX TSC: latency = this - its TX stamp
          counters_.last_departure.Max(now);
          if (window_.Contains(now)) {
            counters_.window_frames.Add();
            // Parsed, as the sink parses it: a received mbuf is not always the one sent (memif
            // copies into fresh ones, whose l2/l3/l4_len are 0), so PayloadBytes cannot be used.
            counters_.window_payload_bytes.Add(ParseFrame(rx[i]).payload);
            counters_.window_wire_bytes.Add(rte_pktmbuf_pkt_len(rx[i]) + kEthWireOverheadBytes);
          }
        }
        in_flight_ -= std::min<unsigned>(in_flight_, k);
        sink_->Receive({rx.data(), k}, {at.data(), k});
        done += k;
      }
      if (stopped_) counters_.wakes.Add();
      stopped_ = false;  // the ring we send into is the one just emptied
    } else if (stopped_ && now >= retry_at_) {
      (void)rte_eth_tx_done_cleanup(port_, queue_, 0);  // PMDs that free lazily; ENOTSUP is fine
      counters_.wakes.Add();
      stopped_ = false;
    }
    next_poll_ = now + poll_tsc_;
    return done;
  }

  // Ports have no completion interrupt here: a loopback is polled every kPollNs while frames
  // are out, a stopped port retried once its retry time has come.
  Tsc NextCompletion() const override {
    if (!loopback_) return stopped_ ? retry_at_ : kNever;
    return (stopped_ || in_flight_ > 0) ? next_poll_ : kNever;
  }

  unsigned InFlight() const override { return in_flight_; }
  bool IdlePolling() const override { return loopback_; }

  unsigned Purge() override {
    unsigned n = 0;
    if (!loopback_) return 0;
    std::array<rte_mbuf*, kRxBurst> rx;
    while (uint16_t k = rte_eth_rx_burst(*rx_port_, queue_, rx.data(), kRxBurst)) {
      rte_pktmbuf_free_bulk(rx.data(), k);
      n += k;
    }
    in_flight_ = 0;
    return n;
  }

  std::optional<WireSpec> Wire() const override {
    // A vdev's link speed is nominal (net_null says 10 Gb/s): no ceiling from it.
    if (virtual_) return std::nullopt;
    rte_eth_link link{};
    if (rte_eth_link_get_nowait(port_, &link) != 0 || link.link_speed == 0 ||
        link.link_speed == RTE_ETH_SPEED_NUM_UNKNOWN)
      return std::nullopt;
    WireSpec w;
    w.bits_per_s = link.link_speed * 1e6;
    return w;
  }
  CountedAt counted_at() const override { return loopback_ ? CountedAt::kRx : CountedAt::kDriver; }
  bool owns_doorbell() const override { return false; }
  std::string Describe() const override { return spec_; }
  // The PMD's own port statistics (rte_eth_stats) over this driver's life, the cell: where a
  // frame the driver accepted went afterwards — sent, or an output error (a link that went down
  // under af_packet) — and what the RX side missed. Every queue of the port reports the same
  // port. Empty where the PMD has no statistics.
  std::map<std::string, uint64_t> ExtraCounters() const override {
    const std::optional<rte_eth_stats> tx = ReadStats(port_);
    if (!tx || !tx_base_) return {};
    std::map<std::string, uint64_t> c = {{"pmd_opackets", Since(tx->opackets, tx_base_->opackets)},
                                         {"pmd_oerrors", Since(tx->oerrors, tx_base_->oerrors)}};
    if (!loopback_ || !rx_base_) return c;
    if (const std::optional<rte_eth_stats> rx = ReadStats(*rx_port_)) {
      c["pmd_ipackets"] = Since(rx->ipackets, rx_base_->ipackets);
      c["pmd_imissed"] = Since(rx->imissed, rx_base_->imissed);
      c["pmd_ierrors"] = Since(rx->ierrors, rx_base_->ierrors);
      c["pmd_rx_nombuf"] = Since(rx->rx_nombuf, rx_base_->rx_nombuf);
    }
    return c;
  }

 private:
  const uint16_t port_;
  const uint16_t queue_;  // its TX queue (and RX queue, where frames come back)
  const std::optional<uint16_t> rx_port_;
  const bool loopback_;
  const bool virtual_;
  std::shared_ptr<PortOwner> owned_;
  const std::string spec_;
  FrameReceiver* const sink_;  // where a loopback's frames go (null when nothing comes back)
  const RunWindow& window_;
  const Tsc poll_tsc_;
  const bool write_tcp_checksum_;  // WritesTcpChecksum: the PMD has no TCP checksum offload
  bool stopped_ = false;
  Tsc retry_at_ = 0;   // when a stopped non-loopback port is tried again
  Tsc next_poll_ = 0;  // when a loopback's RX is polled next
  unsigned in_flight_ = 0;
  bool took_any_ = false;  // a burst took a frame: the PMD may still hold some at the end
  std::array<uint32_t, kMaxBatch> payload_;  // per-call scratch, filled before tx_burst
  std::array<rte_mbuf*, kMaxBatch> capture_copies_;  // --capture: per-call copies (no allocation)
  std::array<uint32_t, kMaxBatch> bytes_;
  std::optional<rte_eth_stats> tx_base_, rx_base_;  // the PMD's counters when the cell began

  static std::optional<rte_eth_stats> ReadStats(uint16_t port) {
    rte_eth_stats s{};
    if (rte_eth_stats_get(port, &s) != 0) return std::nullopt;
    return s;
  }
  // A counter's growth since `base`; one that went below it was reset in the cell (a secondary
  // process's rte_eth_stats_reset): what it counted since is all this cell can know.
  static uint64_t Since(uint64_t now, uint64_t base) { return now >= base ? now - base : now; }
};

Status StartPort(uint16_t port, rte_mempool* pool, unsigned mtu, const std::string& what,
                 uint16_t queues = 1) {
  if (Status s = ConfigurePort(port, pool, mtu, what, queues); !s) return s;
  return WaitLinkUp(port, what);
}

// One TxDriver per queue of a configured port (as many as `sinks`), sharing the port.
Drivers MakeQueues(uint16_t tx_port, std::optional<uint16_t> rx_port, bool virtual_dev, Owned owned,
                   const std::string& spec, std::span<FrameReceiver* const> sinks,
                   const RunWindow& window, double tsc_hz, bool linger = false) {
  auto owner = std::make_shared<PortOwner>(std::move(owned));
  owner->linger = linger;
  Drivers out;
  for (size_t q = 0; q < sinks.size(); ++q) {
    auto d = std::make_unique<EthdevPort>(tx_port, rx_port, static_cast<uint16_t>(q), virtual_dev,
                                          owner, spec, sinks[q], window, tsc_hz);
    out.push_back(std::move(d));
  }
  return out;
}

// Ring-backed ports built by txbatch from rings it owns (rte_eth_from_rings): `cables` rings,
// port i sending into ring i and receiving from ring (i + 1) % cables. One cable makes a
// loopback (net_ring0), two a pair. net_ring's own devargs path is avoided on purpose: in 22.11
// it frees only some of the rings it makes, and the next probe re-attaches to the old ones.
Result<Drivers> CreateRingPorts(unsigned cables, std::string spec, rte_mempool* pool, unsigned mtu,
                                std::span<FrameReceiver* const> sinks, const RunWindow& window,
                                double tsc_hz) {
  const auto queues = static_cast<unsigned>(sinks.size());
  if (queues > kMaxRingQueues)
    return MakeError(ENOTSUP, fmt::format("--queues {} is more than {} can have (the ring PMD "
                                          "takes at most {} rings a port); valid there: --queues "
                                          "1..{}",
                                          queues, spec, kMaxRingQueues, kMaxRingQueues));
  // Names must be unique among live objects: the pre-flight check and the cells follow each
  // other closely.
  static std::atomic<unsigned> serial{0};
  const unsigned n = serial.fetch_add(1);
  Owned owned;
  const auto fail = [&](int err, std::string message) {
    owned.Release();
    return MakeError(err, std::move(message));
  };
  // Cable i's ring for queue q: rings[i][q].
  std::vector<std::vector<rte_ring*>> rings(cables);
  for (unsigned i = 0; i < cables; ++i)
    for (unsigned q = 0; q < queues; ++q) {
      // One producer (the runner, under the TX lock) and one consumer (the completion role).
      rte_ring* r = rte_ring_create(fmt::format("txb_ring{}_{}_{}", n, i, q).c_str(), kRingSize,
                                    rte_socket_id(), RING_F_SP_ENQ | RING_F_SC_DEQ);
      if (r == nullptr)
        return fail(rte_errno, fmt::format("cannot create the rings of {}: {}", spec,
                                           rte_strerror(rte_errno)));
      rings[i].push_back(r);
      owned.rings.push_back(r);
    }
  std::vector<uint16_t> ports;
  for (unsigned i = 0; i < cables; ++i) {
    std::vector<rte_ring*> tx = rings[i], rx = rings[(i + 1) % cables];
    const int p = rte_eth_from_rings(fmt::format("txb_ring{}_{}", n, i).c_str(), rx.data(), queues,
                                     tx.data(), queues, rte_socket_id());
    if (p < 0)
      return fail(rte_errno,
                  fmt::format("cannot create the ports of {}: {}", spec, rte_strerror(rte_errno)));
    const auto port = static_cast<uint16_t>(p);
    ports.push_back(port);
    owned.ports.push_back(port);
    rte_eth_dev_info info{};
    if (rte_eth_dev_info_get(port, &info) == 0 && info.device != nullptr)
      owned.devices.push_back(info.device);  // the net_ring vdev rte_eth_from_rings made
    if (Status st = StartPort(port, pool, mtu, fmt::format("{} port {}", spec, p),
                              static_cast<uint16_t>(queues));
        !st)
      return fail(st.error().err, st.error().message);
  }
  const uint16_t tx_port = ports[0], rx_port = ports[cables - 1];
  return MakeQueues(
      tx_port, rx_port, /*virtual_dev=*/true, std::move(owned),
      cables == 1 ? fmt::format("{} (port {}, a loopback on one ring)", spec, tx_port)
                  : fmt::format("{} (port {} -> port {}, crossed rings)", spec, tx_port, rx_port),
      sinks, window, tsc_hz);
}

// A memif server and a memif client in this process, connected through an abstract socket
// (nothing on disk) named for this process: frames sent on the client are received on the
// server, having crossed memif's shared-memory rings (copied there and back: memif's TX frees
// the mbuf, its RX allocates a new one from the pool). Both ports are started before either
// link is waited for: the link comes up when the client has connected.
Result<Drivers> CreateMemifPair(std::string spec, rte_mempool* pool, unsigned mtu,
                                std::span<FrameReceiver* const> sinks, const RunWindow& window,
                                double tsc_hz) {
  static std::atomic<unsigned> serial{0};
  const unsigned n = serial.fetch_add(1);
  const std::string socket = fmt::format("/run/txbatch-{}-{}.memif", getpid(), n);
  Owned owned;
  const auto fail = [&](int err, std::string message) {
    owned.Release();
    return MakeError(err, std::move(message));
  };
  std::array<uint16_t, 2> ports{};
  const std::array<const char*, 2> roles = {"server", "client"};
  for (unsigned i = 0; i < 2; ++i) {
    const std::string name = fmt::format("net_memif_txb{}_{}", n, i);
    const std::string devargs = fmt::format("{},role={},socket={}", name, roles[i], socket);
    const uint64_t mark = DpdkLogMark();
    if (int rc = rte_dev_probe(devargs.c_str()); rc != 0)
      return fail(-rc, fmt::format("cannot create the memif {} of {} ({}); is DPDK's net_memif "
                                   "driver installed?",
                                   roles[i], spec, Why(mark, -rc)));
    if (rte_eth_dev_get_port_by_name(name.c_str(), &ports[i]) != 0) {
      (void)rte_eal_hotplug_remove("vdev", name.c_str());
      return fail(ENODEV, fmt::format("memif device '{}' is not an ethdev port", name));
    }
    owned.ports.push_back(ports[i]);
    rte_eth_dev_info info{};
    if (rte_eth_dev_info_get(ports[i], &info) == 0 && info.device != nullptr)
      owned.devices.push_back(info.device);
    if (Status s = ConfigurePort(ports[i], pool, mtu,
                                 fmt::format("{} port {} (memif {})", spec, ports[i], roles[i]),
                                 static_cast<uint16_t>(sinks.size()));
        !s)
      return fail(s.error().err, s.error().message);
  }
  for (unsigned i = 0; i < 2; ++i)
    if (Status s =
            WaitLinkUp(ports[i], fmt::format("{} port {} (memif {})", spec, ports[i], roles[i]));
        !s)
      return fail(s.error().err, s.error().message);
  const uint16_t tx_port = ports[1], rx_port = ports[0];
  return MakeQueues(
      tx_port, rx_port, /*virtual_dev=*/true, std::move(owned),
      fmt::format("{} (port {} memif client -> port {} memif server)", spec, tx_port, rx_port),
      sinks, window, tsc_hz);
}

}  // namespace

// A port EAL probed on such a PMD, stopped, with mbufs of `pool` still out: closed and probed
// again, so that every mbuf comes home at the end of the cell (else the books never close, and
// EAL's cleanup at exit frees them into the pool txbatch already freed: a crash) and the port is
// there, unconfigured, for the next cell under the same id. If that fails, the next cell's
// sentence says why the port is gone.
void GiveBackHeldMbufs(uint16_t port, rte_mempool* pool) {
  if (pool == nullptr || rte_mempool_in_use_count(pool) == 0) return;
  rte_eth_dev_info info{};
  if (rte_eth_dev_info_get(port, &info) != 0 || info.device == nullptr ||
      !KeepsMbufsUntilClose(info.driver_name))
    return;
  rte_device* dev = info.device;
  const std::string name = rte_dev_name(dev), pmd = info.driver_name;
  std::string again = name;
  if (const rte_devargs* da = rte_dev_devargs(dev);
      da != nullptr && da->args != nullptr && da->args[0] != '\0')
    again += fmt::format(",{}", da->args);
  const uint64_t mark = DpdkLogMark();
  const auto lost = [&](const std::string& why) {
    LostPorts()[port] = fmt::format(
        "port {} ({}, {}) was closed to give back the mbufs its PMD "
        "holds until close, and {}",
        port, name, pmd, why);
  };
  (void)rte_eth_dev_close(port);
  if (int rc = rte_dev_remove(dev); rc != 0)
    return lost(fmt::format("could not be removed: {}", Why(mark, -rc)));
  if (int rc = rte_dev_probe(again.c_str()); rc != 0)
    return lost(fmt::format("probing it again failed: {}", Why(mark, -rc)));
  uint16_t now = 0;
  if (rte_eth_dev_get_port_by_name(name.c_str(), &now) != 0)
    return lost("probing it again made no port");
  if (now != port) return lost(fmt::format("came back as port {}", now));
}

// Configures `queues` RX and TX queues and starts the port; does not wait for the link.
Status ConfigurePort(uint16_t port, rte_mempool* pool, unsigned mtu, const std::string& what,
                     uint16_t queues) {
  const uint64_t mark = DpdkLogMark();
  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(port, &info); rc != 0)
    return MakeError(-rc, fmt::format("cannot query {}: {}", what, rte_strerror(-rc)));
  if (queues > info.max_tx_queues || queues > info.max_rx_queues)
    return MakeError(ENOTSUP, fmt::format("--queues {} is more than {} has: at most {} TX and {} "
                                          "RX queues; valid there: --queues 1..{}",
                                          queues, what, info.max_tx_queues, info.max_rx_queues,
                                          std::min(info.max_tx_queues, info.max_rx_queues)));
  if (mtu > info.max_mtu || mtu < info.min_mtu)
    return MakeError(ERANGE, fmt::format("--mtu {} is out of range for {}; valid there: {}..{}",
                                         mtu, what, info.min_mtu, info.max_mtu));
  rte_eth_conf conf{};
  conf.rxmode.mtu = mtu;
  conf.txmode.offloads = TxChecksumOffloads(info);
  const auto fail = [&](const char* step, int rc) {
    return MakeError(-rc, fmt::format("cannot {} {}: {}", step, what, Why(mark, -rc)));
  };
  if (int rc = rte_eth_dev_configure(port, queues, queues, &conf); rc != 0) {
    // The MTU is in the port's range (above): a busy port is one already started, by an
    // earlier --port or --driver of this process.
    if (rc == -EBUSY)
      return MakeError(EBUSY, fmt::format("cannot configure {}: it is already started, given "
                                          "twice (or as two names); valid: each port once",
                                          what));
    return MakeError(-rc, fmt::format("cannot configure {} with {} queue(s) and MTU {}: {}", what,
                                      queues, mtu, Why(mark, -rc)));
  }
  uint16_t rx_desc = kRingSize, tx_desc = kRingSize;
  (void)rte_eth_dev_adjust_nb_rx_tx_desc(port, &rx_desc, &tx_desc);
  const int socket = rte_eth_dev_socket_id(port);
  const unsigned sock =
      socket < 0 ? static_cast<unsigned>(SOCKET_ID_ANY) : static_cast<unsigned>(socket);
  for (uint16_t q = 0; q < queues; ++q) {
    if (int rc = rte_eth_rx_queue_setup(port, q, rx_desc, sock, nullptr, pool); rc != 0)
      return fail("set up the RX queues of", rc);
    if (int rc = rte_eth_tx_queue_setup(port, q, tx_desc, sock, nullptr); rc != 0)
      return fail("set up the TX queues of", rc);
  }
  if (int rc = rte_eth_dev_start(port); rc != 0) return fail("start", rc);
  return {};
}

// Waits up to kLinkWaitS for the port's link; stops the port if it never comes up.
Status WaitLinkUp(uint16_t port, const std::string& what, double wait_s, bool (*give_up)()) {
  const uint64_t deadline = rte_get_tsc_cycles() + static_cast<uint64_t>(wait_s * rte_get_tsc_hz());
  rte_eth_link link{};
  while (rte_eth_link_get_nowait(port, &link) == 0 && link.link_status == RTE_ETH_LINK_DOWN &&
         rte_get_tsc_cycles() < deadline) {
    if (give_up != nullptr && give_up()) return {};
    rte_delay_ms(10);
  }
  if (link.link_status == RTE_ETH_LINK_DOWN) {
    (void)rte_eth_dev_stop(port);
    return MakeError(ENETDOWN, fmt::format("the link of {} did not come up within {:g} s; check "
                                           "the cable, the peer or the interface it attaches to",
                                           what, wait_s));
  }
  return {};
}

Result<Attached> Attach(const EthdevOptions& o) {
  Attached a;
  if (o.port >= 0) {
    const uint16_t avail = rte_eth_dev_count_avail();
    if (const auto gone = LostPorts().find(static_cast<uint16_t>(o.port));
        gone != LostPorts().end() && !rte_eth_dev_is_valid_port(gone->first))
      return MakeError(ENODEV, gone->second);
    if (!rte_eth_dev_is_valid_port(static_cast<uint16_t>(o.port)))
      return MakeError(ENODEV, fmt::format("port {} does not exist: {} port(s) were probed; give "
                                           "the device to EAL after -- (e.g. -a <pci address>) "
                                           "or use ethdev:DEVARGS",
                                           o.port, avail));
    a.port = static_cast<uint16_t>(o.port);
    a.owned.borrowed_ports.push_back(a.port);
    a.what = fmt::format("port {}", a.port);
  } else {
    const std::string name = DeviceName(o.devargs);
    const uint64_t mark = DpdkLogMark();
    if (int rc = rte_dev_probe(o.devargs.c_str()); rc != 0)
      return MakeError(-rc, fmt::format("cannot create device '{}' ({}); check the driver name "
                                        "and its arguments (e.g. net_null0, net_ring0, "
                                        "net_pcap0,tx_pcap=FILE)",
                                        o.devargs, Why(mark, -rc)));
    if (rte_eth_dev_get_port_by_name(name.c_str(), &a.port) != 0) {
      (void)rte_eal_hotplug_remove("vdev", name.c_str());
      return MakeError(ENODEV,
                       fmt::format("device '{}' was created but is not an ethdev port", name));
    }
    a.owned.ports.push_back(a.port);
    a.what = fmt::format("port {} ({})", a.port, name);
  }
  rte_eth_dev_info info{};
  if (int rc = rte_eth_dev_info_get(a.port, &info); rc != 0) {
    if (o.port < 0) (void)rte_eal_hotplug_remove("vdev", DeviceName(o.devargs).c_str());
    return MakeError(-rc, fmt::format("cannot query {}: {}", a.what, rte_strerror(-rc)));
  }
  if (o.port < 0 && info.device != nullptr) a.owned.devices.push_back(info.device);
  a.driver_name = info.driver_name ? info.driver_name : "";
  a.virtual_dev =
      info.device != nullptr && std::string_view(rte_bus_name(rte_dev_bus(info.device))) == "vdev";
  return a;
}

std::unique_ptr<TxDriver> MakeEthdevPort(uint16_t tx_port, std::optional<uint16_t> rx_port,
                                         uint16_t queue, bool virtual_dev,
                                         std::shared_ptr<PortOwner> owned, std::string spec,
                                         FrameReceiver* sink, const RunWindow& window,
                                         double tsc_hz) {
  return std::make_unique<EthdevPort>(tx_port, rx_port, queue, virtual_dev, std::move(owned),
                                      std::move(spec), sink, window, tsc_hz);
}

Result<std::unique_ptr<TxDriver>> CreateEthdevDriver(const EthdevOptions& o, rte_mempool* pool,
                                                     unsigned mtu, FrameReceiver& sink,
                                                     const RunWindow& window, double tsc_hz) {
  FrameReceiver* const sinks[] = {&sink};
  auto d = CreateEthdevDrivers(o, pool, mtu, sinks, window, tsc_hz);
  if (!d) return d.error();
  return std::move(d->front());
}

Result<Drivers> CreateEthdevDrivers(const EthdevOptions& o, rte_mempool* pool, unsigned mtu,
                                    std::span<FrameReceiver* const> sinks, const RunWindow& window,
                                    double tsc_hz) {
  if (o.pair == EthdevOptions::Pair::kRing)
    return CreateRingPorts(2, o.ToString(), pool, mtu, sinks, window, tsc_hz);
  if (o.pair == EthdevOptions::Pair::kMemif)
    return CreateMemifPair(o.ToString(), pool, mtu, sinks, window, tsc_hz);
  // net_ring from devargs: its TX ring is its RX ring, a loopback; built from a ring we own.
  if (o.port < 0 && o.devargs == DeviceName(o.devargs) && o.devargs.starts_with("net_ring"))
    return CreateRingPorts(1, o.ToString(), pool, mtu, sinks, window, tsc_hz);
  auto a = Attach(o);
  if (!a) return a.error();
  const uint16_t port = a->port;
  // A net_ring attached by other devargs (nodeaction=…) still loops its TX ring to its RX ring.
  const std::optional<uint16_t> rx_port =
      a->driver_name == "net_ring" ? std::optional<uint16_t>(port) : std::nullopt;
  Owned owned = std::move(a->owned);
  owned.pool = pool;
  if (Status s = StartPort(port, pool, mtu, a->what, static_cast<uint16_t>(sinks.size())); !s) {
    owned.Release();
    return s.error();
  }
  return MakeQueues(port, rx_port, a->virtual_dev, std::move(owned),
                    o.ToString() + fmt::format(" (port {}, {})", port, a->driver_name), sinks,
                    window, tsc_hz, SendsOnItsOwnTime(a->driver_name));
}

}  // namespace txbatch::ethdev
