#pragma once
// Per-model traits of the emulated NIC. NIC quirks live here, not as `if (model == ...)` in the
// data path. Costs are modelling assumptions, not measurements of real hardware: doc/drivers/emu.md
// gives each one's source and reasoning.

#include <string_view>

#include "dataplane/gso.h"
#include "drivers/emu/emu.h"

namespace txbatch::emu {

struct ModelTraits {
  std::string_view name;
  std::string_view about;  // one phrase for --help
  NicParams nic;           // every one given in the row, whatever NicParams' default
};

// IB 4x data rates after line encoding: SDR, DDR, QDR 2.5/5/10 Gbaud x 4 lanes with 8b/10b; FDR
// 14.0625 Gbaud x 4 with 64b/66b = 54545.4545… Mb/s, kept to 2 decimals so the spec a run
// records reads back exactly (8e-8 off).
inline constexpr double kIbSdrMbps = 8000, kIbDdrMbps = 16000, kIbQdrMbps = 32000,
                        kIbFdrMbps = 54545.45;

// The IPoIB models differ in rate alone.
constexpr NicParams Ipoib(double rate_mbps) {
  return {.rate_mbps = rate_mbps, .ring = 512, .free_thresh = 16, .doorbell_ns = 150,
          .desc_ns = 30, .stop_slack = 1, .link_mtu = 2048, .tso_desc_bytes = 0,
          .tso_admit_slack = 0, .bql_bytes = BqlBytes::kLength, .tx_usecs = 0};
}

inline constexpr ModelTraits kModels[] = {
    // 82540EM-class GbE: 256 descriptors (e1000 default TxDescriptors), wake at 32 free
    // (TX_WAKE_THRESHOLD); an uncached PCI MMIO write of the tail register ~ 0.5 us; stopped
    // with fewer than MAX_SKB_FRAGS + 2 = 19 free (3.18 e1000_xmit_frame; MAX_SKB_FRAGS + 7 =
    // 24 from 4.x, `stop_slack=24`, which always leaves a TSO frame its admission's 17 + 3).
    // TSO: E1000_MAX_DATA_PER_TXD = 1 << 12 bytes a data descriptor, after a context one.
    // Completions: Linux's e1000 cleans the ring at every TX interrupt (e1000_clean_tx_irq),
    // moderated by InterruptThrottleRate's default dynamic mode — 20 000 interrupts a second
    // (50 us) in its low-latency class, 4000 (250 us) in bulk — not after a count of frames: a
    // pass 50 us after a departure at the latest.
    {"e1000", "1 Gb/s GbE, ring 256",
     {.rate_mbps = 1000, .ring = 256, .free_thresh = 32, .doorbell_ns = 500, .desc_ns = 20,
      .stop_slack = 19, .link_mtu = 0, .tso_desc_bytes = 4096, .tso_admit_slack = 3,
      .bql_bytes = BqlBytes::kLength, .tx_usecs = 50}},
    // 82599-class 10 GbE: 512 descriptors (DPDK ixgbe default nb_tx_desc), tx_free_thresh 32;
    // a posted PCIe MMIO write ~ 150 ns of CPU time; stopped with fewer than DESC_NEEDED =
    // MAX_SKB_FRAGS + 4 = 21 free (ixgbe_tx_map's ixgbe_maybe_stop_tx, 3.18 to 6.9).
    // TSO: IXGBE_MAX_DATA_PER_TXD = 1 << 14 bytes a data descriptor, after a context one.
    // Completions: Linux's ixgbe cleans its TX rings in the NAPI poll of the vector it shares
    // with an RX ring (ixgbe_poll -> ixgbe_clean_tx_irq; ixgbe_alloc_q_vectors pairs them, and
    // ixgbe_get_coalesce then reports rx-usecs alone), so its completions come at that vector's
    // interrupt rate. ixgbe_sw_init sets rx/tx_itr_setting to 1 (dynamic), with which
    // ixgbe_alloc_q_vector starts a shared vector at IXGBE_20K_ITR = 200, microseconds shifted
    // left by 2 (ixgbe.h; ixgbe_get_coalesce reports `itr_setting >> 2`): 50 us, 20 000
    // interrupts a second. ixgbe_set_itr keeps it there in its low_latency class and moves it
    // to IXGBE_8K_ITR (125 us) in bulk, IXGBE_100K_ITR (10 us) at the lowest latency: e1000's
    // shape, and e1000's bound, a pass 50 us after a departure at the latest.
    {"ixgbe", "10 Gb/s, ring 512",
     {.rate_mbps = 10000, .ring = 512, .free_thresh = 32, .doorbell_ns = 150, .desc_ns = 10,
      .stop_slack = 21, .link_mtu = 0, .tso_desc_bytes = 16384, .tso_admit_slack = 2,
      .bql_bytes = BqlBytes::kSegmentHeaders, .tx_usecs = 50}},
    // No wire, no device cost: what is left is the software path alone.
    {"null", "infinitely fast, accepts everything at once",
     {.rate_mbps = 0, .ring = 4096, .free_thresh = 32, .doorbell_ns = 0, .desc_ns = 0,
      .stop_slack = 1, .link_mtu = 0, .tso_desc_bytes = 0, .tso_admit_slack = 0,
      .bql_bytes = BqlBytes::kLength, .tx_usecs = 0}},
    // IPoIB datagram mode on a UD QP (the verbs driver's shape): a 512-deep send queue, a
    // signalled request every 16 (slots come back 16 at a time), ~30 ns to write a work request
    // and ~150 ns for the doorbell of a post (a posted MMIO, as ixgbe's; doorbell batching is the
    // point of Kalia et al., ATC '16). Link MTU 2048: IPoIB MTU 2044. ipoib_send stops the queue
    // when the send queue is full (`++priv->tx_outstanding == ipoib_sendq_size`).
    {"ipoib-sdr", "IB 4x SDR, 8 Gb/s, IPoIB UD", Ipoib(kIbSdrMbps)},
    {"ipoib-ddr", "IB 4x DDR, 16 Gb/s, IPoIB UD", Ipoib(kIbDdrMbps)},
    {"ipoib-qdr", "IB 4x QDR, 32 Gb/s, IPoIB UD", Ipoib(kIbQdrMbps)},
    {"ipoib-fdr", "IB 4x FDR, 54.55 Gb/s, IPoIB UD", Ipoib(kIbFdrMbps)},
};

}  // namespace txbatch::emu
