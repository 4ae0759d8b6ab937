// The emulated NIC: descriptor ring, doorbell, completions and the wire.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>
#include <optional>
#include <vector>

#include "batching/batch.h"
#include "dataplane/frame.h"
#include "dataplane/gso.h"
#include "dataplane/link_model.h"
#include "dataplane/tsq.h"
#include "drivers/emu/emu.h"

namespace txbatch::emu {
namespace {

// Frames handed to the sink per Receive call while reclaiming (a GSO frame's segments may take
// it up to kDeliverChunk - 1 + kMaxGsoSegs).
inline constexpr unsigned kDeliverChunk = 64;
inline constexpr unsigned kDeliverRoom = kDeliverChunk + kMaxGsoSegs;

class EmuNic final : public TxDriver {
 public:
  EmuNic(const EmuOptions& o, FrameReceiver& sink, const RunWindow& window, double tsc_hz,
         const LinkSpec* link, VirtualClock* clock, std::shared_ptr<SharedWire> wire)
      : clock_(clock),
        shared_wire_(std::move(wire)),
        link_free_(shared_wire_ != nullptr ? &shared_wire_->free_at : &own_link_free_),
        options_(o),
        sink_(sink),
        window_(window),
        infinite_(o.rate_mbps <= 0),
        tsc_per_wire_byte_(infinite_ ? 0 : 8.0 * tsc_hz / (o.rate_mbps * 1e6)),
        doorbell_tsc_(o.doorbell_ns * tsc_hz / 1e9),
        desc_tsc_(o.desc_ns * tsc_hz / 1e9),
        tx_usecs_tsc_(static_cast<Tsc>(o.tx_usecs * tsc_hz / 1e6)),
        itr_tsc_(static_cast<Tsc>(o.itr_usecs * tsc_hz / 1e6)),
        wire_(EmuWire(o)),
        ring_(o.ring),
        meta_offset_(TxMetaOffset()),
        idle_poll_tsc_(static_cast<Tsc>(125e-6 * tsc_hz)),
        host_stall_tsc_(static_cast<uint64_t>(kHostStallS * tsc_hz)) {
    if (o.stall_ms > 0 && !infinite_) {
      stall_from_ = static_cast<double>(Clock()) + o.stall_at_ms * 1e-3 * tsc_hz;
      stall_until_ = stall_from_ + o.stall_ms * 1e-3 * tsc_hz;
    }
    if (o.down_ms > 0 && !infinite_) {
      down_from_ = Clock() + static_cast<Tsc>(o.down_at_ms * 1e-3 * tsc_hz);
      down_until_ = down_from_ + static_cast<Tsc>(o.down_ms * 1e-3 * tsc_hz);
    }
    if (link != nullptr && link->Active()) link_.emplace(*link, tsc_hz);
  }

  ~EmuNic() override { Purge(); }

  unsigned Purge() override {
    unsigned n = frames_in_ring_;
    for (count_ += unrung_, unrung_ = 0; count_ > 0; --count_) {
      if (tsq_ != nullptr) tsq_->Release(ring_[head_].m, 0);  // freed, never completed
      rte_pktmbuf_free(ring_[head_].m);
      head_ = (head_ + 1) % ring_.size();
    }
    descs_used_ = frames_in_ring_ = 0;
    if (link_) n += link_->Purge();
    return n;
  }

  // Emu's modelled costs move time within a call (Spend): it reads its own clock (Clock) and
  // leaves the caller's.
  uint16_t XmitAt(std::span<rte_mbuf* const> frames, Tsc /*now*/) override {
    return Post(frames, false);
  }
  bool XmitOneAt(rte_mbuf* m, bool more, Tsc /*now*/) override { return Post({&m, 1}, more) == 1; }
  // Free descriptors (a GSO frame takes several: Descs).
  unsigned FreeSlots() const override {
    return infinite_ ? kMaxBatch : static_cast<unsigned>(ring_.size()) - descs_used_;
  }
  bool has_bql() const override { return true; }
  BqlBytes bql_bytes() const override { return options_.bql_bytes; }

  bool Stopped() const override { return stopped_; }

