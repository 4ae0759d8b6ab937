#pragma once
// The emulated NIC and wire (DESIGN.md "The emulated NIC and link"): a TX descriptor ring with
// stop/wake, completion reclaim in batches, doorbell and per-descriptor costs spent as real
// busy-waits, and a line-rate wire computed lazily from the TSC. Public surface: the options,
// their parser and the factory; the NIC itself stays inside drivers/emu.

#include <memory>
#include <string>
#include <string_view>

#include "dataplane/error.h"
#include "dataplane/link_spec.h"
#include "dataplane/run_window.h"
#include "dataplane/rx_sink.h"
#include "drivers/driver.h"

namespace txbatch::emu {

struct EmuOptions {
  std::string model = "e1000";   // e1000 | ixgbe | null
  double rate_mbps = 1000;       // line rate; 0 = infinitely fast (no wire)
  unsigned ring = 256;           // TX descriptors
  unsigned free_thresh = 32;     // reclaim / queue-wake threshold (descriptors)
  double doorbell_ns = 0;        // cost of one tail-register write
  double desc_ns = 0;            // cost of writing one descriptor
  std::string ToString() const;  // "emu:e1000,rate_mbps=1000,ring=256,..."
};

// Parses "emu:MODEL[,key=value...]" (the "emu:" prefix optional). Keys: rate_mbps, ring,
// free_thresh, doorbell_ns, desc_ns. Unknown models or keys and out-of-range values get one
// sentence that lists the valid choices.
Result<EmuOptions> ParseEmuSpec(std::string_view spec);

// Models and their defaults, one line each (for --help and the docs).
std::string DescribeModels();

// Creates the emulated NIC. Frames it delivers go to `sink` at their modelled arrival time;
// departures in `window` are counted for throughput (counted_at = wire).
// With `link`, frames leaving the wire go through the link model first (link_model.h).
std::unique_ptr<TxDriver> CreateEmuDriver(const EmuOptions& options, RxSink& sink,
                                          const RunWindow& window, double tsc_hz,
                                          const LinkSpec* link = nullptr);

}  // namespace txbatch::emu
