// The ethdev driver's spec: "ethdev:DEVARGS", "ethdev:port=N", "ethdev-pair:[memif]" — syntax,
// and the devargs checks txbatch makes before DPDK sees them.
#include <fmt/format.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <charconv>
#include <string>
#include <string_view>
#include <vector>

#include "drivers/ethdev/ethdev.h"

namespace txbatch::ethdev {

std::string DeviceName(std::string_view devargs) {
  return std::string(devargs.substr(0, devargs.find(',')));
}

namespace {

// net_null reads its values with strtoul and no check: size="64" becomes a 0-byte frame and a
// failed RX queue setup ("Cannot allocate memory"), copy=yes becomes 0. txbatch checks them.
// net_null's copy=1 copies `size` bytes out of every mbuf it is given: at most the data room of
// the smallest mbuf txbatch makes (RTE_MBUF_DEFAULT_DATAROOM), or it reads past the buffer.
constexpr unsigned kMaxNullSize = RTE_MBUF_DEFAULT_DATAROOM;
Status CheckNullDevargs(std::string_view devargs, std::string_view spec) {
  size_t start = devargs.find(',');
  while (start != std::string_view::npos) {
    const size_t end = devargs.find(',', start + 1);
    const std::string_view kv = devargs.substr(start + 1, end - start - 1);
    start = end;
    const size_t eq = kv.find('=');
    const std::string_view key = kv.substr(0, eq);
    std::string_view text = eq == std::string_view::npos ? "" : kv.substr(eq + 1);
    // strtoul's base 0, as net_null reads it: 0x… hexadecimal, 0… octal, else decimal.
    int base = 10;
    if (text.starts_with("0x") || text.starts_with("0X")) {
      text.remove_prefix(2);
      base = 16;
    } else if (text.size() > 1 && text.starts_with("0")) {
      text.remove_prefix(1);
      base = 8;
    }
    unsigned v = 0;
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v, base);
    const bool number = !text.empty() && ec == std::errc() && ptr == text.data() + text.size();
    if (key == "size" && !(number && v >= 1 && v <= kMaxNullSize))
      return MakeError(EINVAL, fmt::format("'{}' in driver '{}' is not a frame size net_null can "
                                           "use; valid: size=N with N in 1..{} (no quotes)",
                                           kv, spec, kMaxNullSize));
    if ((key == "copy" || key == "no-rx") && !(number && v <= 1))
      return MakeError(EINVAL, fmt::format("'{}' in driver '{}' is not a switch net_null reads; "
                                           "valid: {}=0 or {}=1",
                                           kv, spec, key, key));
  }
  return {};
}

// Devargs keys a DPDK 22.11 PMD takes once per queue or member, so that a repeat adds one:
// net_pcap's per-queue files and interfaces, net_bonding's members, net_failsafe's
// sub-devices, net_ring's node actions. Any other key holds one value (rte_kvargs keeps the
// last of several, silently).
struct RepeatableKey {
  std::string_view pmd, key;
};
constexpr RepeatableKey kRepeatableKeys[] = {
    {"net_pcap", "rx_pcap"},     {"net_pcap", "tx_pcap"},  {"net_pcap", "rx_iface"},
    {"net_pcap", "rx_iface_in"}, {"net_pcap", "tx_iface"}, {"net_bonding", "slave"},
    {"net_failsafe", "dev"},     {"net_failsafe", "exec"}, {"net_ring", "nodeaction"},
};

// The keys of "name,key=value,..." in order; commas inside [] or () belong to a value
// (rte_kvargs lists, net_failsafe's dev(...)).
std::vector<std::string_view> DevargsKeys(std::string_view devargs) {
  std::vector<std::string_view> keys;
  int depth = 0;
  size_t start = devargs.find(',');
  if (start == std::string_view::npos) return keys;
  ++start;
  for (size_t i = start; i <= devargs.size(); ++i) {
    const char c = i < devargs.size() ? devargs[i] : ',';
    if (c == '[' || c == '(') ++depth;
    if ((c == ']' || c == ')') && depth > 0) --depth;
    if (c == ',' && depth == 0) {
      const std::string_view kv = devargs.substr(start, i - start);
      keys.push_back(kv.substr(0, kv.find('=')));
      start = i + 1;
    }
  }
  return keys;
}

}  // namespace