  unsigned Complete(Tsc now) override {
    unsigned done = 0;
    std::array<rte_mbuf*, kDeliverRoom> frames;
    std::array<Tsc, kDeliverRoom> arrival;
    // Interrupt throttling (itr_usecs): no pass before the throttle lets the next interrupt
    // through; what is done meanwhile waits for it.
    const bool throttled = now < throttle_until_;
    while (!throttled && count_ > 0) {
      unsigned k = 0;
      unsigned reclaimed = 0;
      while (count_ > 0 && k < kDeliverChunk && ring_[head_].departure <= now) {
        const Desc& d = ring_[head_];
        counters_.completed_bytes.Add(BqlBytesOf(d.m, options_.bql_bytes));
        // The skb is freed (tcp_wfree); its flow's delivery rate is sampled at its departure, the
        // clock its ACK would keep, not the reclaim's cadence.
        if (tsq_ != nullptr) tsq_->Release(d.m, d.departure);
        const unsigned wire_frames = WireFrames(d.m);
        if (d.departure >= down_from_ && d.departure < down_until_) {
          // The link is down (down_ms): the frame is lost past the wire, counted here.
          link_down_lost_.Add(wire_frames);
          rte_pktmbuf_free(d.m);
        } else if (wire_frames > 1) {
          // TSO: the NIC sent it as MSS frames, one after the other from its first bit.
          const unsigned n = SegmentGso(d.m, std::span(frames).subspan(k));
          counters_.tso_slices.Add(n);
          double at = d.start;
          for (unsigned i = 0; i < n; ++i) {
            at += wire_.WireBytes(rte_pktmbuf_pkt_len(frames[k + i])) * tsc_per_wire_byte_;
            arrival[k + i] = std::min(static_cast<Tsc>(at), d.departure);
            CountDeparture(frames[k + i], arrival[k + i]);
          }
          k += n;
        } else {
          CountDeparture(d.m, d.departure);
          frames[k] = d.m;
          arrival[k] = d.departure;  // no propagation delay yet: arrival = departure
          ++k;
        }
        ++reclaimed;
        descs_used_ -= d.descs;
        frames_in_ring_ -= wire_frames;
        head_ = (head_ + 1) % ring_.size();
        --count_;
      }
      // Entries (a GSO frame is one) reclaimed; `k` counts the frames delivered.
      const unsigned delivered = k;
      done += reclaimed;
      if (reclaimed == 0) break;
      if (link_) {
        for (unsigned i = 0; i < delivered; ++i) link_->Offer(frames[i], arrival[i]);
      } else if (delivered > 0) {
        sink_.Receive({frames.data(), delivered}, {arrival.data(), delivered});
      }
    }
    if (link_) DeliverFromLink(now);
    // netif_wake_queue, counted as the drivers count it (e1000's and ixgbe's restart_queue,
    // ethtool -S's tx_restart_queue).
    if (stopped_ && FreeSlots() >= options_.free_thresh) {
      stopped_ = false;
      counters_.wakes.Add();
    }
    if (done > 0 && itr_tsc_ > 0) throttle_until_ = now + itr_tsc_;
    return done;
  }

  Tsc NextCompletion() const override {
    const Tsc link_next = link_ ? link_->NextArrival() : kNever;
    // An empty ring with frames still in the link: wake by the link's next arrival, but no later
    // than an idle ring would (the txirq's idle poll), so frames sent meanwhile are reclaimed as
    // they would be without a link.
    if (count_ == 0)
      return link_next == kNever ? kNever : std::min(link_next, Clock() + idle_poll_tsc_);
    // Reclaim in batches of tx_frames descriptors (coalescing's frame bound); a stopped queue
    // no later than its wake threshold is free (it stopped with stop_slack - 1 free, so fewer
    // have to go), a pass at tx_frames first not waking it if that leaves it short.
    const unsigned room = static_cast<unsigned>(ring_.size()) - (descs_used_ - UnrungDescs());
    const unsigned to_wake =
        std::max(1u, options_.free_thresh - std::min(room, options_.free_thresh));
    const unsigned need = stopped_ ? std::min(options_.tx_frames, to_wake) : options_.tx_frames;
    Tsc due = ring_[(head_ + EntriesFreeing(need) - 1) % ring_.size()].departure;
    // Coalescing's time bound: tx_usecs after the oldest departure, however few have gone.
    if (tx_usecs_tsc_ > 0) due = std::min(due, ring_[head_].departure + tx_usecs_tsc_);
    // Interrupt throttling: not before the previous pass's interrupt lets the next one through.
    due = std::max(due, throttle_until_);
    return std::min(link_next, due);
  }

  // A model without a wire (emu:null) completes and delivers inside its call: with no link
  // holding frames, the completion role never has work (and its polls would take the TX lock
  // from the producers 8000 times a second for nothing).
  bool IdlePolling() const override { return !infinite_ || link_.has_value(); }

