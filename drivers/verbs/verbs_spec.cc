// Parsing of verbs driver specs: "verbs:mlx5_0:1,qpn=0x48,qkey=0x11111111,lid=3". Built with or
// without libibverbs: a spec is checked either way, and only opening it needs the library.
#include <arpa/inet.h>
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <iterator>
#include <vector>

#include "dataplane/mempool.h"
#include "drivers/verbs/verbs.h"
#include "txbatch_config.h"

namespace txbatch::verbs {
namespace {

constexpr std::string_view kForm =
    "verbs:DEVICE:PORT,qpn=N,qkey=N,lid=N [,gid=GID,sgid_index=N,hop_limit=N for a routed peer] "
    "or on RoCE verbs:DEVICE:PORT,qpn=N,qkey=N,gid=GID [,sgid_index=N,hop_limit=N] "
    "[,sl=N,pkey_index=N,sq_depth=N,rq_depth=N,signal_every=N,inline_max=N]";
constexpr std::string_view kKeys =
    "qpn, qkey, lid, gid, sgid_index, hop_limit, sl, pkey_index, sq_depth, rq_depth, "
    "signal_every, inline_max";

// The keys whose number is stored as it is in an unsigned field, when in lo..hi.
struct UnsignedKey {
  std::string_view key;
  uint64_t lo, hi;
  unsigned VerbsOptions::*field;
};
constexpr UnsignedKey kUnsignedKeys[] = {
    {"qpn", 1, 0xffffff, &VerbsOptions::qpn},  // 24 bits; QP 0 is the SMI's
    {"qkey", 0, 0xffffffff, &VerbsOptions::qkey},
    {"hop_limit", 1, 255, &VerbsOptions::hop_limit},
    {"sl", 0, 15, &VerbsOptions::sl},
    {"pkey_index", 0, 0xffff, &VerbsOptions::pkey_index},
    {"sq_depth", 16, 32768, &VerbsOptions::sq_depth},
    {"rq_depth", 16, 32768, &VerbsOptions::rq_depth},
    {"signal_every", 1, 32768, &VerbsOptions::signal_every},
    {"inline_max", 0, 1024, &VerbsOptions::inline_max},
};

// Decimal or 0x-prefixed hex, all of `text`.
bool ParseNumber(std::string_view text, uint64_t& out) {
  int base = 10;
  if (text.starts_with("0x") || text.starts_with("0X")) {
    text.remove_prefix(2);
    base = 16;
  }
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out, base);
  return ec == std::errc() && ptr == text.data() + text.size();
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  while (true) {
    const size_t at = s.find(sep);
    parts.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return parts;
    s.remove_prefix(at + 1);
  }
}

}  // namespace

std::string GidText(const std::array<uint8_t, 16>& gid) {
  char text[INET6_ADDRSTRLEN] = {};
  inet_ntop(AF_INET6, gid.data(), text, sizeof text);
  return text;
}

std::string VerbsOptions::ToString() const {
  // Only what was given or defaults to a value: a receiver's has no peer, a RoCE sender's no LID,
  // an unset sgid_index is chosen when the port opens.
  std::string peer = qpn != 0 ? fmt::format("qpn={:#x},", qpn) : std::string();
  peer += fmt::format("qkey={:#x}", qkey);
  if (lid) peer += fmt::format(",lid={}", *lid);
  if (gid) {
    peer += ",gid=" + GidText(*gid);
    if (sgid_index) peer += fmt::format(",sgid_index={}", *sgid_index);
    peer += fmt::format(",hop_limit={}", hop_limit);
  }
  return fmt::format(
      "verbs:{}:{},{},sl={},pkey_index={},sq_depth={},rq_depth={},signal_every={},inline_max={}",
      device, port, peer, sl, pkey_index, sq_depth, rq_depth, signal_every, inline_max);
}

