#pragma once
// The seam between the verbs driver and libibverbs: the data-path calls on one UD queue pair
// (post send, poll the send CQ, post receive, poll the receive CQ), memory registration, and
// moving the QP to the error state at teardown. OpenUdQueuePair (verbs_device.cc) is the real
// one over an HCA; the unit tests put a fake behind it that checks what a provider checks (send
// queue overflow, lkeys and lengths, a signalled request before the queue fills).

#include <infiniband/verbs.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "drivers/verbs/verbs.h"

namespace txbatch::verbs {

// How datagrams travel on the port: InfiniBand (LRH-switched, an optional GRH) or RoCE v2
// (UDP/IP over Ethernet, always addressed by GID). RoCE v1 is not used.
enum class LinkLayer : uint8_t { kInfiniband, kRoceV2 };
std::string_view LinkLayerName(LinkLayer l);  // "ib", "roce_v2" (the records' link_layer)

// What ibv_query_port and the port's GID table (ibv_query_gid_ex) say: what the route, the MTU
// and the wire arithmetic follow from. The real open reads them; tests write them.
struct PortFacts {
  uint8_t link_layer = IBV_LINK_LAYER_INFINIBAND;  // IBV_LINK_LAYER_ETHERNET: RoCE
  ibv_port_state state = IBV_PORT_ACTIVE;
  uint16_t lid = 0;
  ibv_mtu active_mtu = IBV_MTU_2048;  // on RoCE, from the netdev's MTU (1024 on rxe at 1500)
  struct Gid {
    std::array<uint8_t, 16> raw{};
    ibv_gid_type type = IBV_GID_TYPE_IB;
  };
  std::vector<std::optional<Gid>> gids;  // by table index; nullopt: an empty slot
};

// The port as the options reach it: resolved once at open, before any QP exists.
struct PortPlan {
  LinkLayer link_layer = LinkLayer::kInfiniband;
  bool has_peer = false;    // a sender: `ah` is the peer's address
  ibv_ah_attr ah{};         // is_global with the GRH on RoCE and for a routed IB peer
  unsigned sgid_index = 0;  // the local GID the GRH names (RoCE, routed IB)
  std::array<uint8_t, 16> sgid{};
  uint16_t lid = 0;         // this port's LID (InfiniBand)
  unsigned active_mtu = 0;  // bytes
  unsigned ipoib_mtu = 0;   // active_mtu - 4: IP packet bytes per datagram
  // Bytes on the wire per datagram beyond its UD payload (IPoIB header + IP packet): IB 34 (+40
  // GRH); RoCE v2 Ethernet 14 + IPv4 20 or IPv6 40 + UDP 8 + BTH 12 + DETH 8 + ICRC 4 + FCS 4 +
  // preamble 8 + gap 12.
  unsigned wire_overhead = 0;
  std::string describe;  // "rxe0 port 1 (RoCE v2, GID 1 ::ffff:10.0.0.1, active MTU 1024)"
};

// The route, MTU and wire overhead for `options` on a port with `facts`; one sentence when they
// do not fit (a port not active; on InfiniBand a sender without lid=; on RoCE a sender without
// gid=, an sgid_index that is not a RoCE v2 GID or not of the peer's IP family, or no RoCE v2 GID).
Result<PortPlan> PlanPort(const VerbsOptions& options, const PortFacts& facts);

// What the queue pair was set up with: what the driver may post.
struct UdQueueInfo {
  uint32_t qpn = 0;         // this QP's number (a peer names it)
  uint16_t lid = 0;         // this port's LID
  unsigned sq_depth = 0;    // send WRs outstanding at most (max_send_wr)
  unsigned rq_depth = 0;    // receive WRs posted at most
  unsigned max_inline = 0;  // bytes an inline send may carry
  unsigned ipoib_mtu = 0;   // the port's active MTU - 4: IP packet bytes per datagram
  LinkLayer link_layer = LinkLayer::kInfiniband;
  unsigned wire_overhead = kIbUdTransportBytes;  // PortPlan::wire_overhead
  ibv_ah* ah = nullptr;  // the peer's address handle (stays while requests use it)
  uint32_t remote_qpn = 0, remote_qkey = 0;
  std::string describe;  // "mlx5_0 port 1 (LID 3, active MTU 2048), QP 0x48"
};

// Fills what `plan` decides in `info` (the real queue pair's and the fake's, one way): link
// layer, LID, MTU, wire overhead, the peer, and the description with QP `qpn` — for a receiver
// with the keys its senders give ("; senders give qpn=0x48,qkey=0x11,lid=3" or "…,gid=…").
void ApplyPlan(const PortPlan& plan, const VerbsOptions& options, uint32_t qpn, UdQueueInfo& info);

class UdQueuePair {
 public:
  virtual ~UdQueuePair() = default;
  virtual const UdQueueInfo& info() const = 0;
  // ibv_post_send: 0, or an errno with *bad the first request not posted.
  virtual int PostSend(ibv_send_wr* wr, ibv_send_wr** bad) = 0;
  // ibv_poll_cq on the send CQ: completions written, or < 0 on error.
  virtual int PollSend(int n, ibv_wc* wc) = 0;
  virtual int PostRecv(ibv_recv_wr* wr, ibv_recv_wr** bad) = 0;
  virtual int PollRecv(int n, ibv_wc* wc) = 0;
  // ibv_reg_mr with local write access: the lkey for [addr, addr + len).
  virtual Result<uint32_t> Register(void* addr, size_t len) = 0;
  // Moves the QP to the error state: every outstanding request completes with
  // IBV_WC_WR_FLUSH_ERR (teardown: the HCA lets go of the buffers before they are freed).
  virtual void Flush() = 0;
  // A UD send that fails puts the QP in the Send Queue Error state (the requests after it flush);
  // once they are reaped, SQE -> RTS makes it send again.
  virtual Status Recover() = 0;
};

// The real queue pair: device, PD, CQs, a UD QP taken INIT -> RTR -> RTS, the peer's AH.
Result<std::unique_ptr<UdQueuePair>> OpenUdQueuePair(const VerbsOptions& options);

// The driver over any queue pair (verbs_tx.cc).
Result<std::unique_ptr<TxDriver>> CreateVerbsTx(const VerbsOptions& options,
                                                std::unique_ptr<UdQueuePair> qp, rte_mempool* pool,
                                                unsigned mtu, FrameReceiver& sink,
                                                const RunWindow& window, double tsc_hz);

}  // namespace txbatch::verbs