  unsigned InFlight() const override { return frames_in_ring_ + (link_ ? link_->InFlight() : 0); }
  std::map<std::string, uint64_t> ExtraCounters() const override {
    if (down_until_ == 0) return {};
    return {{"link_down_lost", link_down_lost_.Get()}};
  }
  const LinkCounters* link_counters() const override {
    return link_ ? &link_->counters() : nullptr;
  }

  std::optional<WireSpec> Wire() const override {
    if (infinite_) return std::nullopt;
    return wire_;
  }
  CountedAt counted_at() const override { return CountedAt::kWire; }
  bool owns_doorbell() const override { return true; }
  std::string Describe() const override { return options_.ToString(); }
  void set_tsq(TsqLedger* tsq) override { tsq_ = tsq; }

 private:
  // Writes descriptors for `frames` (as many as the ring has room for) and rings the doorbell
  // unless `more` says another frame follows at once (xmit_more). The queue stops once fewer
  // than stop_slack descriptors are free (maybe_stop_tx), and a queue that stops is rung anyway,
  // as e1000 and ixgbe do (`netif_xmit_stopped(txq) || !netdev_xmit_more()`).
  uint16_t Post(std::span<rte_mbuf* const> frames, bool more) {
    if (frames.empty()) return 0;
    const Tsc now = Clock();
    if (infinite_) return XmitInfinite(frames, now, more);
    unsigned n = 0, descs = 0, wire_frames = 0;
    for (; n < frames.size(); ++n) {
      const unsigned need = Descs(frames[n]);
      // A GSO frame is admitted only with its driver's slack free beyond its own descriptors
      // (tso_admit_slack: e1000_xmit_frame's count + 2); a plain frame's admission never binds
      // behind stop_slack, and a stopped queue's burst (--qdisc none) takes what fits.
      if (need + (IsGso(frames[n]) ? options_.tso_admit_slack : 0) > FreeSlots()) break;
      Desc& d = ring_[(head_ + count_ + unrung_) % ring_.size()];
      d.m = frames[n];
      d.departure = kNever;  // the NIC has not seen it yet
      d.descs = need;
      descs_used_ += need;
      descs += need;
      wire_frames += WireFrames(frames[n]);
      ++unrung_;
    }
    if (n == 0) {
      if (unrung_ > 0) RingDoorbell(now);  // whatever was written must not wait for a doorbell
      StopRefusing();
      return 0;
    }
    frames_in_ring_ += wire_frames;
    // A frame that did not fit stops the queue too (NETDEV_TX_BUSY's netif_stop_queue): only a
    // GSO frame can meet that with the queue open, behind a stop_slack below its descriptors.
    const bool stops = !stopped_ && (FreeSlots() < options_.stop_slack || n < frames.size());
    double cost = desc_tsc_ * descs;  // the CPU time the descriptor writes take
    if (!more || stops || stopped_) {
      RingDoorbell(now);
      cost += doorbell_tsc_;  // and the MMIO tail write
    }
    Spend(now, cost);
    if (stops) {
      stopped_ = true;
      counters_.stops.Add();
    }
    return static_cast<uint16_t>(n);
  }

  // Nothing fitted: the queue stops (a ring model's refusal always leaves it stopped, so the
  // completion role is what restarts it).
  void StopRefusing() {
    if (stopped_) return;
    stopped_ = true;
    counters_.stops.Add();
  }

  // The tail write at `now`: the NIC sees every descriptor written since the last one, and their
  // frames go on the wire in order.
  void RingDoorbell(Tsc now) {
    counters_.doorbells.Add();
    // A wire shared with other queues' rings is placed under its lock (one per doorbell).
    std::unique_lock<std::mutex> wire_lock;
    if (shared_wire_ != nullptr) wire_lock = std::unique_lock(shared_wire_->mu);
    double& free_at = *link_free_;
    if (free_at < static_cast<double>(now)) {
      // The wire sat idle: the ring ran dry (or the load is below line rate). Before the first
      // frame it was not idle, just unused.
      if (free_at > 0 && window_.Contains(now)) {
        const auto idle = static_cast<uint64_t>(static_cast<double>(now) - free_at);
        counters_.window_max_idle_tsc.Max(idle);
        // A stall is booked for its part inside the window, as busy time is: one that began
        // before the window started overlapped the busy time booked for it (busy + stalled came
        // to 0.3 % more than the window in a test).
        const double start = static_cast<double>(window_.start.load(std::memory_order_relaxed));
        if (idle >= host_stall_tsc_)
          counters_.window_stalled_tsc.Add(
              static_cast<uint64_t>(static_cast<double>(now) - std::max(free_at, start)));
      }
      free_at = static_cast<double>(now);
    }
    for (; unrung_ > 0; --unrung_, ++count_) {
      Desc& d = ring_[(head_ + count_) % ring_.size()];
      // A stalled wire (stall_ms) starts nothing until the stall is over.
      if (free_at >= stall_from_ && free_at < stall_until_) free_at = stall_until_;
      // Its first bit goes when the wire is free: the ring wait, for the latency split.
      if (meta_offset_ >= 0) {
        TxMeta* t = MetaOf(d.m, meta_offset_);
        t->to_wire =
            Saturate32(static_cast<Tsc>(free_at) - std::min(now, static_cast<Tsc>(free_at)));
        t->flags |= kMetaWireKnown;
      }
      // departure = max(now, link_free) + bytes x 8 / rate: serialisation, lazily from the TSC.
      // A GSO frame leaves as its MSS frames, back to back (TSO).
      d.start = free_at;
      free_at += WireBytesOf(d.m) * tsc_per_wire_byte_;
      d.departure = static_cast<Tsc>(free_at);
    }
  }

