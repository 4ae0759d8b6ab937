#pragma once
// Driver specs as users write them (`--driver`), parsed once at setup and turned into drivers
// per cell. The one place that knows every driver's prefix.

#include <rte_mempool.h>

#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "base/error.h"
#include "dataplane/link_spec.h"
#include "dataplane/run_window.h"
#include "dataplane/rx_port.h"
#include "dataplane/tx_driver.h"
#include "drivers/emu/emu.h"
#include "drivers/ethdev/ethdev.h"
#include "drivers/verbs/verbs.h"

namespace txbatch {

struct DriverSpec {
  std::variant<emu::EmuOptions, ethdev::EthdevOptions, verbs::VerbsOptions> options;

  std::string ToString() const;  // canonical, every parameter spelled out
  bool emulated() const { return std::holds_alternative<emu::EmuOptions>(options); }
  // Frames the driver itself may hold (its rings): for pool sizing and the drain budget.
  unsigned ring() const;
  // Memory the driver takes for itself per queue, besides the session's pool (a verbs port's
  // receive buffers: their own pool, sized for the largest IPoIB MTU): for the EAL estimate.
  uint64_t own_pool_bytes() const;
  // CPU time the driver spends per frame by construction (emu's injected costs), in ns.
  double modelled_cost_ns() const;
};

// Parses "emu:…", "ethdev:…", "ethdev-pair…" or "verbs:…" (a table of the kinds, factory.cc's
// kKinds); anything else gets one sentence listing the valid forms (DriverForms).
Result<DriverSpec> ParseDriverSpec(std::string_view text);

// The forms --driver takes, as one phrase for a sentence ("emu:MODEL[,key=value...] with MODEL
// one of …, ethdev:DEVARGS, …"), and as the help's Drivers block (a line a model or form). Both
// from factory.cc's one table of forms, with emu's models from its own.
std::string DriverForms();
std::string DescribeDrivers();

// Creates the driver for one cell; ports get MTU `mtu`; `link`, if given, is put behind the
// emulated NIC's wire (DPDK ports get the link model with the bridge). Control plane; fails with
// one sentence.
Result<std::unique_ptr<TxDriver>> CreateDriver(const DriverSpec& spec, rte_mempool* pool,
                                               unsigned mtu, FrameReceiver& sink,
                                               const RunWindow& window, double tsc_hz,
                                               const LinkSpec* link = nullptr);

// One driver per TX queue (--queues; one per sink, driver q delivering to sinks[q]): emu rings
// sharing one wire, or a DPDK port with that many queues. More than one on verbs, or with a
// link, is refused with a sentence.
Result<std::vector<std::unique_ptr<TxDriver>>> CreateDrivers(const DriverSpec& spec,
                                                             rte_mempool* pool, unsigned mtu,
                                                             std::span<FrameReceiver* const> sinks,
                                                             const RunWindow& window, double tsc_hz,
                                                             const LinkSpec* link = nullptr);

}  // namespace txbatch
