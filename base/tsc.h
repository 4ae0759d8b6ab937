#pragma once
// Time is TSC cycles (rte_rdtsc), converted to ns once, at the end (DESIGN.md, Contracts 5).

#include <rte_cycles.h>
#include <rte_pause.h>

#include <cstdint>

namespace txbatch {

using Tsc = uint64_t;
inline constexpr Tsc kNever = UINT64_MAX;

inline Tsc Now() { return rte_rdtsc(); }

// Spins until the TSC reaches `until`. Used only to model device costs (a doorbell's MMIO write,
// a descriptor write) in real time; never to wait for another thread.
inline void BusyWaitUntil(Tsc until) {
  while (rte_rdtsc() < until) rte_pause();
}

// The simulation engine's clock (sim_engine.h): what a device model reads instead of the TSC,
// and what it advances instead of busy-waiting when it spends a modelled cost. One thread owns it.
struct VirtualClock {
  Tsc now = 0;
};

struct TscClock {
  double hz = 0;  // TSC ticks per second
  double ToNs(double cycles) const { return cycles * 1e9 / hz; }
  Tsc FromNs(double ns) const { return static_cast<Tsc>(ns * hz / 1e9 + 0.5); }
};

}  // namespace txbatch
