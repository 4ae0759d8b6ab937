#pragma once
// The verbs driver: IPoIB datagram mode over a UD queue pair (libibverbs), on an InfiniBand port
// or a RoCE v2 one (an Ethernet link layer: the same datagrams inside UDP/IP). Each Xmit
// builds one chain of send work requests and posts it with one ibv_post_send: one doorbell per
// batch, the batched form of what Linux's ipoib_send does one packet at a time. Public surface:
// the options and their parser (built with or without libibverbs, so a spec is always checked)
// and the factory (only where libibverbs was found: TXBATCH_HAVE_VERBS).

#include <rte_mempool.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/error.h"
#include "dataplane/run_window.h"
#include "dataplane/rx_port.h"
#include "dataplane/tx_driver.h"
#include "drivers/driver_kind.h"

namespace txbatch::verbs {

// IPoIB's encapsulation header: EtherType (big-endian) and 2 reserved bytes (RFC 4391).
inline constexpr unsigned kIpoibHeaderBytes = 4;
// A UD receive buffer starts with the 40-byte Global Routing Header slot (filled or not; on
// RoCE v2 over IPv4 the packet's IPv4 header sits in its last 20 bytes).
inline constexpr unsigned kGrhBytes = kIbGrhBytes;

// Receive requests posted by default: a sender's, IPoIB's own receive ring (ipoib's
// recv_queue_size); a sink's, 4096 datagrams (about 1 s at 4 kpps of a stalled receiver,
// 1.7 ms at 2.4 Mpps) before the HCA drops what finds no receive posted.
inline constexpr unsigned kSenderRqDepth = 256;
inline constexpr unsigned kReceiverRqDepth = 4096;
// The receive pool holds this many mbufs beyond rq_depth (two polls' worth: taken frames on
// their way to the caller while the queue is posted full again).
inline constexpr unsigned kReceivePoolSlack = 128;

struct VerbsOptions {
  std::string device;  // "mlx5_0"
  unsigned port = 1;   // the HCA's port number (1-based)
  // The peer: its QP number (0: none, a receiver) and Q_Key; on InfiniBand the LID packets are
  // switched to (the peer's, or a router's) and for a routed peer its GID (a GRH on every
  // packet); on RoCE its GID alone (the LID is ignored there).
  uint32_t qpn = 0;
  uint32_t qkey = 0;
  std::optional<uint16_t> lid;
  std::optional<std::array<uint8_t, 16>> gid;
  // The local GID table index the GRH names: unset is 0 on InfiniBand, the first RoCE v2 GID of
  // the peer's IP family on RoCE.
  std::optional<unsigned> sgid_index;
  unsigned hop_limit = 64;
  unsigned sl = 0;                     // service level, 0..15
  unsigned pkey_index = 0;             // index into the port's P_Key table
  unsigned sq_depth = 512;             // send work requests outstanding at most
  unsigned rq_depth = kSenderRqDepth;  // receive work requests posted (a sink's default: more)
  unsigned signal_every = 16;          // a signalled request at least every this many
  unsigned inline_max = 0;  // frames up to this many bytes (IPoIB header + packet) go inline
  // "verbs:mlx5_0:1,qpn=0x48,qkey=0x11111111,lid=3,sl=0,pkey_index=0,sq_depth=512,…"
  std::string ToString() const;
};

// A GID as ibv_devinfo -v prints it, an IPv6 address: "fe80::2:c903:1:1b2c", "::ffff:10.0.0.1".
std::string GidText(const std::array<uint8_t, 16>& gid);

// Parses "verbs:DEVICE:PORT,qpn=N,qkey=N,lid=N" with, for a routed peer or on RoCE, gid=GID,
// sgid_index=N, hop_limit=N, plus sl, pkey_index, sq_depth, rq_depth, signal_every, inline_max.
// Numbers in decimal or 0x hex; the GID as an IPv6 address. Syntax and ranges only: whether the
// device exists, and whether its port is InfiniBand (lid= needed) or RoCE (gid= needed), is known
// when it opens. Every problem is one sentence naming the valid choices. A receiver
// (`peer_required` false) needs only the Q_Key the senders use: qpn and the route may be left out
// (qpn stays 0).
Result<VerbsOptions> ParseVerbsSpec(std::string_view spec, bool peer_required = true);

// The memory of a verbs queue's own receive pool (VerbsTx::Init): rq_depth, the slack and `held`
// frames a caller keeps (a link in front of a sink), each with room for the largest IPoIB MTU.
// For the EAL estimate of a run (DriverSpec::own_pool_bytes) and of a sink.
uint64_t ReceivePoolBytes(const VerbsOptions& options, unsigned held = 0);

// Whether this txbatch was built with libibverbs, and if not, why (for the one sentence).
bool Available();
std::string_view UnavailableReason();

// Opens the device and port (InfiniBand, or RoCE v2 when the peer is given by gid=), creates the
// UD queue pair and the peer's address handle, registers `pool`'s memory, and checks that `mtu`
// (IP MTU) fits the port's IPoIB MTU (active MTU - 4). Frames that come in go to `sink` (IPoIB
// datagrams, given an Ethernet header for it). No RDMA device: exit-2 sentence naming what to
// check.
Result<std::unique_ptr<TxDriver>> CreateVerbsDriver(const VerbsOptions& options, rte_mempool* pool,
                                                    unsigned mtu, FrameReceiver& sink,
                                                    const RunWindow& window, double tsc_hz);

// The receive end of a two-host run over InfiniBand or RoCE (`txbatch sink --port verbs:…`): the
// same queue pair, polled by its owner. Datagrams come out as Ethernet frames (txbatch's MACs, the
// IPoIB header's EtherType), so the sink reads them as it reads any port's.
class VerbsReceiver : public RxPort {
 public:
  // Receive (RxPort): up to out.size() received frames (the caller frees them); the buffers are
  // posted again.
  // "verbs:mlx5_0:1,qkey=0x11,… (mlx5_0 port 1 (LID 3, active MTU 2048), QP 0x48; senders give
  // qpn=0x48,qkey=0x11,lid=3)": the port, and the keys a sender's spec needs to reach it.
  virtual std::string Describe() const = 0;
};
// `held`: received frames the caller may hold at once (a link it puts them through).
Result<std::unique_ptr<VerbsReceiver>> OpenVerbsReceiver(const VerbsOptions& options,
                                                         rte_mempool* pool, unsigned mtu,
                                                         double tsc_hz, unsigned held = 0);

// The verbs driver's entry in the driver table (driver_kind.h): one queue pair (one TX queue), its
// send queue as its ring and its receive buffers in a pool of their own.
struct Driver : DriverKind {
  using Options = VerbsOptions;
  static constexpr std::string_view kPrefixes[] = {"verbs:"};
  static constexpr std::string_view kName = "verbs";
  static constexpr DriverLimits kLimits{.emulated = false,
                                        .one_queue = "the verbs driver posts on one queue pair",
                                        .captured = false,
                                        .not_forwarding =
                                            "carries IP datagrams to a queue pair (IPoIB, RoCE "
                                            "UD), not the Ethernet frames a bridge forwards and "
                                            "a responder answers (ARP among them)"};
  static Result<VerbsOptions> Parse(std::string_view text) { return ParseVerbsSpec(text); }
  static std::vector<DriverForm> Forms();
  static unsigned Ring(const VerbsOptions& o) { return o.sq_depth; }
  static uint64_t OwnPoolBytes(const VerbsOptions& o) { return ReceivePoolBytes(o); }
  static Result<TxDrivers> Create(const VerbsOptions& o, const DriverContext& c);
  // A receiving queue pair: no peer needed (senders name it), refused where this txbatch has no
  // libibverbs (Opens); opened as OpenVerbsReceiver, connectionless (no link to wait for).
  static Result<VerbsOptions> ParseReceiver(std::string_view text);
  static bool Opens() { return Available(); }
  static std::string_view WhyNot() { return UnavailableReason(); }
  static constexpr std::string_view kReceiverForms = "verbs:DEVICE:PORT,qkey=N";
  static Result<ReceivePort> OpenReceiver(const VerbsOptions& o, const ReceiveContext& c);
  static uint64_t ReceiverPoolBytes(const VerbsOptions& o, unsigned held) {
    return ReceivePoolBytes(o, held);
  }
};

}  // namespace txbatch::verbs
