#pragma once
// Quantities written in tc(8)'s words (its UNITS section), for every option and for the link
// spec: one parser, so a word means the same everywhere and a refusal is the same sentence.
// Units are case-insensitive (1Gbit, 500MS). Each function refuses, with one sentence naming
// `what` (the option, or the link spec's keyword), anything but a finite number with one of its
// units; ranges are the caller's.

#include <string_view>

#include "base/error.h"

namespace txbatch {

// TIMES: s, sec, secs; ms, msec, msecs; us, usec, usecs, µs; ns, nsec, nsecs — in nanoseconds,
// 0 or more. A bare number is `bare_ns` nanoseconds each (tc's own, netem's: microseconds,
// kUsNs; txbatch's --duration: seconds, kSecondNs); 0 refuses it.
inline constexpr double kSecondNs = 1e9, kMsNs = 1e6, kUsNs = 1e3;
Result<double> ParseTimeNs(std::string_view what, std::string_view text, double bare_ns);

// RATES in bits per second, more than 0: bit, kbit, mbit, gbit, tbit; their bytes, bps, kbps,
// mbps, gbps, tbps (a byte is 8 bits: tc's bps is bytes, not bits); the IEC forms of each
// (kibit, mibit, gibit, tibit, kibps, ...: powers of 1024). A bare number is bits (tc's rule)
// where `bare_ok`, else refused.
Result<double> ParseBitRate(std::string_view what, std::string_view text, bool bare_ok);

// Frames per second, more than 0: pps, kpps, mpps, gpps (txbatch's, as pktgen and TRex write
// them; tc has none). A bare number is refused.
Result<double> ParsePacketRate(std::string_view what, std::string_view text);

// Whether `text` ends in a packet-rate unit (so a refusal can name the right list).
bool IsPacketRateWord(std::string_view text);

// The units each parser takes, as its refusal lists them ("s, ms, us or ns ...").
extern const char* const kTimeUnitsSentence;
extern const char* const kBitRateUnitsSentence;
extern const char* const kPacketRateUnitsSentence;

}  // namespace txbatch