Result<VerbsOptions> ParseVerbsSpec(std::string_view spec, bool peer_required) {
  std::string_view rest = spec;
  if (!rest.starts_with("verbs:"))
    return MakeError(EINVAL,
                     fmt::format("driver '{}' is not a verbs spec; valid: {}", spec, kForm));
  rest.remove_prefix(6);
  const std::vector<std::string_view> parts = Split(rest, ',');
  const std::vector<std::string_view> head = Split(parts[0], ':');
  VerbsOptions o;
  uint64_t port = 0;
  if (head.size() != 2 || head[0].empty() || !ParseNumber(head[1], port) || port < 1 || port > 255)
    return MakeError(EINVAL, fmt::format("'{}' in driver '{}' is not DEVICE:PORT (e.g. mlx5_0:1, "
                                         "the port 1..255; ibv_devinfo lists both); valid: {}",
                                         parts[0], spec, kForm));
  o.device = std::string(head[0]);
  o.port = static_cast<unsigned>(port);
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string_view kv = parts[i];
    const size_t eq = kv.find('=');
    const std::string_view key = kv.substr(0, eq);
    const std::string_view text = eq == std::string_view::npos ? "" : kv.substr(eq + 1);
    if (eq == std::string_view::npos || text.empty())
      return MakeError(EINVAL, fmt::format("'{}' in driver '{}' is not key=value; valid keys: {}",
                                           kv, spec, kKeys));
    for (size_t j = 1; j < i; ++j)
      if (parts[j].substr(0, parts[j].find('=')) == key)
        return MakeError(EINVAL, fmt::format("key '{}' in driver '{}' is given twice, and only one "
                                             "value can hold; valid: each key once",
                                             key, spec));
    if (key == "gid") {
      std::array<uint8_t, 16> g{};
      if (inet_pton(AF_INET6, std::string(text).c_str(), g.data()) != 1)
        return MakeError(EINVAL,
                         fmt::format("gid={} in driver '{}' is not a GID; valid: 16 bytes "
                                     "written as an IPv6 address (e.g. "
                                     "fe80::2:c903:1:1b2c, or ::ffff:10.0.0.2 for a RoCE v2 GID of "
                                     "an IPv4 address, as ibv_devinfo -v shows it)",
                                     text, spec));
      o.gid = g;
      continue;
    }
    uint64_t v = 0;
    if (!ParseNumber(text, v))
      return MakeError(EINVAL, fmt::format("{}={} in driver '{}' is not a number; valid: decimal "
                                           "or 0x hex",
                                           key, text, spec));
    const auto range = [&](uint64_t lo, uint64_t hi) -> Status {
      if (v < lo || v > hi)
        return MakeError(ERANGE, fmt::format("{}={} in driver '{}' is out of range; valid: {}..{}",
                                             key, text, spec, lo, hi));
      return {};
    };
    Status st;
    const auto plain = std::find_if(std::begin(kUnsignedKeys), std::end(kUnsignedKeys),
                                    [&](const UnsignedKey& u) { return u.key == key; });
    if (plain != std::end(kUnsignedKeys)) {
      st = range(plain->lo, plain->hi);
      o.*plain->field = static_cast<unsigned>(v);
    } else if (key == "lid") {
      st = range(1, 0xbfff);  // unicast LIDs
      o.lid = static_cast<uint16_t>(v);
    } else if (key == "sgid_index") {
      st = range(0, 255);
      o.sgid_index = static_cast<unsigned>(v);  // checked against the GID table at open
    } else {
      return MakeError(EINVAL, fmt::format("key '{}' in driver '{}' is unknown; valid keys: {}",
                                           key, spec, kKeys));
    }
    if (!st) return st.error();
  }
  // Every key was valid and given once: which were given is what the rest depends on.
  const auto given = [&](std::string_view key) {
    return std::any_of(parts.begin() + 1, parts.end(),
                       [&](std::string_view p) { return p.substr(0, p.find('=')) == key; });
  };
  bool have_qpn = given("qpn");
  const bool have_qkey = given("qkey");
  const bool have_global_args = given("sgid_index") || given("hop_limit");
  const bool have_rq_depth = given("rq_depth");
  // A sink's datagrams are all it measures, and one finding no receive posted is dropped: its
  // queue absorbs a longer stall than a sender's, which only hears back what comes its way.
  if (!have_rq_depth) o.rq_depth = peer_required ? kSenderRqDepth : kReceiverRqDepth;
  if (!peer_required) {
    // A receiver sends to nobody: no address handle, and a qpn= or route given is its senders'.
    if (!have_qkey)
      return MakeError(EINVAL, fmt::format("driver '{}' has no qkey=: a receiver takes the "
                                           "datagrams sent with its Q_Key; valid: "
                                           "verbs:DEVICE:PORT,qkey=N",
                                           spec));
    o.qpn = 0;
    have_qpn = true;
  }
  if (!have_qpn || !have_qkey)
    return MakeError(EINVAL, fmt::format("driver '{}' names no peer: qpn= and qkey= are required "
                                         "(the peer's QP number and Q_Key; a second txbatch prints "
                                         "its own); valid: {}",
                                         spec, kForm));
  // Which of lid= and gid= a sender needs follows from the port's link layer, known at open.
  if (peer_required && !o.lid && !o.gid)
    return MakeError(EINVAL, fmt::format("driver '{}' has no lid= and no gid=: an InfiniBand "
                                         "packet is switched by its destination LID (the peer's, "
                                         "or for a routed peer its router's), a RoCE one is "
                                         "routed by the peer's GID; valid: {}",
                                         spec, kForm));
  if (have_global_args && !o.gid)
    return MakeError(EINVAL, fmt::format("sgid_index and hop_limit in driver '{}' belong to a "
                                         "global route; valid: with gid=GID, or lid=N alone",
                                         spec));
  if (o.signal_every > o.sq_depth)
    return MakeError(ERANGE, fmt::format("signal_every={} in driver '{}' exceeds sq_depth={}: the "
                                         "send queue would fill with nothing to reclaim it; valid: "
                                         "1..sq_depth",
                                         o.signal_every, spec, o.sq_depth));
  return o;
}

