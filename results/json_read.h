#pragma once
// Reading numbers back from a result document: what the record reader and the result fields'
// table (result_fields.cc) share.

#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace txbatch {

// `text` with its control characters (C0, DEL, and C1 as UTF-8) escaped, as what report prints
// from a document: an ESC in a driver name would otherwise drive the terminal.
std::string Printable(std::string_view text);

// An integer field read from a document: converts to the integer type it is assigned to, and
// refuses (a json type_error, reported as an incomplete document) anything but a JSON integer in
// that type's range — converting a float or an out-of-range value would be undefined behaviour.
struct Whole {
  const nlohmann::json& j;
  template <class T>
  requires std::is_integral_v<T>
  operator T() const {
    if (j.is_number_unsigned()) {
      if (const auto v = j.get<uint64_t>(); std::in_range<T>(v)) return static_cast<T>(v);
    } else if (j.is_number_integer()) {
      if (const auto v = j.get<int64_t>(); std::in_range<T>(v)) return static_cast<T>(v);
    }
    throw nlohmann::json::type_error::create(
        302,
        fmt::format("an integer in {}..{} was expected, not {}", std::numeric_limits<T>::min(),
                    std::numeric_limits<T>::max(), j.dump()),
        &j);
  }
};

}  // namespace txbatch
