#pragma once
// The one small interface every driver implements (ethdev, emu, verbs). The runner hands it
// batches; it never decides batch sizes.

#include <rte_mbuf.h>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>

#include "base/counters.h"
#include "base/tsc.h"
#include "batching/batch.h"
#include "dataplane/gso.h"

namespace txbatch {

struct LinkCounters;
class TsqLedger;

// What a link adds to every frame on the wire, the one place each number is written.
// Ethernet, beyond the frame (header .. payload): FCS 4, preamble + SFD 8, inter-frame gap 12.
inline constexpr unsigned kEthFcsBytes = 4, kEthPreambleBytes = 8, kEthIfgBytes = 12;
inline constexpr unsigned kEthWireOverheadBytes = kEthFcsBytes + kEthPreambleBytes + kEthIfgBytes;
// InfiniBand transport around a UD payload: LRH 8, BTH 12, DETH 8 before it, ICRC 4 and VCRC 2
// after it (34); a GRH (40, shaped as an IPv6 header) when routed globally. RoCE v2 keeps the
// BTH, DETH and ICRC inside UDP/IP over Ethernet.
inline constexpr unsigned kIbLrhBytes = 8, kIbBthBytes = 12, kIbDethBytes = 8, kIbIcrcBytes = 4,
                          kIbVcrcBytes = 2, kIbGrhBytes = 40;
inline constexpr unsigned kIbUdTransportBytes =
    kIbLrhBytes + kIbBthBytes + kIbDethBytes + kIbIcrcBytes + kIbVcrcBytes;

// A line-rate wire: what the throughput ceiling is computed from.
struct WireSpec {
  double bits_per_s = 0;
  unsigned min_frame_bytes = 60;  // frames shorter than this are padded (Ethernet: 60 + FCS)
  // Per frame on the wire beyond the frame: Ethernet's 24; IPoIB on IB: the 34 bytes of
  // transport, + a GRH 40 when routed globally.
  unsigned overhead_bytes = kEthWireOverheadBytes;
  // What the link puts in place of the frame's 14-byte Ethernet header, less 14 (IPoIB: its
  // 4-byte header, -10).
  int l2_delta = 0;
  // Bytes one frame of `frame_len` (Ethernet header .. payload, no FCS) occupies on the wire.
  unsigned WireBytes(unsigned frame_len) const {
    const unsigned on_link = static_cast<unsigned>(static_cast<int>(frame_len) + l2_delta);
    return (on_link < min_frame_bytes ? min_frame_bytes : on_link) + overhead_bytes;
  }
};

// Where a driver counts frames as sent for throughput (DESIGN.md Terms, counted_at).
enum class CountedAt : uint8_t { kWire, kRx, kDriver };
std::string_view CountedAtName(CountedAt c);

// An idle wire this long while frames waited is the host's: none of txbatch's threads sleeps
// longer than the txirq's idle poll (kIrqIdlePoll, 125 us) while a ring has work, and a ring holds
// more than this of wire time where it matters (e1000: 3.1 ms of 64 KB frames at 1 Gb/s).
inline constexpr double kHostStallS = 1e-3;

// A driver's counters (DriverCounters, live) and their values at one moment (DriverCounts).
template <class C>
struct DriverCountersOf {
  C xmit_calls;       // Xmit calls that offered at least one frame
  C offered;          // frames offered to Xmit
  C accepted;         // wire frames of those Xmit accepted (sent, in the books)
  C doorbells;        // tail-register writes (drivers that own one)
  C completed_bytes;  // bytes Complete reclaimed (drivers with BQL, has_bql())
  C stops;            // times the queue stopped because the ring filled
  C wakes;            // times the driver restarted it (netif_wake_queue: Linux's restart_queue)
  C tso_slices;       // MSS frames a NIC's TSO cut from GSO frames as Complete reclaimed them
  // TSC the caller spent in the model's own costs (an emulated NIC's descriptor writes and
  // doorbells): the device's pace, not txbatch's, in the emulator's self-check.
  C modelled_tsc;
  // Departures in the run window (counted_at == wire): frames, payload and wire bytes, and the
  // wire's busy time in TSC cycles.
  C window_frames, window_payload_bytes, window_wire_bytes, window_busy_tsc;
  C last_departure;       // TSC of the latest departure so far
  C window_max_idle_tsc;  // longest idle stretch of the wire that ended in the window
  // Idle stretches of a millisecond or more that ended in the window, summed (each for its part
  // inside the window, as busy time is): longer than any
  // of txbatch's threads sleeps while frames wait (kHostStall), so the host's.
  C window_stalled_tsc;

