#pragma once
// What each driver tells the driver table (drivers/factory.cc) about itself. A driver's folder
// declares one `struct Driver : DriverKind` beside its options (emu.h, ethdev.h, verbs.h) with
// the static members below; the table is one line a driver (factory.cc's `Kinds`), and run's
// option checks, --help and the commands read it instead of naming drivers.

#include <rte_mempool.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "dataplane/link_spec.h"
#include "dataplane/run_window.h"
#include "dataplane/rx_port.h"
#include "dataplane/tx_driver.h"

namespace txbatch {

// One form a user writes (`--driver` or a port option) and one line of help for it.
struct DriverForm {
  std::string form, help;
};

// What a driver can be asked for beyond sending, for the checks before anything opens.
struct DriverLimits {
  // An emulated NIC of txbatch's own (the simulation's, TSQ's and BQL's: it reports the bytes it
  // completes, and may have a link behind its wire).
  bool emulated = false;
  // Why it sends on one TX queue only, for the sentence refusing --queues > 1 (empty: one driver
  // a TX queue, as many as --queues asks).
  std::string_view one_queue = {};
  bool captured = false;  // --capture: its ports' frames go into a pcapng file (DPDK's)
  // Why bridge and respond cannot take it, a phrase after the driver's name ("verbs …"); empty
  // where they can: a port it receives and sends Ethernet frames on (ethdev's
  // OpenForwardingPort), as an L2-transparent bridge and an ARP-answering responder need.
  std::string_view not_forwarding = {};
};

// Where the drivers of one cell are made: the session's pool, the IP MTU, one sink per TX queue
// (driver q delivering to sinks[q]), the run window, the TSC rate, and the link to put behind an
// emulated NIC's wire (null: none).
struct DriverContext {
  rte_mempool* pool;
  unsigned mtu;
  std::span<FrameReceiver* const> sinks;
  const RunWindow& window;
  double tsc_hz;
  const LinkSpec* link;
};

using TxDrivers = std::vector<std::unique_ptr<TxDriver>>;

// A port a command receives from (`sink --port`): its RX half, the TX half that owns the port
// where one does (a DPDK port closes when its TX half goes: declared first, so `rx` goes first),
// and what to print and record of it.
struct ReceivePort {
  std::unique_ptr<TxDriver> owner;
  std::unique_ptr<RxPort> rx;
  std::string describe;  // printed and published: the port and, for verbs, the keys senders give
  std::string record;    // the record's `port`
};

// Where a receiving port opens: the pool its frames come from, the IP MTU, the TSC rate, the
// frames the caller may hold at once (a link in front of it), and, for a port with a link to wait
// for, how long, what to call first (a line saying so) and what ends the wait early (a signal).
struct ReceiveContext {
  rte_mempool* pool;
  unsigned mtu;
  double tsc_hz;
  unsigned held;
  double link_wait_s;
  void (*before_wait)(const std::string& port);
  bool (*give_up)();
};

// The defaults a driver's `Driver` keeps unless it declares its own (static members hide these).
// A driver with an RX half a command can receive from also declares ParseReceiver (its spec as a
// receiver: verbs needs no peer), kReceiverForms (for the sentences) and OpenReceiver
// (factory.h's ParseReceiverSpec, OpenReceiver); one this build may lack, Opens and WhyNot.
struct DriverKind {
  // Frames the driver itself may hold (its rings): for pool sizing and the drain budget.
  template <class Options>
  static unsigned Ring(const Options&) {
    return 0;
  }
  // Memory it takes per queue besides the session's pool (verbs' receive buffers).
  template <class Options>
  static uint64_t OwnPoolBytes(const Options&) {
    return 0;
  }
  // CPU time it spends per frame by construction (emu's injected costs), in ns.
  template <class Options>
  static double ModelledCostNs(const Options&) {
    return 0;
  }
  // Whether IP MTU `mtu` (in kMinMtu..kMaxMtu) fits where the spec alone says; else one
  // sentence (a port's own limit is known when it opens).
  template <class Options>
  static Status CheckMtu(const Options&, unsigned) {
    return {};
  }
  // Bytes one TSO data descriptor carries (0: no TSO; the NIC cuts GSO frames on its wire).
  template <class Options>
  static unsigned TsoBytes(const Options&) {
    return 0;
  }
  // Memory a receiving port takes besides the caller's pool, `held` frames kept by the caller.
  template <class Options>
  static uint64_t ReceiverPoolBytes(const Options&, unsigned /*held*/) {
    return 0;
  }
};

}  // namespace txbatch
