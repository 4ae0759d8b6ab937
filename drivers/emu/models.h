#pragma once
// Per-model traits of the emulated NIC. NIC quirks live here, not as `if (model == ...)` in the
// data path. Costs are modelling assumptions, not measurements of real hardware: doc/drivers/emu.md
// gives each one's source and reasoning.

#include <array>
#include <string_view>

#include "dataplane/gso.h"

namespace txbatch::emu {

struct ModelTraits {
  std::string_view name;
  double rate_mbps;      // line rate; 0 = infinitely fast
  unsigned ring;         // default TX ring size (IPoIB: the send queue's depth)
  unsigned free_thresh;  // reclaim / wake threshold (IPoIB: a signalled request every this many)
  double doorbell_ns;    // one MMIO tail write (IPoIB: one ibv_post_send's doorbell)
  double desc_ns;        // one descriptor write (IPoIB: one work request)
  // The driver stops its queue once fewer descriptors than this are free after a frame (its
  // maybe_stop_tx: room for one more skb of MAX_SKB_FRAGS + 1 fragments); 1 = only when full.
  unsigned stop_slack;
  std::string_view about;
  unsigned link_mtu = 0;  // InfiniBand (IPoIB datagram mode): the link MTU; 0 = Ethernet
  // TSO (--offload tso): the most bytes one data descriptor carries (the driver's
  // MAX_DATA_PER_TXD); a GSO frame takes a context descriptor and one per that many bytes.
  // 0: the model has no TSO.
  unsigned tso_desc_bytes = 0;
  // Completion coalescing's time bound (ethtool -C tx-usecs): a completion pass runs this long
  // after the oldest unreclaimed frame departed, if tx_frames descriptors (free_thresh's unless
  // given) have not departed first; 0: the frame bound alone (a DPDK PMD's tx_free_thresh, a
  // verbs signal_every).
  double tx_usecs = 0;
  // TSO admission: the free descriptors a GSO frame needs beyond its own before the driver
  // takes it; short of them it stops its queue and refuses the frame (NETDEV_TX_BUSY). e1000:
  // 3 (e1000_xmit_frame's `count + 2`, its count one more than the frame's descriptors: the
  // spare its sentinel workaround may take); ixgbe: 2 (ixgbe_xmit_frame_ring's `count + 3` over
  // the data descriptors, the context one among the 3). 0: its descriptors alone.
  unsigned tso_admit_slack = 0;
  // How its driver counts a frame's bytes for BQL (gso.h): ixgbe repeats a GSO frame's headers
  // per segment (ixgbe_tso), e1000 counts skb->len both ways.
  BqlBytes bql_bytes = BqlBytes::kLength;
};

// IB 4x data rates after line encoding: SDR, DDR, QDR 2.5/5/10 Gbaud x 4 lanes with 8b/10b; FDR
// 14.0625 Gbaud x 4 with 64b/66b = 54545.4545… Mb/s, kept to 2 decimals so the spec a run
// records reads back exactly (8e-8 off).
inline constexpr double kIbSdrMbps = 8000, kIbDdrMbps = 16000, kIbQdrMbps = 32000,
                        kIbFdrMbps = 54545.45;

inline constexpr std::array<ModelTraits, 7> kModels = {{
    // 82540EM-class GbE: 256 descriptors (e1000 default TxDescriptors), wake at 32 free
    // (TX_WAKE_THRESHOLD); an uncached PCI MMIO write of the tail register ~ 0.5 us; stopped
    // with fewer than MAX_SKB_FRAGS + 2 = 19 free (3.18 e1000_xmit_frame; MAX_SKB_FRAGS + 7 =
    // 24 from 4.x, `stop_slack=24`, which always leaves a TSO frame its admission's 17 + 3).
    // TSO: E1000_MAX_DATA_PER_TXD = 1 << 12 bytes a data descriptor, after a context one.
    // Completions: Linux's e1000 cleans the ring at every TX interrupt (e1000_clean_tx_irq),
    // moderated by InterruptThrottleRate's default dynamic mode — 20 000 interrupts a second
    // (50 us) in its low-latency class, 4000 (250 us) in bulk — not after a count of frames: a
    // pass 50 us after a departure at the latest.
    {"e1000", 1000, 256, 32, 500, 20, 19, "1 Gb/s GbE, ring 256", 0, 4096, 50, 3},
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
    {"ixgbe", 10000, 512, 32, 150, 10, 21, "10 Gb/s, ring 512", 0, 16384, 50, 2,
     BqlBytes::kSegmentHeaders},
    // No wire, no device cost: what is left is the software path alone.
    {"null", 0, 4096, 32, 0, 0, 1, "infinitely fast, accepts everything at once"},
    // IPoIB datagram mode on a UD QP (the verbs driver's shape): a 512-deep send queue, a
    // signalled request every 16 (slots come back 16 at a time), ~30 ns to write a work request
    // and ~150 ns for the doorbell of a post (a posted MMIO, as ixgbe's; doorbell batching is the
    // point of Kalia et al., ATC '16). Link MTU 2048: IPoIB MTU 2044. ipoib_send stops the queue
    // when the send queue is full (`++priv->tx_outstanding == ipoib_sendq_size`).
    {"ipoib-sdr", kIbSdrMbps, 512, 16, 150, 30, 1, "IB 4x SDR, 8 Gb/s, IPoIB UD", 2048},
    {"ipoib-ddr", kIbDdrMbps, 512, 16, 150, 30, 1, "IB 4x DDR, 16 Gb/s, IPoIB UD", 2048},
    {"ipoib-qdr", kIbQdrMbps, 512, 16, 150, 30, 1, "IB 4x QDR, 32 Gb/s, IPoIB UD", 2048},
    {"ipoib-fdr", kIbFdrMbps, 512, 16, 150, 30, 1, "IB 4x FDR, 54.55 Gb/s, IPoIB UD", 2048},
}};

}  // namespace txbatch::emu
