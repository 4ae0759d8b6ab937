#pragma once
// What the ethdev driver's files share (ethdev_port.cc: the TX driver and the ports it makes;
// forwarding_port.cc: the bridge's and the sink's ports): what a driver instance owns and gives
// back, a port attached from devargs or EAL's, its configuration and link, and the TX driver.

#include <rte_cycles.h>
#include <rte_ethdev.h>
#include <rte_mempool.h>
#include <rte_ring.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "dataplane/tx_driver.h"
#include "drivers/ethdev/ethdev.h"

namespace txbatch::ethdev {

// How long a port may take to report link up before the run gives up on it.
inline constexpr double kLinkWaitS = 3.0;
// How long a port whose frames leave on another party's time (a memif peer's reads, a virtio
// backend's) waits for that party to take what the PMD accepted, before the port stops.
inline constexpr double kLingerS = 0.2;

// A port EAL probed on a PMD that keeps its rings' mbufs after stop (net_virtio), stopped, with
// mbufs of `pool` still out: closed and probed again, so that every mbuf comes home at the end
// of the cell and the port is there for the next one.
void GiveBackHeldMbufs(uint16_t port, rte_mempool* pool);

// What a driver instance owns and must give back at the end: ports to stop and close, vdevs to
// remove, rings to free (an ethdev-pair's cable).
struct Owned {
  std::vector<uint16_t> ports;           // created by txbatch: stopped and closed
  std::vector<uint16_t> borrowed_ports;  // probed by EAL (ethdev:port=N): stopped only, since
                                         // closing releases the port for the rest of the run
                                         // (unless its PMD keeps mbufs until close:
                                         // GiveBackHeldMbufs)
  std::vector<rte_device*> devices;
  std::vector<rte_ring*> rings;
  rte_mempool* pool = nullptr;  // what the borrowed ports' rings take mbufs from
  void Release() {
    for (uint16_t p : borrowed_ports) {
      (void)rte_eth_dev_stop(p);
      GiveBackHeldMbufs(p, pool);
    }
    for (uint16_t p : ports) {
      (void)rte_eth_dev_stop(p);
      (void)rte_eth_dev_close(p);
    }
    for (rte_device* d : devices) (void)rte_dev_remove(d);
    for (rte_ring* r : rings) rte_ring_free(r);
    *this = {};
  }
};

// What the TX queues of one port share: the port, released when the last of them goes.
struct PortOwner {
  explicit PortOwner(Owned o) : owned(std::move(o)) {}
  ~PortOwner() {
    // A memif peer in another process reads the shared rings on its own time, and so does a
    // virtio device's backend (QEMU's virtio-net from a bottom half, vhost from its thread):
    // what was accepted may still be in the ring when the cell ends, and stopping or closing
    // the port drops it (net_virtio's close resets the device: virtio_net_drop_tx_queue_data)
    // though the books count it sent. Neither PMD says when its ring is empty (no
    // tx_descriptor_status, no tx_done_cleanup): give the other side a moment (kLingerS), as a
    // socket's linger does — once for the port, after its last queue went.
    if (linger && sent) rte_delay_us_sleep(kLingerS * 1e6);
    owned.Release();
  }
  PortOwner(const PortOwner&) = delete;
  PortOwner& operator=(const PortOwner&) = delete;
  Owned owned;
  bool linger = false;  // its frames leave on another party's time (SendsOnItsOwnTime)
  bool sent = false;    // a queue of it accepted a frame (set as each queue goes)
};

// A port created from devargs or borrowed from EAL, queried but not yet configured.
struct Attached {
  uint16_t port = 0;
  Owned owned;
  std::string what;         // "port 0 (net_tap0)", for messages
  std::string driver_name;  // the PMD's
  bool virtual_dev = false;
};

Result<Attached> Attach(const EthdevOptions& o);

// Configures `queues` RX and TX queues and starts the port; does not wait for the link.
Status ConfigurePort(uint16_t port, rte_mempool* pool, unsigned mtu, const std::string& what,
                     uint16_t queues = 1);
// Waits up to `wait_s` for the port's link; stops the port if it never comes up. `give_up`
// (if any) ends the wait early, as up.
Status WaitLinkUp(uint16_t port, const std::string& what, double wait_s = kLinkWaitS,
                  bool (*give_up)() = nullptr);

// The TX driver of `tx_port`'s TX queue `queue`; frames come back on `rx_port`'s RX queue
// `queue` (the same port for a loopback, the other end for a pair), or nowhere.
std::unique_ptr<TxDriver> MakeEthdevPort(uint16_t tx_port, std::optional<uint16_t> rx_port,
                                         uint16_t queue, bool virtual_dev,
                                         std::shared_ptr<PortOwner> owned, std::string spec,
                                         FrameReceiver* sink, const RunWindow& window,
                                         double tsc_hz);

}  // namespace txbatch::ethdev