std::string EthdevOptions::ToString() const {
  if (pair == Pair::kRing) return "ethdev-pair:";
  if (pair == Pair::kMemif) return "ethdev-pair:memif";
  return port >= 0 ? fmt::format("ethdev:port={}", port) : "ethdev:" + devargs;
}

Result<EthdevOptions> ParseEthdevSpec(std::string_view spec) {
  EthdevOptions o;
  if (spec == "ethdev-pair:" || spec == "ethdev-pair" || spec == "ethdev-pair:ring") {
    o.pair = EthdevOptions::Pair::kRing;
    return o;
  }
  if (spec == "ethdev-pair:memif") {
    o.pair = EthdevOptions::Pair::kMemif;
    return o;
  }
  if (spec.starts_with("ethdev-pair"))
    return MakeError(EINVAL, fmt::format("'{}' is not a pair txbatch can make; valid: "
                                         "ethdev-pair: (crossed rings) or ethdev-pair:memif",
                                         spec));
  std::string_view rest = spec;
  if (rest.starts_with("ethdev:")) rest.remove_prefix(7);
  if (rest.starts_with("port=")) {
    const std::string_view num = rest.substr(5);
    unsigned p = 0;
    auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), p);
    if (num.empty() || ec != std::errc() || ptr != num.data() + num.size() || p >= RTE_MAX_ETHPORTS)
      return MakeError(EINVAL, fmt::format("'{}' is not a port id; valid: ethdev:port=N with N in "
                                           "0..{}, or ethdev:DEVARGS such as net_null0",
                                           spec, RTE_MAX_ETHPORTS - 1));
    o.port = static_cast<int>(p);
    return o;
  }
  const std::string name = DeviceName(rest);
  if (!name.starts_with("net_") || name.size() <= 4 || rest.find(' ') != std::string_view::npos)
    return MakeError(EINVAL, fmt::format("'{}' is not a vdev spec; valid: ethdev:DEVARGS with a "
                                         "DPDK virtual device such as net_null0, net_ring0, "
                                         "net_pcap0,tx_pcap=FILE, net_tap0,iface=NAME, or "
                                         "ethdev:port=N for a port probed by EAL",
                                         spec));
  const std::vector<std::string_view> keys = DevargsKeys(rest);
  for (size_t i = 1; i < keys.size(); ++i) {
    if (std::find(keys.begin(), keys.begin() + i, keys[i]) == keys.begin() + i) continue;
    bool repeatable = false;
    for (const RepeatableKey& r : kRepeatableKeys)
      repeatable |= name.starts_with(r.pmd) && keys[i] == r.key;
    if (!repeatable)
      return MakeError(EINVAL, fmt::format("key '{}' in driver '{}' is given twice, and {} takes "
                                           "one value for it (the last, silently); valid: each key "
                                           "once",
                                           keys[i], spec, name));
  }
  if (name.starts_with("net_null"))
    if (Status st = CheckNullDevargs(rest, spec); !st) return st.error();
  o.devargs = std::string(rest);
  if (name.starts_with("net_null") && o.devargs.find("no-rx") == std::string::npos)
    o.devargs += ",no-rx=1";
  return o;
}

Result<EthdevOptions> Driver::ParseReceiver(std::string_view text) {
  return ParseEthdevSpec(text.starts_with("ethdev") ? std::string(text)
                                                    : "ethdev:" + std::string(text));
}

std::vector<DriverForm> Driver::Forms() {
  return {{"ethdev:DEVARGS",
           "a DPDK vdev txbatch creates (net_null0, net_ring0 as a loopback, net_pcap0,tx_pcap=FILE, "
           "net_tap0,iface=NAME, net_af_packet0,iface=NAME, …)"},
          {"ethdev:port=N", "a port EAL probed (a NIC given after --, e.g. -a 0000:01:00.0)"},
          {"ethdev-pair:", "two ports on crossed rings, a cable: send on one, receive on the other"},
          {"ethdev-pair:memif", "a memif server and client in this process, the same kind of cable"}};
}

}  // namespace txbatch::ethdev
