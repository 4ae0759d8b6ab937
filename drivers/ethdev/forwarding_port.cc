// The bridge's and the sink's ports (ethdev.h: OpenForwardingPort, EthdevRx): one port each,
// configured for forwarding, promiscuous, its RX polled by the caller; an af_packet port's ring
// frames sized for the MTU.
#include <fmt/format.h>
#include <net/if.h>
#include <rte_ethdev.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <string>

#include "dataplane/capture.h"
#include "drivers/ethdev/ethdev.h"
#include "drivers/ethdev/port_setup.h"
#include "drivers/ethdev/socket_drops.h"

namespace txbatch::ethdev {
namespace {

// Nothing ever falls in it: ports the bridge drives count nothing themselves.
const RunWindow kNoWindow;

// net_af_packet's ring frames (TPACKET_V2, DPDK 22.11): the kernel writes an Ethernet frame at
// its mac offset, TPACKET_ALIGN(TPACKET2_HDRLEN + 16) - 14 = 66 bytes into the ring frame, and
// truncates what does not fit (the PMD hands on the truncated length as the frame's); RX copies
// ring frame - 32 bytes (TPACKET2_HDRLEN - sizeof(sockaddr_ll)) of room into one mbuf, TX takes
// frames up to that. The PMD's default frame is 2048 bytes: 1982 bytes of Ethernet frame.
constexpr unsigned kAfPacketMacOffset = 66;
constexpr unsigned kAfPacketRoomCut = 32;
constexpr unsigned kAfPacketDefaultFrame = 2048;
// An Ethernet header with one VLAN tag.
constexpr unsigned kL2HeaderMax = RTE_ETHER_HDR_LEN + 4;

// A ring frame that holds an `mtu` packet with its Ethernet header and a VLAN tag, and a byte
// more: a frame the kernel truncated is then longer than any that fits the MTU, so the bridge
// counts it oversize. Multiples of 1 KB, so a block of lcm(frame, page) bytes holds 1, 2 or 4
// frames (which divide the PMD's default 512).
unsigned AfPacketFrameSize(unsigned mtu) {
  const unsigned need = mtu + kL2HeaderMax + kAfPacketMacOffset + 1;
  return std::max(kAfPacketDefaultFrame, (need + 1023) / 1024 * 1024);
}

// The kernel interface's MTU (0 if it cannot be read).
unsigned KernelMtu(unsigned if_index) {
  char name[IF_NAMESIZE] = {};
  if (if_indextoname(if_index, name) == nullptr) return 0;
  const int s = socket(AF_INET, SOCK_DGRAM, 0);
  if (s < 0) return 0;
  ifreq ifr{};
  static_assert(sizeof ifr.ifr_name == sizeof name);
  std::memcpy(ifr.ifr_name, name, sizeof name);
  const int rc = ioctl(s, SIOCGIFMTU, &ifr);
  close(s);
  return rc == 0 && ifr.ifr_mtu > 0 ? static_cast<unsigned>(ifr.ifr_mtu) : 0;
}

}  // namespace

Result<ForwardingPort> OpenForwardingPort(const EthdevOptions& o, rte_mempool* pool, unsigned mtu,
                                          double tsc_hz) {
  if (o.pair != EthdevOptions::Pair::kNone)
    return MakeError(EINVAL, fmt::format("{} is two ports; valid here: one port, ethdev:DEVARGS "
                                         "or ethdev:port=N",
                                         o.ToString()));
  // An af_packet port's ring frames hold `mtu` frames whole (unless the devargs say otherwise).
  EthdevOptions opened = o;
  if (o.port < 0 && DeviceName(o.devargs).starts_with("net_af_packet") &&
      o.devargs.find("framesz=") == std::string::npos) {
    const unsigned frame = AfPacketFrameSize(mtu);
    if (frame > kAfPacketDefaultFrame) {
      opened.devargs += fmt::format(",framesz={}", frame);
      if (o.devargs.find("blocksz=") == std::string::npos)
        opened.devargs += fmt::format(
            ",blocksz={}", std::lcm(frame, static_cast<unsigned>(sysconf(_SC_PAGESIZE))));
    }
  }
  auto a = Attach(opened);
  if (!a) return a.error();
  if (a->driver_name == "net_ring") {
    a->owned.Release();
    return MakeError(EINVAL, fmt::format("{} sends every frame back to itself, which would loop "
                                         "through a bridge; valid: a port with a peer "
                                         "(net_af_packet, net_tap, net_memif, a NIC)",
                                         o.ToString()));
  }
  // A kernel interface behind the port: ethdev's MTU is at most what the PMD reports (its
  // max_rx_pktlen less the overhead ethdev assumes), the kernel's is the one frames meet.
  rte_eth_dev_info info{};
  (void)rte_eth_dev_info_get(a->port, &info);
  unsigned configured = mtu;
  if (info.if_index != 0) {
    const uint32_t overhead = info.max_mtu != UINT16_MAX && info.max_rx_pktlen > info.max_mtu
                                  ? info.max_rx_pktlen - info.max_mtu
                                  : RTE_ETHER_HDR_LEN + RTE_ETHER_CRC_LEN;
    if (info.max_rx_pktlen > overhead)
      configured = std::min({mtu, static_cast<unsigned>(info.max_mtu),
                             static_cast<unsigned>(info.max_rx_pktlen - overhead)});
  }
  a->owned.pool = pool;
  if (Status s = ConfigurePort(a->port, pool, configured, a->what); !s) {
    a->owned.Release();
    return s.error();
  }
  // Every frame on the wire, not only those for the port's own MAC: the bridge is transparent.
  // PMDs without the notion (af_packet, memif) say ENOTSUP; they pass everything anyway.
  (void)rte_eth_promiscuous_enable(a->port);
  ForwardingPort f;
  f.id = a->port;
  f.name = a->what;
  const unsigned kernel_mtu = info.if_index != 0 ? KernelMtu(info.if_index) : 0;
  f.mtu = kernel_mtu > 0 ? kernel_mtu : configured;
  f.tx = MakeEthdevPort(
      a->port, std::nullopt, 0, a->virtual_dev, std::make_shared<PortOwner>(std::move(a->owned)),
      o.ToString() + fmt::format(" ({}, {})", a->what, a->driver_name), nullptr, kNoWindow, tsc_hz);
  f.rx = std::make_unique<EthdevRx>(a->port, 0, info.if_index);
  return f;
}

EthdevRx::EthdevRx(uint16_t port, uint16_t queue, unsigned if_index) : port_(port), queue_(queue) {
  rte_eth_stats st{};
  if (rte_eth_stats_get(port_, &st) == 0) imissed_base_ = st.imissed;
  if (if_index == 0) return;
  auto drops = std::make_unique<SocketDrops>(SocketDrops::Find(if_index));
  if (!drops->empty()) socket_drops_ = std::move(drops);
}

EthdevRx::~EthdevRx() = default;

uint64_t EthdevRx::DroppedBeforeReceive() {
  rte_eth_stats st{};
  const uint64_t missed = rte_eth_stats_get(port_, &st) == 0 && st.imissed >= imissed_base_
                              ? st.imissed - imissed_base_
                              : 0;
  return missed + (socket_drops_ ? socket_drops_->Total() : 0);
}

uint16_t EthdevRx::Receive(std::span<rte_mbuf*> out) {
  const uint16_t k = rte_eth_rx_burst(
      port_, queue_, out.data(), static_cast<uint16_t>(std::min<size_t>(out.size(), UINT16_MAX)));
  if (k > 0)
    if (Capture* c = Capture::Active()) c->Received(port_, queue_, {out.data(), k});
  return k;
}

unsigned ForwardingPoolMtu(unsigned mtu) {
  // DataRoomForMtu(m) holds m + kL2HeaderMax bytes after the headroom; the PMD wants a ring
  // frame - kAfPacketRoomCut there.
  const unsigned frame = AfPacketFrameSize(mtu);
  return std::max(mtu, frame - kAfPacketRoomCut - kL2HeaderMax);
}

Status AwaitLink(const ForwardingPort& port, double wait_s, bool (*give_up)()) {
  return WaitLinkUp(port.id, port.name, wait_s > 0 ? wait_s : kLinkWaitS, give_up);
}

Result<ReceivePort> Driver::OpenReceiver(const EthdevOptions& o, const ReceiveContext& c) {
  if (c.before_wait != nullptr) c.before_wait(o.ToString());
  auto port = OpenForwardingPort(o, c.pool, c.mtu, c.tsc_hz);
  if (!port) return port.error();
  if (Status st = AwaitLink(*port, c.link_wait_s, c.give_up); !st) return st.error();
  ReceivePort r;
  r.describe = port->tx->Describe();
  r.record = o.ToString();
  r.owner = std::move(port->tx);
  r.rx = std::move(port->rx);
  return r;
}

}  // namespace txbatch::ethdev