  // Every field once (base/counters.h): totals, snapshots and window differences read this.
  template <class F, class... S>
  static void Fields(F&& f, S&... s) {
    f(Sum{}, s.xmit_calls...);
    f(Sum{}, s.offered...);
    f(Sum{}, s.accepted...);
    f(Sum{}, s.doorbells...);
    f(Sum{}, s.completed_bytes...);
    f(Sum{}, s.stops...);
    f(Sum{}, s.wakes...);
    f(Sum{}, s.tso_slices...);
    f(Sum{}, s.modelled_tsc...);
    f(Sum{}, s.window_frames...);
    f(Sum{}, s.window_payload_bytes...);
    f(Sum{}, s.window_wire_bytes...);
    f(Sum{}, s.window_busy_tsc...);
    f(Max{}, s.last_departure...);
    f(Max{}, s.window_max_idle_tsc...);
    f(Sum{}, s.window_stalled_tsc...);
  }
};
struct DriverCounters : DriverCountersOf<Counter> {};
struct DriverCounts : DriverCountersOf<uint64_t> {};

// The TX half of a port (one TX queue of it). The contract, beyond each call's own:
// * Threads: one TxDriver is called by one thread at a time. On the real engine its data path
//   (Xmit, XmitOne, FreeSlots, Stopped, Complete, NextCompletion, and InFlight while the queue
//   runs) is called under its queue's TX lock (HARD_TX_LOCK), held by whoever calls: a runner,
//   a --qdisc none producer, the txirq; IdlePolling is read once, under it, when the txirq
//   starts. Purge, InFlight, ExtraCounters, link_counters and link_layer are also called by the
//   control thread once the queue's threads have stopped; the constant ones (Wire, counted_at,
//   owns_doorbell, Describe, has_bql) from anywhere. The simulation calls everything from its
//   one thread. Two TxDrivers of one port (--queues: one per queue) may be called at the same
//   time from different threads; what they share (emu's SharedWire, a DPDK port's queues) is
//   theirs to synchronise.
// * Counters: the caller's side, NetdevQueue's (every call reaches a driver through it) —
//   xmit_calls and offered for every Xmit (or XmitOne) that offered a frame, accepted for each
//   wire frame of those it took (a GSO frame's segments: WireFrames). The rest a driver keeps
//   itself, under the TX lock: stops when
//   the queue stops because it cannot take more (its ring full; verbs: its QP recovering or a
//   post refused), wakes when it restarts a queue it stopped (Linux's restart_queue),
//   doorbells if owns_doorbell(),
//   completed_bytes if has_bql(), window_frames and the window_* bytes for what it counted as
//   sent (where counted_at() says) inside the run window, last_departure, and window_busy_tsc,
//   window_max_idle_tsc and window_stalled_tsc where it models a wire. A cell's window is read
//   under that lock too (TxQueue::DriverCountsNow): a call's counters are one cut. A cell's
//   throughput comes from these alone; its per-frame costs divide the queue's counters
//   (tx_cycles, batch_hist) and CPU time by `accepted`.
// * Frames: an accepted frame is the driver's until it is freed or handed to its receiver.
//   Purge and the destructor free what the driver itself holds; what a DPDK port's PMD still
//   holds comes back when the port stops and closes (its last queue's driver gone). The
//   driver's own code neither logs nor throws on the data path, and allocates only mbufs (a
//   verbs receive refill, the link model's duplicates) and, behind a link with jitter or
//   reorder, the link model's heap of overtaking frames.
class TxDriver {
 public:
  virtual ~TxDriver() = default;

  // Offers `frames` to the device. Accepts a prefix of them and returns its length: ownership of
  // those frames passes to the driver (it frees them after delivery); the caller still owns the
  // rest (the runner requeues them). Accepts fewer than offered only when the queue is then
  // Stopped(), so the completion role is what restarts it. Rings the doorbell at most once per
  // call. Never blocks, never throws. Called under the queue's TX lock. `now` is the TSC the
  // caller read as the handover began (before its dequeue, for a qdisc's bulk: the read that
  // also starts tx_cycles; the simulation's virtual clock there): a driver
  // that needs the time for its books (the window, the last departure) takes it from there
  // rather than reading the clock again; one that models costs of its own, which move time
  // within the call (emu), keeps its own clock. Without `now` the clock is read for it.
  [[nodiscard]] uint16_t Xmit(std::span<rte_mbuf* const> frames, Tsc now) {
    return XmitAt(frames, now);
  }
  [[nodiscard]] uint16_t Xmit(std::span<rte_mbuf* const> frames) { return XmitAt(frames, Now()); }

