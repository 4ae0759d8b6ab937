#include "dataplane/tx_driver.h"

namespace txbatch {

std::string_view CountedAtName(CountedAt c) {
  switch (c) {
    case CountedAt::kWire:
      return "wire";
    case CountedAt::kRx:
      return "rx";
    case CountedAt::kDriver:
      return "driver";
  }
  return "unknown";
}

}  // namespace txbatch