  // Hands the frames the link has delivered by `now` to the sink, at their arrival times.
  void DeliverFromLink(Tsc now) {
    std::array<rte_mbuf*, kDeliverChunk> frames;
    std::array<Tsc, kDeliverChunk> arrival;
    while (const unsigned k = link_->Deliver(now, frames, arrival))
      sink_.Receive({frames.data(), k}, {arrival.data(), k});
  }

  struct Desc {
    rte_mbuf* m;
    Tsc departure;   // TSC at which its last bit leaves the wire
    double start;    // TSC (fractional) at which its first bit does
    unsigned descs;  // descriptors it takes (Descs)
  };

  // Descriptors frame `m` takes: 1, or for a GSO frame (TSO) a context descriptor and one per
  // tso_desc_bytes of it (e1000/ixgbe_tx_map's TXD_USE_COUNT over the skb).
  unsigned Descs(const rte_mbuf* m) const {
    if (!IsGso(m)) return 1;
    return 1 + (rte_pktmbuf_pkt_len(m) + options_.tso_desc_bytes - 1) / options_.tso_desc_bytes;
  }
  // Bytes `m` takes on the wire: a GSO frame's segments each with its headers and overhead.
  double WireBytesOf(const rte_mbuf* m) const {
    const unsigned len = rte_pktmbuf_pkt_len(m);
    if (!IsGso(m)) return wire_.WireBytes(len);
    const unsigned hdr = m->l2_len + m->l3_len + m->l4_len, mss = m->tso_segsz;
    const unsigned payload = len - hdr, full = payload / mss, last = payload % mss;
    return full * wire_.WireBytes(hdr + mss) + (last > 0 ? wire_.WireBytes(hdr + last) : 0);
  }
  // Descriptors written after the last doorbell.
  unsigned UnrungDescs() const {
    unsigned n = 0;
    for (unsigned i = 0; i < unrung_; ++i) n += ring_[(head_ + count_ + i) % ring_.size()].descs;
    return n;
  }
  // How many rung entries from the head free at least `descs` descriptors (at least 1, at most
  // count_).
  unsigned EntriesFreeing(unsigned descs) const {
    unsigned k = 0, freed = 0;
    while (k < count_ && (k == 0 || freed < descs))
      freed += ring_[(head_ + k++) % ring_.size()].descs;
    return k;
  }

  uint16_t XmitInfinite(std::span<rte_mbuf* const> frames, Tsc now, bool more) {
    // Accepts everything at once and completes it at once: only software cost remains.
    const unsigned n = static_cast<unsigned>(frames.size());
    double cost = desc_tsc_ * n;
    if (!more) {
      counters_.doorbells.Add();
      cost += doorbell_tsc_;
    }
    Spend(now, cost);
    std::array<Tsc, kMaxBatch> arrival;
    for (unsigned i = 0; i < n; ++i) {
      counters_.completed_bytes.Add(BqlBytesOf(frames[i], options_.bql_bytes));
      if (tsq_ != nullptr) tsq_->Release(frames[i], now);
      CountDeparture(frames[i], now);
      arrival[i] = now;
      if (meta_offset_ >= 0) {
        TxMeta* t = MetaOf(frames[i], meta_offset_);
        t->to_wire = 0;
        t->flags |= kMetaWireKnown;
      }
    }
    if (link_) {
      for (unsigned i = 0; i < n; ++i) link_->Offer(frames[i], now);
      DeliverFromLink(now);
    } else {
      sink_.Receive(frames, {arrival.data(), n});
    }
    return static_cast<uint16_t>(n);
  }

