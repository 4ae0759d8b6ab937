#pragma once
// The checks every command's options share: numbers, times and lists parsed as a person typed
// them, refused with one sentence naming the option and the valid values (CLI11 validators, and
// the list parsers BuildRunPlan and the other commands call).

#include <CLI/CLI.hpp>

#include <algorithm>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "base/units.h"

namespace txbatch {

// The first value of `values` that an earlier one equals, if any.
template <typename T>
const T* FirstRepeat(const std::vector<T>& values) {
  for (size_t i = 1; i < values.size(); ++i)
    if (std::find(values.begin(), values.begin() + i, values[i]) != values.begin() + i)
      return &values[i];
  return nullptr;
}

// "OPTION gives 'VALUE' twice ...": a list that names one value twice.
Error Repeated(std::string_view option, std::string_view value);

// A validator that throws `why`'s sentence when it has one: CLI11 passes a ConversionError on
// as it is, where it would prefix a ValidationError's with the option's name.
CLI::Validator Refusing(std::function<std::string(std::string&)> why);

// `text` cut at its commas (an empty text is one empty item).
std::vector<std::string_view> SplitList(std::string_view text);

// --qdisc's comma-separated list, none twice: each item a qdisc as tc names it (pfifo_fast,
// pfifo, fq_codel, none), fq_codel with tc's parameters after it ("fq_codel target 2ms limit
// 1000"), checked here (ParseFqCodel).
Result<std::vector<std::string>> ParseQdiscList(std::string_view text);

// A comma-separated list of choices, each one of `valid`, none twice.
Result<std::vector<std::string>> ParseChoiceList(std::string_view option, std::string_view text,
                                                 std::initializer_list<std::string_view> valid);

// A numeric option's valid values, in its own unit: lo..hi, or 0 as well where `zero` says
// what 0 means there ("until SIGINT or SIGTERM"). NaN is in no range.
struct ValueRange {
  double lo = 0;
  double hi = 0;
  const char* zero = nullptr;
  bool Holds(double v) const { return (v >= lo && v <= hi) || (zero != nullptr && v == 0); }
};

// "OPTION TEXT is out of range; valid: LO..HI UNIT": the value as `text` gives it (as typed,
// 1000001 rather than 1e+06) and the range in `unit`, of which one of the option's own is
// `per_unit` (1000 for a range in seconds given in ms).
std::string OutOfRange(std::string_view option, std::string_view text, const ValueRange& range,
                       std::string_view unit, double per_unit = 1);

// How a range in `unit_ns` nanoseconds names its unit: seconds, ms, us, ns.
std::string_view TimeUnitWord(double unit_ns);

// CLI11 stores an empty value as 0 (or as "", which reads as "not given") and a uint64 option
// takes "-1" and 2^64 as 2^64-1. These validators refuse such values while parsing, with one
// sentence naming the option (thrown as a CLI::ConversionError, which CLI11 passes on as is).
// A whole number in decimal digits that fits T; `example` is a valid value for the message.
// Give it with ->transform (->check would drop the decimal reading it hands CLI11).
template <typename T>
CLI::Validator WholeNumber(std::string option, T example);
// A finite decimal number in `range` (OutOfRange's sentence with `unit` where it is not).
CLI::Validator DecimalNumber(std::string option, double example, ValueRange range,
                             std::string unit);
// A time in tc's words (500ms, 2s, 100us: base/units.h) or a bare number of the option's own
// unit (`unit_ns` nanoseconds: kSecondNs for seconds), in `range` (of that unit), handed to CLI11
// as a number of that unit. Out of range, the sentence gives the time as typed and the range in
// the unit it was typed in (--duration 5ms: valid: 10..3600000 ms).
CLI::Validator TimeIn(std::string option, double unit_ns, ValueRange range);
// Any text but the empty one; `sentence` says what the option needs.
CLI::Validator NonEmpty(std::string sentence);

// Options that show their default in --help: `name` is written once, for CLI11 and for the
// validator's sentence, and the default is the sentence's example unless `example` is given.
template <typename T>
CLI::Option* AddOptionWithDefault(CLI::App& cmd, const std::string& name, T& value,
                                  const std::string& help) {
  return cmd.add_option(name, value, help)->capture_default_str();
}
template <typename T>
CLI::Option* AddWholeNumberOption(CLI::App& cmd, const std::string& name, T& value,
                                  const std::string& help, T example) {
  return AddOptionWithDefault(cmd, name, value, help)->transform(WholeNumber(name, example));
}
template <typename T>
CLI::Option* AddWholeNumberOption(CLI::App& cmd, const std::string& name, T& value,
                                  const std::string& help) {
  return AddWholeNumberOption(cmd, name, value, help, value);
}
// A decimal option in `range` (of `unit`, as OutOfRange names it); its default the example.
inline CLI::Option* AddDecimalOption(CLI::App& cmd, const std::string& name, double& value,
                                     const std::string& help, ValueRange range,
                                     std::string unit = "") {
  return AddOptionWithDefault(cmd, name, value, help)
      ->check(DecimalNumber(name, value, range, std::move(unit)));
}

// A time option kept as a number of `unit_ns` nanoseconds, in `range` of that unit (TimeIn).
inline CLI::Option* AddTimeOption(CLI::App& cmd, const std::string& name, double& value,
                                  const std::string& help, double unit_ns, ValueRange range) {
  return AddOptionWithDefault(cmd, name, value, help)->transform(TimeIn(name, unit_ns, range));
}

// A comma-separated list of integers in lo..hi; one sentence naming `option` otherwise.
Result<std::vector<unsigned>> ParseUnsignedList(std::string_view option, std::string_view text,
                                                unsigned lo, unsigned hi);

}  // namespace txbatch
