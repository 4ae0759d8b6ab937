#include "drivers/factory.h"

#include <fmt/format.h>

#include "dataplane/mempool.h"
#include "drivers/ethdev/ring_size.h"

namespace txbatch {

std::string DriverSpec::ToString() const {
  return std::visit([](const auto& o) { return o.ToString(); }, options);
}

unsigned DriverSpec::ring() const {
  if (const auto* e = std::get_if<emu::EmuOptions>(&options)) return e->ring;
  // The send queue (its receive buffers come from a pool of its own: own_pool_bytes).
  if (const auto* v = std::get_if<verbs::VerbsOptions>(&options)) return v->sq_depth;
  return 2u * ethdev::kRingSize;  // TX ring, and the RX ring a loopback fills
}

uint64_t DriverSpec::own_pool_bytes() const {
  if (const auto* v = std::get_if<verbs::VerbsOptions>(&options))
    return verbs::ReceivePoolBytes(*v);
  return 0;
}

double DriverSpec::modelled_cost_ns() const {
  if (const auto* e = std::get_if<emu::EmuOptions>(&options)) return e->desc_ns + e->doorbell_ns;
  return 0;
}

Result<DriverSpec> ParseDriverSpec(std::string_view text) {
  if (text.starts_with("emu:")) {
    auto o = emu::ParseEmuSpec(text);
    if (!o) return o.error();
    return DriverSpec{*o};
  }
  if (text.starts_with("ethdev:") || text.starts_with("ethdev-pair")) {
    auto o = ethdev::ParseEthdevSpec(text);
    if (!o) return o.error();
    return DriverSpec{*o};
  }
  if (text.starts_with("verbs:")) {
    auto o = verbs::ParseVerbsSpec(text);
    if (!o) return o.error();
    return DriverSpec{*o};
  }
  return MakeError(
      EINVAL, fmt::format("driver '{}' is unknown; valid: emu:MODEL[,key=value...] "
                          "with MODEL one of e1000, ixgbe, null, ethdev:DEVARGS "
                          "(a DPDK vdev such as net_null0), ethdev:port=N, ethdev-pair:[memif] "
                          "or verbs:DEVICE:PORT,qpn=N,qkey=N,lid=N (IPoIB on an HCA)",
                          text));
}

Result<std::unique_ptr<TxDriver>> CreateDriver(const DriverSpec& spec, rte_mempool* pool,
                                               unsigned mtu, FrameReceiver& sink,
                                               const RunWindow& window, double tsc_hz,
                                               const LinkSpec* link) {
  if (const auto* e = std::get_if<emu::EmuOptions>(&spec.options))
    return emu::CreateEmuDriver(*e, sink, window, tsc_hz, link);
  if (link != nullptr && link->Active())
    return MakeError(ENOTSUP, fmt::format("--link puts a link behind the emulated NIC's wire, and "
                                          "{} is not an emulated NIC; valid: --link with emu:MODEL "
                                          "drivers (DPDK ports get links with the bridge)",
                                          spec.ToString()));
  if (const auto* v = std::get_if<verbs::VerbsOptions>(&spec.options))
    return verbs::CreateVerbsDriver(*v, pool, mtu, sink, window, tsc_hz);
  return ethdev::CreateEthdevDriver(std::get<ethdev::EthdevOptions>(spec.options), pool, mtu, sink,
                                    window, tsc_hz);
}

Result<std::vector<std::unique_ptr<TxDriver>>> CreateDrivers(const DriverSpec& spec,
                                                             rte_mempool* pool, unsigned mtu,
                                                             std::span<FrameReceiver* const> sinks,
                                                             const RunWindow& window, double tsc_hz,
                                                             const LinkSpec* link) {
  std::vector<std::unique_ptr<TxDriver>> out;
  if (sinks.size() <= 1) {
    auto d = CreateDriver(spec, pool, mtu, *sinks.front(), window, tsc_hz, link);
    if (!d) return d.error();
    out.push_back(std::move(*d));
    return out;
  }
  if (link != nullptr && link->Active())
    return MakeError(ENOTSUP, fmt::format("--link with --queues {}: the link model sits behind one "
                                          "ring, not a wire shared by several; valid: --queues 1 "
                                          "with --link",
                                          sinks.size()));
  if (const auto* e = std::get_if<emu::EmuOptions>(&spec.options)) {
    const auto wire = std::make_shared<emu::SharedWire>();
    for (FrameReceiver* sink : sinks)
      out.push_back(emu::CreateEmuDriver(*e, *sink, window, tsc_hz, nullptr, nullptr, wire));
    return out;
  }
  if (const auto* o = std::get_if<ethdev::EthdevOptions>(&spec.options))
    return ethdev::CreateEthdevDrivers(*o, pool, mtu, sinks, window, tsc_hz);
  return MakeError(ENOTSUP, fmt::format("--queues {} on {}: the verbs driver posts on one queue "
                                        "pair; valid: --queues 1 with verbs",
                                        sinks.size(), spec.ToString()));
}

}  // namespace txbatch