  void CountDeparture(const rte_mbuf* m, Tsc departure) {
    counters_.last_departure.Max(departure);
    if (!window_.Contains(departure)) return;
    const unsigned wire_bytes = wire_.WireBytes(rte_pktmbuf_pkt_len(m));
    counters_.window_frames.Add();
    counters_.window_payload_bytes.Add(PayloadBytes(m));
    counters_.window_wire_bytes.Add(wire_bytes);
    // Busy time inside the window only: a frame departing just after the start began before it.
    const double began = static_cast<double>(departure) - wire_bytes * tsc_per_wire_byte_;
    const double start = static_cast<double>(window_.start.load(std::memory_order_relaxed));
    counters_.window_busy_tsc.Add(static_cast<uint64_t>(departure - std::max(began, start)));
  }

  // Time, once per call (a branch per batch, not per frame): the TSC, or the simulation's clock.
  Tsc Clock() const { return clock_ != nullptr ? clock_->now : Now(); }
  // The CPU spends the modelled cost from `now`: a busy-wait, or the simulated CPU's time. No
  // cost, no TSC read (emu:null: a read is a third of a frame's software cost at batch 1).
  void Spend(Tsc now, double cost) {
    if (!(cost > 0)) return;
    const Tsc until = now + static_cast<Tsc>(cost);
    counters_.modelled_tsc.Add(static_cast<uint64_t>(cost));
    if (clock_ != nullptr)
      clock_->now = std::max(clock_->now, until);
    else
      BusyWaitUntil(until);
  }

  VirtualClock* const clock_;
  const std::shared_ptr<SharedWire> shared_wire_;  // --queues: the wire it shares, or null
  double own_link_free_ = 0;  // a wire of its own: TSC (fractional) at which it is next free
  double* const link_free_;   // the wire's: &own_link_free_ or &shared_wire_->free_at
  EmuOptions options_;
  FrameReceiver& sink_;
  const RunWindow& window_;
  const bool infinite_;
  const double tsc_per_wire_byte_;
  const double doorbell_tsc_;
  const double desc_tsc_;
  const Tsc tx_usecs_tsc_;  // completion coalescing's time bound (0: none)
  const Tsc itr_tsc_;       // interrupt throttling: the least time between passes (0: none)
  Tsc throttle_until_ = 0;  // no completion pass before this (the last pass + itr_tsc_)
  const WireSpec wire_;
  std::vector<Desc> ring_;
  const int meta_offset_;    // TxMetaOffset(): where the ring wait is recorded, or -1
  const Tsc idle_poll_tsc_;  // the txirq's idle poll (kIrqIdlePoll, 125 us) in TSC
  const uint64_t host_stall_tsc_;  // kHostStallS in TSC: an idle wire this long is the host's
  // The stall (stall_ms): the wire starts no frame in [stall_from_, stall_until_), TSC.
  double stall_from_ = 0, stall_until_ = 0;
  // The link down (down_ms): frames departing in [down_from_, down_until_) are lost.
  Tsc down_from_ = 0, down_until_ = 0;
  Counter link_down_lost_;
  unsigned head_ = 0;
  unsigned count_ = 0;           // frames the NIC has seen (rung), from head_
  unsigned unrung_ = 0;          // written after them under xmit_more, waiting for the doorbell
  unsigned descs_used_ = 0;      // descriptors the count_ + unrung_ frames take
  unsigned frames_in_ring_ = 0;  // wire frames they are (a GSO frame: its segments)
  bool stopped_ = false;
  std::optional<LinkModel> link_;  // --link: what lies between the wire and the sink
  TsqLedger* tsq_ = nullptr;       // TCP Small Queues: released as frames are reclaimed
};

}  // namespace

std::unique_ptr<TxDriver> CreateEmuDriver(const EmuOptions& options, FrameReceiver& sink,
                                          const RunWindow& window, double tsc_hz,
                                          const LinkSpec* link, VirtualClock* clock,
                                          std::shared_ptr<SharedWire> wire) {
  return std::make_unique<EmuNic>(options, sink, window, tsc_hz, link, clock, std::move(wire));
}

Result<TxDrivers> Driver::Create(const EmuOptions& o, const DriverContext& c) {
  TxDrivers out;
  if (c.sinks.size() <= 1) {
    out.push_back(CreateEmuDriver(o, *c.sinks.front(), c.window, c.tsc_hz, c.link));
    return out;
  }
  const auto wire = std::make_shared<SharedWire>();
  for (FrameReceiver* sink : c.sinks)
    out.push_back(CreateEmuDriver(o, *sink, c.window, c.tsc_hz, nullptr, nullptr, wire));
  return out;
}

}  // namespace txbatch::emu
