#include "tools/option_checks.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>

#include "dataplane/fq_codel.h"

namespace txbatch {

Error Repeated(std::string_view option, std::string_view value) {
  return MakeError(EINVAL, fmt::format("{} gives '{}' twice, which would run the same cells "
                                       "twice; valid: each value once (--rounds repeats cells)",
                                       option, value));
}

CLI::Validator Refusing(std::function<std::string(std::string&)> why) {
  return CLI::Validator(
      [why = std::move(why)](std::string& text) -> std::string {
        if (std::string sentence = why(text); !sentence.empty())
          throw CLI::ConversionError(sentence);
        return {};
      },
      "");
}

std::vector<std::string_view> SplitList(std::string_view text) {
  std::vector<std::string_view> out;
  while (true) {
    const size_t comma = text.find(',');
    out.push_back(text.substr(0, comma));
    if (comma == std::string_view::npos) return out;
    text.remove_prefix(comma + 1);
  }
}

Result<std::vector<std::string>> ParseQdiscList(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view item : SplitList(text)) {
    const size_t space = item.find(' ');
    const std::string_view name = item.substr(0, space);
    const std::string_view words =
        space == std::string_view::npos ? std::string_view() : item.substr(space + 1);
    if (name == "fq_codel") {
      std::string error;
      if (!ParseFqCodel(words, &error))
        return MakeError(EINVAL, fmt::format("--qdisc '{}': {}", item, error));
    } else if (name != "pfifo_fast" && name != "pfifo" && name != "none") {
      return MakeError(EINVAL, fmt::format("--qdisc '{}' is not valid; valid: pfifo_fast, pfifo, "
                                           "fq_codel [tc's fq_codel parameters], none (or a "
                                           "comma-separated list of them)",
                                           item));
    } else if (!words.empty()) {
      return MakeError(EINVAL, fmt::format("--qdisc '{}': {} takes no parameters (fq_codel "
                                           "does: --qdisc 'fq_codel target 5ms')",
                                           item, name));
    }
    out.emplace_back(item);
  }
  if (const std::string* again = FirstRepeat(out)) return Repeated("--qdisc", *again);
  return out;
}

Result<std::vector<std::string>> ParseChoiceList(std::string_view option, std::string_view text,
                                                 std::initializer_list<std::string_view> valid) {
  std::vector<std::string> out;
  for (std::string_view item : SplitList(text)) {
    if (std::find(valid.begin(), valid.end(), item) == valid.end())
      return MakeError(EINVAL, fmt::format("{} '{}' is not valid; valid: {} (or a "
                                           "comma-separated list of them)",
                                           option, item, fmt::join(valid, ", ")));
    out.emplace_back(item);
  }
  if (const std::string* again = FirstRepeat(out)) return Repeated(option, *again);
  return out;
}

template <typename T>
CLI::Validator WholeNumber(std::string option, T example) {
  return Refusing([option, example](std::string& text) -> std::string {
    T v{};
    const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (!text.empty() && text[0] != '-' && text[0] != '+' && ec == std::errc() &&
        ptr == text.data() + text.size()) {
      // CLI11 converts with base 0 (010 is octal 8): hand it the decimal reading.
      text = fmt::format("{}", v);
      return {};
    }
    return fmt::format(
        "{} '{}' is not a whole number; valid: decimal digits, at most {} (e.g. "
        "{} {})",
        option, text, std::numeric_limits<T>::max(), option, example);
  });
}
template CLI::Validator WholeNumber<unsigned>(std::string, unsigned);
template CLI::Validator WholeNumber<int>(std::string, int);
template CLI::Validator WholeNumber<uint64_t>(std::string, uint64_t);

namespace {
// The whole of `text` is one finite decimal number.
bool IsDecimal(const std::string& text) {
  double v = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return !text.empty() && ec == std::errc() && ptr == text.data() + text.size() && std::isfinite(v);
}
}  // namespace

namespace {
// A bound as a person writes it: no exponent (1000000, not 1e+06), no trailing zeros.
std::string Bound(double v) {
  std::string text = fmt::format("{:.6f}", v);
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.') text.pop_back();
  return text;
}
}  // namespace

std::string OutOfRange(std::string_view option, std::string_view text, const ValueRange& range,
                       std::string_view unit, double per_unit) {
  const std::string lo = Bound(range.lo * per_unit);
  const std::string hi = Bound(range.hi * per_unit);
  const std::string tail = unit.empty() ? "" : fmt::format(" {}", unit);
  std::string valid = fmt::format("{}..{}{}", lo, hi, tail);
  if (range.zero != nullptr)
    valid = range.lo == 0 ? fmt::format("0 ({}) or up to {}{}", range.zero, hi, tail)
                          : fmt::format("0 ({}) or {}", range.zero, valid);
  return fmt::format("{} {} is out of range; valid: {}", option, text, valid);
}

std::string_view TimeUnitWord(double unit_ns) {
  return unit_ns == kSecondNs ? "seconds"
         : unit_ns == kMsNs   ? "ms"
         : unit_ns == kUsNs   ? "us"
                              : "ns";
}

CLI::Validator DecimalNumber(std::string option, double example, ValueRange range,
                             std::string unit) {
  return Refusing([option, example, range, unit](std::string& text) -> std::string {
    if (!IsDecimal(text))
      return fmt::format("{} '{}' is not a number; valid: a decimal number (e.g. {} {:g})", option,
                         text, option, example);
    double v = 0;
    std::from_chars(text.data(), text.data() + text.size(), v);
    return range.Holds(v) ? "" : OutOfRange(option, text, range, unit);
  });
}

CLI::Validator TimeIn(std::string option, double unit_ns, ValueRange range) {
  return Refusing([option, unit_ns, range](std::string& text) -> std::string {
    double value = 0;       // in the option's unit
    if (IsDecimal(text)) {  // a bare number as written: no round trip through ns
      std::from_chars(text.data(), text.data() + text.size(), value);
      return range.Holds(value) ? "" : OutOfRange(option, text, range, TimeUnitWord(unit_ns));
    }
    auto ns = ParseTimeNs(option, text, unit_ns);
    if (!ns) return ns.error().message;
    value = *ns / unit_ns;
    if (!range.Holds(value)) {
      // The range in the unit the time was typed in: its words after the number.
      double number = 0;
      const char* end = std::from_chars(text.data(), text.data() + text.size(), number).ptr;
      const std::string unit(end, text.c_str() + text.size());
      auto one = ParseTimeNs(option, "1" + unit, unit_ns);
      return OutOfRange(option, text, range, unit, one ? unit_ns / *one : 1);
    }
    text = fmt::format("{}", value);
    return {};
  });
}

CLI::Validator NonEmpty(std::string sentence) {
  return Refusing([sentence](std::string& text) { return text.empty() ? sentence : ""; });
}

Result<std::vector<unsigned>> ParseUnsignedList(std::string_view option, std::string_view text,
                                                unsigned lo, unsigned hi) {
  std::vector<unsigned> out;
  for (std::string_view item : SplitList(text)) {
    unsigned v = 0;
    auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size() || v < lo || v > hi)
      return MakeError(EINVAL, fmt::format("{} value '{}' is not valid; valid: a comma-separated "
                                           "list of integers in {}..{}",
                                           option, item, lo, hi));
    out.push_back(v);
  }
  if (const unsigned* again = FirstRepeat(out)) return Repeated(option, std::to_string(*again));
  return out;
}

}  // namespace txbatch
