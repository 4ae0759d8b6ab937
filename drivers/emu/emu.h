#pragma once
// The emulated NIC and wire (DESIGN.md "The emulated NIC and link"): a TX descriptor ring with
// stop/wake, completion reclaim in batches, doorbell and per-descriptor costs spent as real
// busy-waits, and a line-rate wire computed lazily from the TSC. Public surface: the options,
// their parser and the factory; the NIC itself stays inside drivers/emu.

#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "dataplane/link_spec.h"
#include "dataplane/run_window.h"
#include "dataplane/rx_port.h"
#include "dataplane/tx_driver.h"
#include "drivers/driver_kind.h"

namespace txbatch::emu {

// What a model fixes and a spec's keys may change: each model's row in models.h gives them all,
// and a spec starts from its model's (ParseEmuSpec). The defaults are e1000's rate and ring.
struct NicParams {
  double rate_mbps = 1000;  // line rate; 0 = infinitely fast (no wire)
  unsigned ring = 256;      // TX descriptors (IPoIB: the send queue's depth)
  // The queue-wake threshold, and tx_frames' default (IPoIB: a signalled request every this many)
  unsigned free_thresh = 32;
  double doorbell_ns = 0;  // one tail-register write (IPoIB: one ibv_post_send's doorbell)
  double desc_ns = 0;      // one descriptor write (IPoIB: one work request)
  // The queue stops once fewer than this many descriptors are free after a post (the driver's
  // maybe_stop_tx: room for one more skb of MAX_SKB_FRAGS + 1 fragments); 1: only a full ring.
  // At most free_thresh, where it wakes.
  unsigned stop_slack = 1;
  // IPoIB models: the IB link MTU (2048 or 4096; IPoIB MTU 4 less); 0: an Ethernet model.
  unsigned link_mtu = 0;
  // TSO (--offload tso; the model's, not a key): the bytes one data descriptor carries of a GSO
  // frame (the driver's MAX_DATA_PER_TXD), after a context descriptor; the NIC cuts the frame
  // into MSS frames on the wire. 0: no TSO (e1000 4096, ixgbe 16384).
  unsigned tso_desc_bytes = 0;
  // TSO admission (the model's): the free descriptors a GSO frame needs beyond its own before the
  // driver takes it; short of them it stops its queue and refuses the frame (NETDEV_TX_BUSY).
  // e1000: 3 (e1000_xmit_frame's `count + 2`, its count one more than the frame's descriptors:
  // the spare its sentinel workaround may take); ixgbe: 2 (ixgbe_xmit_frame_ring's `count + 3`
  // over the data descriptors, the context one among the 3). 0: its descriptors alone.
  unsigned tso_admit_slack = 0;
  // How the model's driver counts a frame's bytes for BQL (gso.h): ixgbe repeats a GSO frame's
  // headers per segment (ixgbe_tso), e1000 counts skb->len both ways (the model's).
  BqlBytes bql_bytes = BqlBytes::kLength;
  // Completion coalescing's time bound (ethtool's tx-usecs): a pass at most this long after the
  // oldest unreclaimed departure, whether or not tx_frames descriptors have departed; 0: the
  // frame bound alone (a DPDK PMD's tx_free_thresh, a verbs signal_every).
  double tx_usecs = 0;
};

struct EmuOptions : NicParams {
  std::string model = "e1000";  // e1000 | ixgbe | null | ipoib-sdr | -ddr | -qdr | -fdr
  bool grh = false;             // IPoIB models: a GRH on every packet (a globally routed peer)
  // Completion coalescing's frame bound (ethtool's tx-frames, a DPDK PMD's tx_free_thresh): a
  // pass once this many descriptors have departed (or the last in flight has). Its own bound,
  // not free_thresh's alias: moving it leaves where the queue wakes and stops alone.
  // ParseEmuSpec sets it to free_thresh unless it is given.
  unsigned tx_frames = 32;
  // Interrupt throttling (e1000's ITR register, which QEMU's e1000 models as its mitigation
  // timer): completion passes at least this long apart — the first after a quiet spell as soon
  // as it is due, each later one no sooner than itr_usecs after the previous. Descriptors done
  // meanwhile wait for it, a stopped queue's too. 0: off.
  double itr_usecs = 0;
  // A fault to test against: `stall_ms` after `stall_at_ms` from the NIC's creation its wire
  // sends nothing (completions stop, the ring fills, the queue stops), then resumes. 0: never.
  double stall_at_ms = 0;
  double stall_ms = 0;
  // A fault: `down_ms` after `down_at_ms` the link is down: frames that leave the wire then are
  // lost (freed, counted as link_down_lost in the driver's counters; the receiver sees the gap).
  double down_at_ms = 0;
  double down_ms = 0;
  std::string ToString() const;  // "emu:e1000,rate_mbps=1000,ring=256,..."
};

// The wire a model sends on: Ethernet (preamble, IFG, padding to 60 bytes, FCS) or IPoIB on IB
// (a 4-byte IPoIB header for the Ethernet one, 34 bytes of IB headers and CRCs, +40 with a GRH,
// no padding). Rate 0: none.
WireSpec EmuWire(const EmuOptions& options);
// The largest IP MTU the model carries: the IPoIB MTU (link MTU - 4), else kMaxMtu.
unsigned EmuMaxMtu(const EmuOptions& options);

// Parses "emu:MODEL[,key=value...]" (the "emu:" prefix optional); the keys are EmuOptions'
// fields (emu_spec.cc's kKeys lists them for the messages). Unknown models or keys and
// out-of-range values get one sentence that lists the valid choices.
Result<EmuOptions> ParseEmuSpec(std::string_view spec);

// The models' names, comma-separated (for the messages).
std::string ModelNames();

// The one wire the rings of several TX queues share (--queues): every ring's frames serialise on
// it in the order their doorbells ring (a NIC's TX arbiter, first come first served). Each ring
// takes `mu` while it places frames on the wire. Shared by the queues of one cell.
struct SharedWire {
  std::mutex mu;
  double free_at = 0;  // TSC (fractional) at which the wire is next free
};

// Creates the emulated NIC. Frames it delivers go to `sink` at their modelled arrival time;
// departures in `window` are counted for throughput (counted_at = wire).
// With `link`, frames leaving the wire go through the link model first (link_model.h).
// With `clock` (the simulation engine) the NIC reads time from it, and its doorbell and
// descriptor costs advance it instead of being spent as busy-waits. With `wire` (one TX queue of
// several) its ring sends on that shared wire; without, on a wire of its own.
std::unique_ptr<TxDriver> CreateEmuDriver(const EmuOptions& options, FrameReceiver& sink,
                                          const RunWindow& window, double tsc_hz,
                                          const LinkSpec* link = nullptr,
                                          VirtualClock* clock = nullptr,
                                          std::shared_ptr<SharedWire> wire = nullptr);

// The emu driver's entry in the driver table (driver_kind.h): its models' help, the NIC's ring
// and injected costs, TSO and the IPoIB models' MTU; several TX queues are rings sharing one
// wire (SharedWire), and a link may stand behind the wire of one.
struct Driver : DriverKind {
  using Options = EmuOptions;
  static constexpr std::string_view kPrefixes[] = {"emu:"};
  static constexpr std::string_view kName = "emu";
  static constexpr DriverLimits kLimits{
      .emulated = true,
      .one_queue = {},
      .captured = false,
      .not_forwarding = "is a NIC model with no port to receive on"};
  static Result<EmuOptions> Parse(std::string_view text) { return ParseEmuSpec(text); }
  static std::vector<std::string> Usage();  // "emu:MODEL[,key=value...] (MODEL: e1000, …)"
  static std::vector<DriverForm> Forms();   // a line a model and its defaults
  static unsigned Ring(const EmuOptions& o) { return o.ring; }
  static double ModelledCostNs(const EmuOptions& o) { return o.desc_ns + o.doorbell_ns; }
  static Status CheckMtu(const EmuOptions& o, unsigned mtu);  // the IPoIB models' EmuMaxMtu
  static unsigned TsoBytes(const EmuOptions& o) { return o.tso_desc_bytes; }
  static Result<TxDrivers> Create(const EmuOptions& o, const DriverContext& c);
};

}  // namespace txbatch::emu
