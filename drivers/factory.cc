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

namespace {

template <class Options>
Result<DriverSpec> Spec(Result<Options> o) {
  if (!o) return o.error();
  return DriverSpec{*o};
}

// Every kind of driver: the prefix that names it and its parser.
struct DriverKind {
  std::string_view prefix;
  Result<DriverSpec> (*parse)(std::string_view text);
};
constexpr DriverKind kKinds[] = {
    {"emu:", [](std::string_view t) { return Spec(emu::ParseEmuSpec(t)); }},
    {"ethdev:", [](std::string_view t) { return Spec(ethdev::ParseEthdevSpec(t)); }},
    {"ethdev-pair", [](std::string_view t) { return Spec(ethdev::ParseEthdevSpec(t)); }},
    {"verbs:", [](std::string_view t) { return Spec(verbs::ParseVerbsSpec(t)); }},
};

// Every form a user writes besides emu's models (emu::ModelLines): the form and one line.
struct DriverForm {
  std::string_view form;
  std::string_view help;
};
constexpr DriverForm kForms[] = {
    {"ethdev:DEVARGS",
     "a DPDK vdev txbatch creates (net_null0, net_ring0 as a loopback, net_pcap0,tx_pcap=FILE, "
     "net_tap0,iface=NAME, net_af_packet0,iface=NAME, …)"},
    {"ethdev:port=N", "a port EAL probed (a NIC given after --, e.g. -a 0000:01:00.0)"},
    {"ethdev-pair:", "two ports on crossed rings, a cable: send on one, receive on the other"},
    {"ethdev-pair:memif", "a memif server and client in this process, the same kind of cable"},
    {"verbs:DEVICE:PORT,qpn=N,qkey=N,lid=N",
     "IPoIB datagrams on an InfiniBand HCA, one ibv_post_send per batch (doc/drivers/verbs.md)"},
    {"verbs:DEVICE:PORT,qpn=N,qkey=N,gid=GID",
     "the same on a RoCE v2 port (ConnectX in Ethernet mode, rxe)"},
};

}  // namespace

std::string DriverForms() {
  std::string s = fmt::format("emu:MODEL[,key=value...] (MODEL: {})", emu::ModelNames());
  for (size_t i = 0; i < std::size(kForms); ++i)
    s += fmt::format("; {}{}", i + 1 < std::size(kForms) ? "" : "or ", kForms[i].form);
  return s;
}

std::string DescribeDrivers() {
  // One column for every form's help, emu's models' included; a form longer than the column
  // has its help on the next line, indented to it.
  constexpr size_t kColumn = 21;
  std::string s;
  const auto line = [&s](std::string_view form, std::string_view help) {
    if (form.size() + 2 <= kColumn - 2)  // two spaces at least before the help
      s += fmt::format("  {:<{}}{}\n", form, kColumn - 2, help);
    else
      s += fmt::format("  {}\n  {:<{}}{}\n", form, "", kColumn - 2, help);
  };
  for (const emu::ModelLine& m : emu::ModelLines()) line(m.form, m.help);
  for (const DriverForm& f : kForms) line(f.form, f.help);
  return s;
}

Result<DriverSpec> ParseDriverSpec(std::string_view text) {
  for (const DriverKind& k : kKinds)
    if (text.starts_with(k.prefix)) return k.parse(text);
  return MakeError(EINVAL, fmt::format("driver '{}' is unknown; valid: {}", text, DriverForms()));
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
