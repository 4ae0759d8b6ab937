#pragma once
// Descriptors per queue txbatch asks an ethdev port for (the PMD may adjust them).

#include <cstdint>

namespace txbatch::ethdev {

// 1024 TX and RX descriptors: DPDK examples' usual size; a larger batch is refused in part and
// requeued, as a full ring refuses it.
inline constexpr uint16_t kRingSize = 1024;

}  // namespace txbatch::ethdev
