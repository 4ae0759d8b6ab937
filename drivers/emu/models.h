#pragma once
// Per-model traits of the emulated NIC. NIC quirks live here, not as `if (model == ...)` in the
// data path. Costs are modelling assumptions, not measurements of real hardware: doc/drivers/emu.md
// gives each one's source and reasoning.

#include <array>
#include <string_view>

namespace txbatch::emu {

struct ModelTraits {
  std::string_view name;
  double rate_mbps;      // line rate; 0 = infinitely fast
  unsigned ring;         // default TX ring size
  unsigned free_thresh;  // reclaim / wake threshold
  double doorbell_ns;    // one MMIO tail write
  double desc_ns;        // one descriptor write
  std::string_view about;
};

inline constexpr std::array<ModelTraits, 3> kModels = {{
    // 82540EM-class GbE: 256 descriptors (e1000 default TxDescriptors), wake at 32 free
    // (TX_WAKE_THRESHOLD); an uncached PCI MMIO write of the tail register ~ 0.5 us.
    {"e1000", 1000, 256, 32, 500, 20, "1 Gb/s GbE, ring 256"},
    // 82599-class 10 GbE: 512 descriptors (DPDK ixgbe default nb_tx_desc), tx_free_thresh 32;
    // a posted PCIe MMIO write ~ 150 ns of CPU time.
    {"ixgbe", 10000, 512, 32, 150, 10, "10 Gb/s, ring 512"},
    // No wire, no device cost: what is left is the software path alone.
    {"null", 0, 4096, 32, 0, 0, "infinitely fast, accepts everything at once"},
}};

}  // namespace txbatch::emu
