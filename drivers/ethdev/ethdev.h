#pragma once
// The ethdev driver: any DPDK port — a vdev txbatch creates from its devargs (net_null, net_ring,
// net_pcap, net_tap, net_af_packet, net_memif …) or a port EAL probed (a PCI NIC given with
// `-a <pci>` after --). TX is rte_eth_tx_burst per Xmit; what the PMD does with its tail register
// is the PMD's. Public surface: the options, their parser and the factory.

#include <rte_mempool.h>

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "dataplane/run_window.h"
#include "dataplane/rx_port.h"
#include "dataplane/tx_driver.h"
#include "drivers/driver_kind.h"
#include "drivers/ethdev/ring_size.h"

namespace txbatch::ethdev {

struct EthdevOptions {
  std::string devargs;  // a vdev to create and remove again ("net_ring0"); empty when port >= 0
  int port = -1;        // a port EAL already probed
  // ethdev-pair: two ports as a cable, sending on A and receiving on B: crossed rings
  // (`ethdev-pair:`) or a memif server and client in this process (`ethdev-pair:memif`).
  enum class Pair { kNone, kRing, kMemif } pair = Pair::kNone;
  // "ethdev:net_null0,no-rx=1", "ethdev:port=0", "ethdev-pair:", "ethdev-pair:memif"
  std::string ToString() const;
};

// Parses "ethdev:DEVARGS", "ethdev:port=N", "ethdev-pair:" or "ethdev-pair:memif". net_null gets
// no-rx=1 unless the devargs say otherwise (its RX side would return zero-filled frames). Syntax
// only: whether the device exists is known when it is created.
Result<EthdevOptions> ParseEthdevSpec(std::string_view spec);

// The device name of a devargs string: "net_pcap0" of "net_pcap0,tx_pcap=x.pcap".
std::string DeviceName(std::string_view devargs);

// Creates (or attaches to) the port, configures one RX and one TX queue, starts it and waits for
// link up. Frames that come back on RX (net_ring is its own loopback) go to `sink` with their RX
// TSC; then throughput is counted at RX, else where the driver accepts them. Control plane:
// failures are one sentence (a device that does not exist, devargs the PMD rejects, a port out
// of range, a link that never comes up).
// The port's MTU is set to `mtu` (rejected if outside the port's range).
Result<std::unique_ptr<TxDriver>> CreateEthdevDriver(const EthdevOptions& options,
                                                     rte_mempool* pool, unsigned mtu,
                                                     FrameReceiver& sink, const RunWindow& window,
                                                     double tsc_hz);
// The same with one TX queue per sink (--queues): the port configured with that many TX and RX
// queues (refused with a sentence beyond what the PMD has), driver q sending on TX queue q and,
// where frames come back, receiving on RX queue q into sinks[q]. The drivers share the port; the
// last one destroyed closes it.
Result<std::vector<std::unique_ptr<TxDriver>>> CreateEthdevDrivers(
    const EthdevOptions& options, rte_mempool* pool, unsigned mtu,
    std::span<FrameReceiver* const> sinks, const RunWindow& window, double tsc_hz);

class SocketDrops;

// RX queue `queue` of port `port`: rte_eth_rx_burst.
class EthdevRx final : public RxPort {
 public:
  // `if_index`: the kernel interface behind the port (rte_eth_dev_info), 0 if none.
  EthdevRx(uint16_t port, uint16_t queue, unsigned if_index = 0);
  ~EthdevRx() override;
  uint16_t Receive(std::span<rte_mbuf*> out) override;
  // The port's imissed since this was made, and where an af_packet socket stands behind it, the
  // frames the kernel dropped on its full ring (which 22.11's PMD leaves out of imissed).
  uint64_t DroppedBeforeReceive() override;

