#include "dataplane/tx_driver.h"

#include "base/enum_names.h"

namespace txbatch {

// Indexed by CountedAt.
constexpr std::array<std::string_view, 3> kCountedAtNames = {"wire", "rx", "driver"};
static_assert(static_cast<size_t>(CountedAt::kDriver) + 1 == kCountedAtNames.size());

std::string_view CountedAtName(CountedAt c) { return NameOf(kCountedAtNames, c, "unknown"); }

}  // namespace txbatch
