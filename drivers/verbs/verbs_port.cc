// How the verbs driver reaches its peer on a port: InfiniBand (the LID, a GRH for a routed
// peer) or RoCE v2 (always the GRH: the peer's GID, a RoCE v2 GID of this port), the payload MTU
// and the bytes each datagram takes on the wire. Pure: the port's facts come in, so the unit tests
// decide them (tests/unit/fake_ud_qp.h) and the real open (verbs_device.cc) reads them.
#include <fmt/format.h>

#include <cstring>

#include "dataplane/frame.h"
#include "drivers/verbs/ud_qp.h"

namespace txbatch::verbs {
namespace {

unsigned MtuBytes(ibv_mtu mtu) {
  switch (mtu) {
    case IBV_MTU_256:
      return 256;
    case IBV_MTU_512:
      return 512;
    case IBV_MTU_1024:
      return 1024;
    case IBV_MTU_2048:
      return 2048;
    case IBV_MTU_4096:
      return 4096;
  }
  return 256;
}

// A RoCE v2 datagram is IPv4 when its GIDs are IPv4-mapped (::ffff:a.b.c.d), else IPv6.
bool Ipv4Mapped(const std::array<uint8_t, 16>& gid) {
  static constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(gid.data(), kPrefix, sizeof kPrefix) == 0;
}

// RoCE v2 around a UD payload: Ethernet header, IP, UDP (port 4791), then the IB BTH and DETH;
// after it the ICRC, then Ethernet's FCS, preamble and gap. Never under Ethernet's 60-byte
// minimum: 14 + 20 + 8 + 12 + 8 + 4 bytes of payload already make 66.
constexpr unsigned RoceV2Overhead(unsigned ip_header) {
  return kEthHeaderBytes + ip_header + kUdpHeaderBytes + kIbBthBytes + kIbDethBytes + kIbIcrcBytes +
         kEthWireOverheadBytes;
}

// "1 (fe80::1), 3 (::ffff:10.0.0.1)": the RoCE v2 GIDs of the port, for a sentence.
std::string RoceV2Gids(const PortFacts& f) {
  std::string s;
  for (size_t i = 0; i < f.gids.size(); ++i)
    if (f.gids[i] && f.gids[i]->type == IBV_GID_TYPE_ROCE_V2)
      s += fmt::format("{}{} ({})", s.empty() ? "" : ", ", i, GidText(f.gids[i]->raw));
  return s.empty() ? "none" : s;
}

}  // namespace

std::string_view LinkLayerName(LinkLayer l) { return l == LinkLayer::kRoceV2 ? "roce_v2" : "ib"; }

Result<PortPlan> PlanPort(const VerbsOptions& o, const PortFacts& f) {
  const std::string port = fmt::format("{} port {}", o.device, o.port);
  const bool roce = f.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (f.state != IBV_PORT_ACTIVE)
    return MakeError(
        ENETDOWN, fmt::format("{} is not active (state {}); {}", port, ibv_port_state_str(f.state),
                              roce ? "check that its netdev is up with a carrier (`rdma link` "
                                     "shows both)"
                                   : "check the cable and that a subnet manager runs (opensm)"));
  PortPlan p;
  p.has_peer = o.qpn != 0;
  p.lid = f.lid;
  p.active_mtu = MtuBytes(f.active_mtu);
  p.ipoib_mtu = p.active_mtu - kIpoibHeaderBytes;
  p.ah.sl = static_cast<uint8_t>(o.sl);
  p.ah.port_num = static_cast<uint8_t>(o.port);
  p.ah.grh.hop_limit = static_cast<uint8_t>(o.hop_limit);
  if (!roce) {
    if (p.has_peer && !o.lid)
      return MakeError(EINVAL, fmt::format("{} is InfiniBand and driver '{}' has no lid=: every "
                                           "InfiniBand packet is switched by its destination LID "
                                           "(the peer's, or for a routed peer its router's; gid= "
                                           "adds the global route); valid: lid=N (ibv_devinfo "
                                           "shows the peer's port_lid)",
                                           port, o.ToString()));
    p.link_layer = LinkLayer::kInfiniband;
    p.ah.dlid = o.lid.value_or(0);
    p.sgid_index = o.sgid_index.value_or(0);
    if (o.gid) {
      p.ah.is_global = 1;
      std::memcpy(p.ah.grh.dgid.raw, o.gid->data(), 16);
      p.ah.grh.sgid_index = static_cast<uint8_t>(p.sgid_index);
    }
    p.wire_overhead = kIbUdTransportBytes + (o.gid ? kIbGrhBytes : 0);
    p.describe = fmt::format("{} (LID {}, active MTU {})", port, f.lid, p.active_mtu);
    return p;
  }
  // RoCE: no LID on Ethernet; the GRH's GIDs become the IP addresses.
  if (p.has_peer && !o.gid)
    return MakeError(EINVAL, fmt::format("{} is RoCE (an Ethernet link layer), where the peer is "
                                         "addressed by its GID, and driver '{}' has no gid=; "
                                         "valid: gid= the peer's RoCE v2 GID (`ibv_devinfo -v` "
                                         "on the peer lists its GIDs and their types)",
                                         port, o.ToString()));
  p.link_layer = LinkLayer::kRoceV2;
  const auto v2 = [&](size_t i) {
    return i < f.gids.size() && f.gids[i] && f.gids[i]->type == IBV_GID_TYPE_ROCE_V2;
  };
  // The GRH's two GIDs are one IP family: the peer's decides which local GID may be used.
  const auto family_fits = [&](size_t i) {
    return !o.gid || Ipv4Mapped(f.gids[i]->raw) == Ipv4Mapped(*o.gid);
  };
  if (o.sgid_index) {
    const unsigned i = *o.sgid_index;
    if (!v2(i))
      return MakeError(EINVAL, fmt::format("sgid_index={} on {} is not a RoCE v2 GID ({}); "
                                           "valid: the index of one of its RoCE v2 GIDs: {}",
                                           i, port,
                                           i >= f.gids.size() || !f.gids[i] ? "an empty slot"
                                           : f.gids[i]->type == IBV_GID_TYPE_ROCE_V1
                                               ? "it is RoCE v1, which txbatch does not use"
                                               : "it is not a RoCE GID",
                                           RoceV2Gids(f)));
    if (!family_fits(i))
      return MakeError(
          EINVAL, fmt::format("sgid_index={} on {} is {}, of another IP family than "
                              "the peer's gid={}: a RoCE v2 datagram has one IP "
                              "header; valid: a RoCE v2 GID of the peer's family: {}",
                              i, port, GidText(f.gids[i]->raw), GidText(*o.gid), RoceV2Gids(f)));
    p.sgid_index = i;
  } else {
    size_t i = 0;
    while (i < f.gids.size() && !(v2(i) && family_fits(i))) ++i;
    if (i == f.gids.size())
      return MakeError(EADDRNOTAVAIL,
                       fmt::format("{} has no RoCE v2 GID{} to send from (its RoCE v2 GIDs: {}); "
                                   "check that its netdev has an IP address of that family "
                                   "(`rdma link` names the netdev, `ip addr` its addresses) or "
                                   "give sgid_index=",
                                   port,
                                   o.gid ? fmt::format(" of the peer's IP family ({})",
                                                       Ipv4Mapped(*o.gid) ? "IPv4" : "IPv6")
                                         : std::string(),
                                   RoceV2Gids(f)));
    p.sgid_index = static_cast<unsigned>(i);
  }
  p.sgid = f.gids[p.sgid_index]->raw;
  p.ah.is_global = 1;
  p.ah.dlid = 0;  // Ethernet has no LID: a lid= given is ignored
  p.ah.grh.sgid_index = static_cast<uint8_t>(p.sgid_index);
  if (o.gid) std::memcpy(p.ah.grh.dgid.raw, o.gid->data(), 16);
  p.wire_overhead = RoceV2Overhead(Ipv4Mapped(p.sgid) ? kIpv4HeaderBytes : kIpv6HeaderBytes);
  p.describe = fmt::format("{} (RoCE v2, GID {} {}, active MTU {})", port, p.sgid_index,
                           GidText(p.sgid), p.active_mtu);
  return p;
}

void ApplyPlan(const PortPlan& plan, const VerbsOptions& o, uint32_t qpn, UdQueueInfo& info) {
  info.qpn = qpn;
  info.lid = plan.lid;
  info.ipoib_mtu = plan.ipoib_mtu;
  info.link_layer = plan.link_layer;
  info.wire_overhead = plan.wire_overhead;
  info.remote_qpn = o.qpn;
  info.remote_qkey = o.qkey;
  info.describe = fmt::format("{}, QP {:#x}", plan.describe, qpn);
  if (!plan.has_peer)
    info.describe +=
        fmt::format("; senders give qpn={:#x},qkey={:#x},{}", qpn, o.qkey,
                    plan.link_layer == LinkLayer::kRoceV2 ? "gid=" + GidText(plan.sgid)
                                                          : fmt::format("lid={}", plan.lid));
}

}  // namespace txbatch::verbs
