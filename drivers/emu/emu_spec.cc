// Parsing of emu driver specs: "emu:ixgbe,doorbell_ns=150,ring=1024".
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <string>
#include <vector>

#include "dataplane/frame.h"
#include "dataplane/gso.h"
#include "drivers/emu/emu.h"
#include "drivers/emu/models.h"

namespace txbatch::emu {
namespace {

// Device costs are busy-waits on the sending CPU; 100 us is already a hundred times any MMIO.
constexpr double kMaxCostNs = 100e3;
constexpr std::string_view kKeys =
    "rate_mbps, ring, free_thresh, stop_slack, doorbell_ns, desc_ns, tx_usecs, tx_frames, "
    "itr_usecs, stall_at_ms, stall_ms, down_at_ms, down_ms (and for ipoib models link_mtu, grh)";
// Completion coalescing's time bound: up to a second (a NIC's interrupt moderation registers hold
// far less).
constexpr double kMaxTxUsecs = 1e6;
constexpr unsigned kIpoibHeader = 4;
// A fault's times: up to an hour, far beyond any run.
constexpr double kMaxFaultMs = 3.6e6;

// The keys that are a decimal number in lo..hi, taken as given; `zero` says what 0 means, where
// it means more than none (for the range in a refusal).
struct DecimalKey {
  std::string_view key;
  double lo, hi;
  double EmuOptions::*field;
  std::string_view zero = {};
};
constexpr DecimalKey kDecimalKeys[] = {
    {"doorbell_ns", 0, kMaxCostNs, &EmuOptions::doorbell_ns},
    {"desc_ns", 0, kMaxCostNs, &EmuOptions::desc_ns},
    {"tx_usecs", 0, kMaxTxUsecs, &EmuOptions::tx_usecs, "no time bound, tx_frames alone"},
    {"itr_usecs", 0, kMaxTxUsecs, &EmuOptions::itr_usecs, "no throttling"},
    {"stall_at_ms", 0, kMaxFaultMs, &EmuOptions::stall_at_ms},
    {"stall_ms", 0, kMaxFaultMs, &EmuOptions::stall_ms},
    {"down_at_ms", 0, kMaxFaultMs, &EmuOptions::down_at_ms},
    {"down_ms", 0, kMaxFaultMs, &EmuOptions::down_ms},
};

bool ParseDouble(std::string_view text, double& out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size() && !text.empty() &&
         std::isfinite(out);
}

}  // namespace

std::string EmuOptions::ToString() const {
  std::string s = fmt::format(
      "emu:{},rate_mbps={:.10g},ring={},free_thresh={},stop_slack={},doorbell_ns={:g},"
      "desc_ns={:g},tx_usecs={:g}",
      model, rate_mbps, ring, free_thresh, stop_slack, doorbell_ns, desc_ns, tx_usecs);
  if (tx_frames != free_thresh) s += fmt::format(",tx_frames={}", tx_frames);
  if (itr_usecs > 0) s += fmt::format(",itr_usecs={:g}", itr_usecs);
  if (link_mtu > 0) s += fmt::format(",link_mtu={},grh={}", link_mtu, grh ? 1 : 0);
  if (stall_ms > 0) s += fmt::format(",stall_at_ms={:g},stall_ms={:g}", stall_at_ms, stall_ms);
  if (down_ms > 0) s += fmt::format(",down_at_ms={:g},down_ms={:g}", down_at_ms, down_ms);
  return s;
}

WireSpec EmuWire(const EmuOptions& o) {
  WireSpec w;
  w.bits_per_s = o.rate_mbps * 1e6;
  if (o.link_mtu > 0) {
    w.min_frame_bytes = 0;  // no padding on IB
    w.l2_delta = static_cast<int>(kIpoibHeader) - static_cast<int>(kEthHeaderBytes);
    w.overhead_bytes = kIbUdTransportBytes + (o.grh ? kIbGrhBytes : 0);
  }
  return w;
}

unsigned EmuMaxMtu(const EmuOptions& o) {
  return o.link_mtu > 0 ? o.link_mtu - kIpoibHeader : kMaxMtu;
}

Status Driver::CheckMtu(const EmuOptions& o, unsigned mtu) {
  if (mtu <= EmuMaxMtu(o)) return {};
  return MakeError(ERANGE, fmt::format("--mtu {} does not fit {}: IPoIB carries at most {} bytes of "
                                       "IP packet on a {}-byte IB link MTU; valid: --mtu {}..{}, "
                                       "or link_mtu=4096 (IPoIB MTU 4092)",
                                       mtu, o.model, EmuMaxMtu(o), o.link_mtu, kMinMtu,
                                       EmuMaxMtu(o)));
}

std::vector<DriverForm> Driver::Forms() {
  std::vector<DriverForm> lines;
  for (const auto& m : kModels)
    lines.push_back(
        {fmt::format("emu:{}", m.name),
         fmt::format("{} (rate_mbps={:.10g} ring={} free_thresh={} stop_slack={} doorbell_ns={:g} "
                     "desc_ns={:g} tx_usecs={:g}{})",
                     m.about, m.nic.rate_mbps, m.nic.ring, m.nic.free_thresh, m.nic.stop_slack,
                     m.nic.doorbell_ns, m.nic.desc_ns, m.nic.tx_usecs,
                     m.nic.link_mtu > 0 ? fmt::format(" link_mtu={} grh=0", m.nic.link_mtu)
                                        : std::string())});
  return lines;
}

std::string ModelNames() {
  std::string s;
  for (const auto& m : kModels) {
    if (!s.empty()) s += ", ";
    s += m.name;
  }
  return s;
}

std::vector<std::string> Driver::Usage() {
  return {fmt::format("emu:MODEL[,key=value...] (MODEL: {})", ModelNames())};
}

namespace {

// The spec's comma-separated parts: the model, then its key=value pairs.
std::vector<std::string_view> SpecParts(std::string_view spec) {
  std::string_view rest = spec;
  if (rest.starts_with("emu:")) rest.remove_prefix(4);
  std::vector<std::string_view> parts;
  while (true) {
    size_t comma = rest.find(',');
    parts.push_back(rest.substr(0, comma));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return parts;
}

// The model's own values, before its keys.
EmuOptions ModelDefaults(const ModelTraits& traits) {
  EmuOptions o;
  static_cast<NicParams&>(o) = traits.nic;
  o.model = std::string(traits.name);
  return o;
}

// What the keys leave to the checks across them: whether stop_slack was given, and tx_frames as
// written and read (its range is the ring's, which may come after it).
struct KeysSeen {
  bool slack_given = false;
  std::string_view tx_frames_text;
  double tx_frames = 0;
};

// One key=value of `spec` onto `o`, checked alone.
Status ApplyKey(std::string_view kv, std::string_view spec, const ModelTraits& traits,
                EmuOptions& o, KeysSeen& seen) {
  const size_t eq = kv.find('=');
  const std::string_view key = kv.substr(0, eq);
  double v = 0;
  if (eq == std::string_view::npos || !ParseDouble(kv.substr(eq + 1), v))
    return MakeError(EINVAL, fmt::format("'{}' in driver '{}' is not key=number; valid keys: {}",
                                         kv, spec, kKeys));
  const auto range = [&](double lo, double hi, bool integer,
                         std::string_view zero = {}) -> Status {
    if (v < lo || v > hi || (integer && v != std::floor(v)))
      return MakeError(
          ERANGE, fmt::format("{}={} in driver '{}' is out of range; valid: {}{}..{}{}", key,
                              kv.substr(eq + 1), spec, integer ? "an integer in " : "", lo, hi,
                              zero.empty() ? "" : fmt::format(" (0: {})", zero)));
    return {};
  };
  Status st;
  const auto decimal = std::find_if(std::begin(kDecimalKeys), std::end(kDecimalKeys),
                                    [&](const DecimalKey& d) { return d.key == key; });
  if (decimal != std::end(kDecimalKeys)) {
    st = range(decimal->lo, decimal->hi, false, decimal->zero);
    o.*decimal->field = v;
  } else if (key == "rate_mbps") {
    // 0 is "no wire"; below 1 Mb/s a full ring takes minutes to drain: not a NIC anyone tunes.
    st = v == 0 ? Status{} : range(1, 1e6, false);
    if (!st)
      return MakeError(ERANGE, fmt::format("rate_mbps={} in driver '{}' is out of range; "
                                           "valid: 0 (no wire) or 1..1000000",
                                           kv.substr(eq + 1), spec));
    o.rate_mbps = v;
  } else if (key == "ring") {
    st = range(8, 16384, true);
    if (st) o.ring = static_cast<unsigned>(v);  // a double out of range has no unsigned value
  } else if (key == "free_thresh") {
    st = range(1, 16384, true);
    if (st) o.free_thresh = static_cast<unsigned>(v);
  } else if (key == "tx_frames") {
    seen.tx_frames_text = kv.substr(eq + 1);
    seen.tx_frames = v;
  } else if (key == "stop_slack") {
    st = range(1, 16384, true);
    if (st) o.stop_slack = static_cast<unsigned>(v);
    seen.slack_given = true;
  } else if ((key == "link_mtu" || key == "grh") && traits.nic.link_mtu == 0) {
    return MakeError(EINVAL, fmt::format("key '{}' in driver '{}' belongs to the ipoib models "
                                         "(an InfiniBand link); valid keys: {}",
                                         key, spec, kKeys));
  } else if (key == "link_mtu") {
    if (v != 2048 && v != 4096)
      return MakeError(ERANGE, fmt::format("link_mtu={} in driver '{}' is not an IB link MTU "
                                           "IPoIB uses; valid: 2048 (IPoIB MTU 2044) or 4096 "
                                           "(4092)",
                                           kv.substr(eq + 1), spec));
    o.link_mtu = static_cast<unsigned>(v);
  } else if (key == "grh") {
    st = range(0, 1, true);
    o.grh = v == 1;
  } else {
    return MakeError(EINVAL, fmt::format("key '{}' in driver '{}' is unknown; valid keys: {}",
                                         key, spec, kKeys));
  }
  return st;
}

// The checks across keys, and the values derived from several.
Status Settle(std::string_view spec, const ModelTraits& traits, const KeysSeen& seen,
              EmuOptions& o) {
  if (o.free_thresh > o.ring)
    return MakeError(ERANGE, fmt::format("free_thresh={} in driver '{}' exceeds ring={}; valid: "
                                         "1..ring",
                                         o.free_thresh, spec, o.ring));
  // The frame bound: free_thresh's unless given, and then a count the ring can reach.
  if (seen.tx_frames_text.empty()) {
    o.tx_frames = o.free_thresh;
  } else if (const double n = seen.tx_frames; n < 1 || n > o.ring || n != std::floor(n)) {
    return MakeError(ERANGE, fmt::format("tx_frames={} in driver '{}' is out of range; valid: an "
                                         "integer in 1..{} (ring), the descriptors that depart "
                                         "before a completion pass",
                                         seen.tx_frames_text, spec, o.ring));
  } else {
    o.tx_frames = static_cast<unsigned>(seen.tx_frames);  // in range: it has an unsigned value
  }
  // A queue must wake with more room than it stops at, or it would stop again after a frame:
  // stop_slack < free_thresh (a free_thresh of 1 leaves only 1, a full ring).
  const unsigned most_slack = std::max(1u, o.free_thresh - 1);
  if (seen.slack_given && o.stop_slack > most_slack)
    return MakeError(ERANGE, fmt::format("stop_slack={} in driver '{}' is not below "
                                         "free_thresh={}, where the queue wakes; valid: 1..{}",
                                         o.stop_slack, spec, o.free_thresh, most_slack));
  // The model's own, within a small ring: below the wake threshold, and leaving the ring at least
  // its wake threshold to fill (a ring of free_thresh slots stops only when full).
  if (!seen.slack_given)
    o.stop_slack =
        std::max(1u, std::min({traits.nic.stop_slack, o.free_thresh - 1, o.ring - o.free_thresh}));
  // TSO needs a wire to cut the frame on and a ring that holds the largest GSO frame (GSO_MAX_SIZE
  // bytes: a context descriptor and one per tso_desc_bytes); without either the model has none.
  if (o.tso_desc_bytes > 0 &&
      (o.rate_mbps <= 0 || o.ring < 1 + (kGsoMaxSize + o.tso_desc_bytes - 1) / o.tso_desc_bytes))
    o.tso_desc_bytes = 0;
  return {};
}

}  // namespace

Result<EmuOptions> ParseEmuSpec(std::string_view spec) {
  const std::vector<std::string_view> parts = SpecParts(spec);
  const ModelTraits* traits = nullptr;
  for (const auto& m : kModels)
    if (m.name == parts[0]) traits = &m;
  if (traits == nullptr)
    return MakeError(
        EINVAL, fmt::format("emu model '{}' in driver '{}' is unknown; valid models: {}", parts[0],
                            spec, ModelNames()));
  EmuOptions o = ModelDefaults(*traits);
  KeysSeen seen;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string_view key = parts[i].substr(0, parts[i].find('='));
    for (size_t j = 1; j < i; ++j)
      if (parts[j].substr(0, parts[j].find('=')) == key)
        return MakeError(EINVAL, fmt::format("key '{}' in driver '{}' is given twice, and only one "
                                             "value can hold; valid: each key once",
                                             key, spec));
    if (Status st = ApplyKey(parts[i], spec, *traits, o, seen); !st) return st.error();
  }
  if (Status st = Settle(spec, *traits, seen, o); !st) return st.error();
  return o;
}

}  // namespace txbatch::emu