  // Linux ndo_start_xmit with xmit_more: offers one frame; `more` says another follows at once,
  // so a driver that honours it may leave the doorbell for the last one (it must ring anyway
  // when its queue stops). Returns whether the frame was accepted (ownership passes, as for
  // Xmit). `now` as for Xmit: one read for the whole chain.
  [[nodiscard]] bool XmitOne(rte_mbuf* m, bool more, Tsc now) { return XmitOneAt(m, more, now); }
  [[nodiscard]] bool XmitOne(rte_mbuf* m, bool more) { return XmitOneAt(m, more, Now()); }

  // Descriptors free for Xmit now (blist-2007's xmit_win); kMaxBatch where the driver cannot
  // tell (a PMD's ring). Under the TX lock.
  virtual unsigned FreeSlots() const { return kMaxBatch; }

  // Whether Complete reports the bytes it reclaimed in counters().completed_bytes, as a BQL
  // driver calls netdev_tx_completed_queue. Without it BQL's limit means nothing: the kernel
  // policies get no bulking and `bql` is refused.
  virtual bool has_bql() const { return false; }
  // How it counts a frame's bytes for BQL (gso.h), in completed_bytes and as the stack queues
  // them (NetdevQueue, which reads this once, at setup).
  virtual BqlBytes bql_bytes() const { return BqlBytes::kLength; }

  // True when the ring cannot take another frame (netif_tx_queue_stopped). Under the TX lock.
  virtual bool Stopped() const = 0;
  // Why a queue that stays Stopped() does, in words that finish "…refused frames to the end:"
  // (a drain that could not finish says it): where the driver can tell more than a full ring
  // (an ethdev port whose link went down). Control plane, under the TX lock.
  virtual std::string StopCause() const { return "its ring stayed full"; }

  // The TX-completion role (IRQ + NAPI clean): reclaims descriptors whose frames left the wire
  // by `now`, hands arrived frames to the receive side and restarts a stopped queue once enough
  // descriptors are free. Returns the frames reclaimed. Under the TX lock.
  virtual unsigned Complete(Tsc now) = 0;

  // When Complete next has work worth a wake-up (a reclaim batch done, or the last frame in
  // flight); kNever when nothing is in flight. Under the TX lock.
  virtual Tsc NextCompletion() const = 0;
  // Whether the completion role must still wake now and then while NextCompletion() is kNever:
  // true where an Xmit can create work for it without stopping the queue (frames in flight that
  // complete or come back). A port that frees what it accepts needs it only when it stops, and
  // a stop wakes the completion role anyway.
  virtual bool IdlePolling() const { return true; }

  // Frames accepted and not yet delivered or dropped (ring + link). Under the TX lock.
  virtual unsigned InFlight() const = 0;

  // Frees every frame still in flight without delivering it (teardown of an aborted run);
  // returns how many. Drivers free what they hold on destruction too.
  virtual unsigned Purge() = 0;

  // The wire, when the driver has one whose rate bounds throughput.
  virtual std::optional<WireSpec> Wire() const = 0;
  virtual CountedAt counted_at() const = 0;
  // Whether doorbells are counted (drivers that own one: emu, verbs).
  virtual bool owns_doorbell() const = 0;
  // The driver spec as the user would write it, with every parameter (for the run header).
  virtual std::string Describe() const = 0;
  // The link behind the wire (--link), if this driver has one.
  virtual const LinkCounters* link_counters() const { return nullptr; }
  // The driver's own counters beyond DriverCounters, by name (verbs: posts, work requests,
  // signalled, completion errors by status …), for results.driver_counters. Control plane.
  virtual std::map<std::string, uint64_t> ExtraCounters() const { return {}; }
  // How a driver whose port can be of more than one kind reached it ("ib", "roce_v2": the
  // verbs driver, known once the device is open); empty for the others.
  virtual std::string link_layer() const { return {}; }
  // TCP Small Queues (tsq.h): a driver that reclaims frames after their completion (the
  // emulated NIC) releases each one's bytes from `tsq` there. Others ignore it (and TSQ does not
  // run on them: their completions are not seen).
  virtual void set_tsq(TsqLedger* /*tsq*/) {}

  const DriverCounters& counters() const { return counters_; }

 protected:
  // Xmit and XmitOne as the driver implements them. The default XmitOneAt is a driver without
  // xmit_more: every frame its own XmitAt, its own doorbell.
  [[nodiscard]] virtual uint16_t XmitAt(std::span<rte_mbuf* const> frames, Tsc now) = 0;
  [[nodiscard]] virtual bool XmitOneAt(rte_mbuf* m, bool more, Tsc now) {
    (void)more;
    return XmitAt({&m, 1}, now) == 1;
  }

  DriverCounters counters_;

 private:
  friend class NetdevQueue;  // counts the calls it makes: xmit_calls, offered, accepted
};

}  // namespace txbatch
