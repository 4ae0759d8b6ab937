#pragma once
// Names of an enum's values, kept as a table indexed by the value (a static_assert beside each
// table holds it to the enum's size).

#include <array>
#include <cstddef>
#include <string_view>

namespace txbatch {

// names[e], or `fallback` for a value beyond the table (one that was never a valid enumerator).
template <class E, size_t N>
constexpr std::string_view NameOf(const std::array<std::string_view, N>& names, E e,
                                  std::string_view fallback) {
  const auto i = static_cast<size_t>(e);
  return i < N ? names[i] : fallback;
}

}  // namespace txbatch
