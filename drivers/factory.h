#pragma once
// Driver specs as users write them (`--driver`), parsed once at setup and turned into drivers
// per cell. The one place that knows every driver's prefix.

#include <rte_mempool.h>

#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <variant>

#include "base/error.h"
#include "dataplane/link_spec.h"
#include "dataplane/run_window.h"
#include "dataplane/rx_port.h"
#include "dataplane/tx_driver.h"
#include "drivers/driver_kind.h"
#include "drivers/emu/emu.h"
#include "drivers/ethdev/ethdev.h"
#include "drivers/verbs/verbs.h"

namespace txbatch {

// Every driver, one entry each: its folder's `Driver` (driver_kind.h). A new driver is its folder,
// its entry here and its name in drivers/meson.build.
using DriverKinds = std::tuple<emu::Driver, ethdev::Driver, verbs::Driver>;

template <class Kinds>
struct OptionsOfKinds;
template <class... K>
struct OptionsOfKinds<std::tuple<K...>> {
  using type = std::variant<typename K::Options...>;
};

struct DriverSpec {
  typename OptionsOfKinds<DriverKinds>::type options;  // one driver's parsed options

  std::string ToString() const;  // canonical, every parameter spelled out
  std::string_view kind() const;  // its driver's name: "emu", "ethdev", "verbs"
  const DriverLimits& limits() const;
  bool emulated() const { return limits().emulated; }
  // Frames the driver itself may hold (its rings): for pool sizing and the drain budget.
  unsigned ring() const;
  // Memory the driver takes for itself per queue, besides the session's pool (a verbs port's
  // receive buffers: their own pool, sized for the largest IPoIB MTU): for the EAL estimate.
  uint64_t own_pool_bytes() const;
  // CPU time the driver spends per frame by construction (emu's injected costs), in ns.
  double modelled_cost_ns() const;
  // Whether IP MTU `mtu` fits where the spec alone says (an IPoIB model's); else one sentence.
  Status CheckMtu(unsigned mtu) const;
  // Bytes one TSO data descriptor carries: 0 where the driver has no TSO.
  unsigned tso_bytes() const;
  // Memory a receiving port takes besides the caller's pool (verbs' receive buffers), `held`
  // frames kept by the caller.
  uint64_t receiver_pool_bytes(unsigned held) const;
};

// Parses a spec by its driver's prefix (emu:, ethdev:, ethdev-pair, verbs:; DriverKinds'
// kPrefixes); anything else gets one sentence listing the valid forms (DriverForms).
Result<DriverSpec> ParseDriverSpec(std::string_view text);

// The forms --driver takes, as one phrase for a sentence ("emu:MODEL[,key=value...] (MODEL: …);
// ethdev:DEVARGS; …; or verbs:…"), and as the help's Drivers block (a line a model or form).
// Both from each driver's Usage/Forms.
std::string DriverForms();
std::string DescribeDrivers();

// The driver whose prefix `text` starts with: its name and limits (null: none), for a command
// that takes only some drivers to name the one it was given (the bridge's ports).
struct NamedDriver {
  std::string_view name;
  const DriverLimits* limits;
};
NamedDriver DriverNamedBy(std::string_view text);

// A port to receive from (`sink --port`), by the prefix of a driver with an RX half (ethdev:,
// verbs:), bare devargs being ethdev's; a driver without one, or a spec none takes, gets one
// sentence naming those that have one. `option` names the option in the sentence.
Result<DriverSpec> ParseReceiverSpec(std::string_view option, std::string_view text);
// Opens it (a DPDK port waits for its link: ReceiveContext). Control plane; one sentence.
Result<ReceivePort> OpenReceiver(const DriverSpec& spec, const ReceiveContext& context);

// One driver per TX queue (--queues; one per sink, driver q delivering to sinks[q]): emu rings
// sharing one wire, or a DPDK port with that many queues; ports get MTU `mtu`. `link`, if given
// and active, is put behind the emulated NIC's wire (DPDK ports get the link model with the
// bridge). More than one queue on a driver of one (verbs), a link on a driver that is no
// emulated NIC, or a link with more than one queue: refused with a sentence. Control plane.
Result<TxDrivers> CreateDrivers(const DriverSpec& spec, rte_mempool* pool, unsigned mtu,
                                std::span<FrameReceiver* const> sinks, const RunWindow& window,
                                double tsc_hz, const LinkSpec* link = nullptr);

}  // namespace txbatch
