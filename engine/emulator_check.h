#pragma once
// The emulator's self-check (doc/output.md, `emulator_bound`): whether txbatch's own threads,
// not the modelled device or link, set a real cell's rate. Two ways they can:
//  * a paced producer (--rate, the probe) made less than it was offered, and nothing held it
//    back (no full qdisc, TCP Small Queues or empty pool in the window) and the model's own
//    costs a frame (an emulated NIC's descriptor writes and doorbells, which the calling thread
//    spends) would have left room for the offered rate: its CPU fell short;
//  * the wire sat idle in host stalls (idle stretches of kHostStallS or more) for a share of
//    the window, the longest of them while the txirq was served at least half that late
//    (frames waited for it; a light load's idle has a txirq on time): the machine, not the
//    model, idled it.
// A flat-out producer sets its own pace by definition (what it costs is cycles/pkt and CPU ns);
// to ask whether txbatch can emulate a device's rate, offer that rate (--rate).

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace txbatch {

// A producer over the window: wire frames it generated, and the times something outside it held
// it back (TCP Small Queues' waits, failed mbuf allocations).
struct ProducerWindow {
  uint64_t generated = 0, held = 0;
};

// A paced producer may fall this far short of its offered rate and still count as keeping up
// (the "within 1 %": a 10 ms preemption in a 1 s window just before it closes, which the
// pace's catching up has no time left to make good), or kRateSlackFrames where that is more (a
// window offering few frames: a probe's 60 in 0.3 s is one frame's phase from 98 %).
inline constexpr double kRateShortfall = 0.01;
inline constexpr double kRateSlackFrames = 2;
// Host stalls may idle the wire for this share of the window before the machine, not the model,
// is said to have set the rate (the same 1 %).
inline constexpr double kStalledShare = 0.01;

struct EmulatorCheckInput {
  double window_s = 0;
  // Each producer's offered frames/s (0: flat out), in producer order, and its window.
  std::vector<double> offered_pps;
  // What every producer on each one's TX queue offers together (the model's costs are spent
  // under the queue's TX lock, for all of them alike), in producer order; missing: its own.
  std::vector<double> queue_offered_pps;
  std::vector<ProducerWindow> producers;
  uint64_t queue_waits = 0;  // times a stream producer blocked on a full qdisc band, in the window
  // The model's own cost a frame accepted in the window (DriverCounters::modelled_tsc), ns.
  double modelled_ns_per_frame = 0;
  // CellResult's model checks.
  double wire_stalled_us = 0, wire_max_idle_us = 0, irq_max_late_us = 0;
};

struct EmulatorCheck {
  bool bound = false;
  std::string why;  // one sentence where bound, else empty
  // The paced producers' least achieved / offered rate in the window; none where none is paced.
  std::optional<double> least_rate_share;
};

EmulatorCheck CheckEmulator(const EmulatorCheckInput& in);

// Whether `bound` emulator-bound rounds of `rounds` make the cell's median txbatch's rate (more
// than half): then compare and tune draw no throughput conclusion from it; fewer, and the
// rounds are noise in the interval (a host stall in one round of eight).
constexpr bool MostRoundsBound(size_t bound, size_t rounds) { return 2 * bound > rounds; }

}  // namespace txbatch