uint64_t ReceivePoolBytes(const VerbsOptions& options, unsigned held) {
  constexpr unsigned kLargestIpoibMtu = 4096;  // IB's 4096-byte MTU, IPoIB's 4092 + headers
  return PoolBytes(options.rq_depth + kReceivePoolSlack + held, kLargestIpoibMtu);
}

bool Available() { return TXBATCH_HAVE_VERBS; }

std::string_view UnavailableReason() {
  return "this txbatch was built without libibverbs (install libibverbs-dev and rebuild, or "
         "build with -Dverbs=enabled to make it required)";
}

#if !TXBATCH_HAVE_VERBS
// Without libibverbs the factories say why (verbs_device.cc has the real ones).
Result<std::unique_ptr<TxDriver>> CreateVerbsDriver(const VerbsOptions& options, rte_mempool*,
                                                    unsigned, FrameReceiver&, const RunWindow&,
                                                    double) {
  return MakeError(ENOTSUP,
                   fmt::format("{} cannot run: {}", options.ToString(), UnavailableReason()));
}

Result<std::unique_ptr<VerbsReceiver>> OpenVerbsReceiver(const VerbsOptions& options, rte_mempool*,
                                                         unsigned, double, unsigned) {
  return MakeError(ENOTSUP,
                   fmt::format("{} cannot open: {}", options.ToString(), UnavailableReason()));
}
#endif

std::vector<DriverForm> Driver::Forms() {
  return {{"verbs:DEVICE:PORT,qpn=N,qkey=N,lid=N",
           "IPoIB datagrams on an InfiniBand HCA, one ibv_post_send per batch (doc/drivers/verbs.md)"},
          {"verbs:DEVICE:PORT,qpn=N,qkey=N,gid=GID",
           "the same on a RoCE v2 port (ConnectX in Ethernet mode, rxe)"}};
}

Result<VerbsOptions> Driver::ParseReceiver(std::string_view text) {
  return ParseVerbsSpec(text, /*peer_required=*/false);
}

Result<ReceivePort> Driver::OpenReceiver(const VerbsOptions& o, const ReceiveContext& c) {
  auto r = OpenVerbsReceiver(o, c.pool, c.mtu, c.tsc_hz, c.held);
  if (!r) return r.error();
  ReceivePort port;
  port.describe = (*r)->Describe();
  port.record = port.describe;  // the options alone lack the QP number senders name
  port.rx = std::move(*r);
  return port;
}

Result<TxDrivers> Driver::Create(const VerbsOptions& o, const DriverContext& c) {
  auto d = CreateVerbsDriver(o, c.pool, c.mtu, *c.sinks.front(), c.window, c.tsc_hz);
  if (!d) return d.error();
  TxDrivers out;
  out.push_back(std::move(*d));
  return out;
}

}  // namespace txbatch::verbs
