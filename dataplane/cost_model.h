#pragma once
// The simulation engine's CPU cost model (sim_engine.h): TSC cycles the software spends per
// frame, per driver call, per lock and per completion, at the TSC rate of the machine they came
// from. A device's own costs (doorbell, descriptor) stay with its model (emu's doorbell_ns,
// desc_ns), as on the real engine. `txbatch calibrate` fits these from real runs; the defaults
// below come from this project's tx_path_bench stage table (doc/perf.md).

#include <string>

namespace txbatch {

struct CostModel {
  double tsc_hz = 2.596e9;  // the clock the cycles were counted in (the virtual TSC's rate)
  // Producer side.
  double write = 20;   // per application write (the syscall's fixed part, segmentation)
  double frame = 50;   // per frame built: mbuf, headers, the TX stamp (tx_path_bench: ~19 ns)
  // The qdisc (root lock, pfifo_fast).
  double lock = 16;             // one uncontended acquisition + release (6.3 ns, spin lock)
  double lock_contended = 200;  // more when it was held: the cache line comes from another core
  double enqueue = 12;          // per frame enqueued (11.2 ns with the lock, less the lock)
  double dequeue = 10;          // per bulk dequeue
  double dequeue_frame = 3;     // per frame dequeued
  // The driver (its software side; the emu model adds its doorbell and descriptor costs).
  double xmit_call = 60;   // per driver call: TX lock taken, the call (the path's ~23 ns fixed part)
  double xmit_frame = 10;  // per frame in a call
  // The completion role (TX interrupt + clean).
  double completion = 200;      // per wake
  double completion_frame = 15;  // per frame reclaimed
  // Where the numbers came from: "default: …" or the file and machine `calibrate` wrote.
  std::string source =
      "default: estimated from doc/perf.md's tx_path_bench stage table (2 vCPU EPYC, TSC "
      "2596 MHz, 2026-11-30), not fitted";
  bool operator==(const CostModel&) const = default;
};

}  // namespace txbatch
