#include "base/units.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <optional>
#include <span>
#include <string>

namespace txbatch {
namespace {

struct Unit {
  std::string_view name;
  double scale;
};

// tc(8), UNITS. ns is not tc's (its clock is microseconds) but netem and every latency txbatch
// prints have it.
constexpr Unit kTimeUnits[] = {
    {"s", 1e9},     {"sec", 1e9}, {"secs", 1e9}, {"ms", 1e6},    {"msec", 1e6},
    {"msecs", 1e6}, {"us", 1e3},  {"usec", 1e3}, {"usecs", 1e3}, {"\xc2\xb5s", 1e3},
    {"ns", 1},      {"nsec", 1},  {"nsecs", 1},
};
constexpr double kKi = 1024, kMi = kKi * 1024, kGi = kMi * 1024, kTi = kGi * 1024;
constexpr Unit kBitRateUnits[] = {
    {"bit", 1},         {"kbit", 1e3},      {"mbit", 1e6},      {"gbit", 1e9},  {"tbit", 1e12},
    {"kibit", kKi},     {"mibit", kMi},     {"gibit", kGi},     {"tibit", kTi}, {"bps", 8},
    {"kbps", 8e3},      {"mbps", 8e6},      {"gbps", 8e9},      {"tbps", 8e12}, {"kibps", 8 * kKi},
    {"mibps", 8 * kMi}, {"gibps", 8 * kGi}, {"tibps", 8 * kTi},
};
constexpr Unit kPacketRateUnits[] = {{"pps", 1}, {"kpps", 1e3}, {"mpps", 1e6}, {"gpps", 1e9}};

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The number at the start of `text` and the unit after it, both whole: from_chars reads no
// sign but '-' and no hex; "inf" and "nan" it reads are refused as not finite; a number a double
// can only round to 0 or infinity it reports (1e-400ms would be a zero delay accepted as if
// meant). -0 reads as 0.
struct Reading {
  double value = 0;
  std::string unit;  // lower case
};
std::optional<Reading> Read(std::string_view text) {
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || !std::isfinite(v) || ptr == text.data()) return std::nullopt;
  return Reading{v + 0.0, Lower(std::string_view(ptr, text.data() + text.size() - ptr))};
}

// `value` x the scale of `unit` in `units`, finite; the bare number x `bare` where that is not 0.
std::optional<double> Scaled(const Reading& r, std::span<const Unit> units, double bare) {
  double scale = 0;
  if (r.unit.empty()) {
    scale = bare;
  } else {
    for (const Unit& u : units)
      if (r.unit == u.name) scale = u.scale;
  }
  if (scale == 0) return std::nullopt;
  const double v = r.value * scale;
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

Error Refused(std::string_view what, std::string_view text, std::string_view kind,
              std::string_view units) {
  return MakeError(EINVAL, fmt::format("{} '{}' is not {}; valid: {}", what, text, kind, units));
}

}  // namespace

const char* const kTimeUnitsSentence =
    "a number with a unit s, ms, us or ns (sec, msec, usec, nsec and their plurals too; e.g. "
    "500ms, 2s, 100us)";
const char* const kBitRateUnitsSentence =
    "a number with a unit bit, kbit, mbit, gbit or tbit (bits/s) or bps, kbps, mbps, gbps or tbps "
    "(bytes/s, as tc writes them; kibit, mibps ... for powers of 1024), e.g. 500mbit, 1gbit";
const char* const kPacketRateUnitsSentence =
    "a number with a unit pps, kpps, mpps or gpps (frames/s), e.g. 40kpps, 1.5mpps";

Result<double> ParseTimeNs(std::string_view what, std::string_view text, double bare_ns) {
  const auto r = Read(text);
  if (r && r->value >= 0)
    if (const auto ns = Scaled(*r, kTimeUnits, bare_ns)) return *ns;
  const std::string bare = bare_ns == kSecondNs ? "; a bare number is seconds"
                           : bare_ns == kMsNs   ? "; a bare number is milliseconds"
                           : bare_ns == kUsNs   ? "; a bare number is microseconds"
                           : bare_ns == 1       ? "; a bare number is nanoseconds"
                                                : "";
  return Refused(what, text, "a time", std::string(kTimeUnitsSentence) + bare);
}

Result<double> ParseBitRate(std::string_view what, std::string_view text, bool bare_ok) {
  const auto r = Read(text);
  if (r && r->value > 0)
    if (const auto bps = Scaled(*r, kBitRateUnits, bare_ok ? 1 : 0); bps && *bps > 0) return *bps;
  return Refused(what, text, "a rate",
                 std::string(kBitRateUnitsSentence) + (bare_ok ? "; a bare number is bits/s" : ""));
}

Result<double> ParsePacketRate(std::string_view what, std::string_view text) {
  const auto r = Read(text);
  if (r && r->value > 0)
    if (const auto pps = Scaled(*r, kPacketRateUnits, 0); pps && *pps > 0) return *pps;
  return Refused(what, text, "a packet rate", kPacketRateUnitsSentence);
}

bool IsPacketRateWord(std::string_view text) { return Lower(text).ends_with("pps"); }

}  // namespace txbatch