 private:
  uint16_t port_, queue_;
  uint64_t imissed_base_ = 0;
  std::unique_ptr<SocketDrops> socket_drops_;  // null unless an AF_PACKET socket is behind it
};

// A port the caller polls itself (the bridge): created or attached as for CreateEthdevDriver, one
// RX and one TX queue, promiscuous (every frame, not only those for its MAC), started; its link
// may still be down (AwaitLink).
// `tx` transmits on it and owns it (destroying `tx` stops, closes and removes the port); `rx`
// receives on its queue 0. Refuses pairs and net_ring (a port that sends to itself would loop).
// Control plane: failures are one sentence.
// `mtu` is the largest IP MTU the caller carries: a net_af_packet port without framesz= gets
// frames that hold it whole (its default 2048-byte frames truncate longer ones, silently, to
// 1982 bytes), so `pool`'s mbufs must hold ForwardingPoolMtu(mtu). A port backed by a kernel
// interface (af_packet, tap: rte_eth_dev_info.if_index) is configured at most at the MTU its PMD
// reports (1500 for both in DPDK 22.11, which never applies it); the kernel's MTU is the one
// frames meet, and `mtu` below.
struct ForwardingPort {
  uint16_t id = 0;
  std::string name;  // "port 0 (net_af_packet0)", for messages
  std::unique_ptr<TxDriver> tx;
  std::unique_ptr<RxPort> rx;  // its RX queue 0
  // The largest IP packet the port sends: its kernel interface's MTU where it has one (read at
  // open), else the MTU it was configured with.
  unsigned mtu = 0;
};
Result<ForwardingPort> OpenForwardingPort(const EthdevOptions& options, rte_mempool* pool,
                                          unsigned mtu, double tsc_hz);
// The MTU to size a forwarding pool's mbufs for, so that every port OpenForwardingPort opens for
// `mtu` takes its frames whole (af_packet copies a whole ring frame, header room included, into
// one mbuf).
unsigned ForwardingPoolMtu(unsigned mtu);
// Waits up to `wait_s` (0: the default, a few seconds) for the port's link; a sentence if it
// stays down (the port is then stopped; destroying its `tx` closes it). A command with two ports
// opens both before waiting, so peers that connect to either (memif) find it there.
// `give_up` (polled every 10 ms; may be null): once it returns true the wait ends and succeeds,
// the link up or not — a command stopped by a signal while it waits ends cleanly, not a minute on.
Status AwaitLink(const ForwardingPort& port, double wait_s = 0, bool (*give_up)() = nullptr);

// The ethdev driver's entry in the driver table (driver_kind.h): vdevs, probed ports and pairs;
// several TX queues on one port; its frames may be captured (pcapng).
struct Driver : DriverKind {
  using Options = EthdevOptions;
  static constexpr std::string_view kPrefixes[] = {"ethdev:", "ethdev-pair"};
  static constexpr std::string_view kName = "ethdev";
  static constexpr DriverLimits kLimits{
      .emulated = false, .one_queue = {}, .captured = true, .not_forwarding = {}};
  static Result<EthdevOptions> Parse(std::string_view text) { return ParseEthdevSpec(text); }
  static std::vector<DriverForm> Forms();
  // Its TX ring, and the RX ring a loopback fills.
  static unsigned Ring(const EthdevOptions&) { return 2u * kRingSize; }
  static Result<TxDrivers> Create(const EthdevOptions& o, const DriverContext& c) {
    return CreateEthdevDrivers(o, c.pool, c.mtu, c.sinks, c.window, c.tsc_hz);
  }
  // A receiving port's spec: ethdev:DEVARGS, ethdev:port=N, or bare devargs (the port commands'
  // own form, so a spec no other driver's prefix claims is this driver's).
  static constexpr bool kBareDevargs = true;
  static constexpr std::string_view kReceiverForms =
      "ethdev:DEVARGS (e.g. net_af_packet0,iface=veth0) or ethdev:port=N";
  static Result<EthdevOptions> ParseReceiver(std::string_view text);
  // OpenForwardingPort, then the wait for its link (a sink's peer may start later).
  static Result<ReceivePort> OpenReceiver(const EthdevOptions& o, const ReceiveContext& c);
};

}  // namespace txbatch::ethdev
