#pragma once
// The seam between the verbs driver and libibverbs: the data-path calls on one UD queue pair
// (post send, poll the send CQ, post receive, poll the receive CQ), memory registration, and
// moving the QP to the error state at teardown. OpenUdQueuePair (verbs_device.cc) is the real
// one over an HCA; the unit tests put a fake behind it that checks what a provider checks (send
// queue overflow, lkeys and lengths, a signalled request before the queue fills).

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "dataplane/error.h"
#include "drivers/verbs/verbs.h"

namespace txbatch::verbs {

// What the queue pair was set up with: what the driver may post.
struct UdQueueInfo {
  uint32_t qpn = 0;         // this QP's number (a peer names it)
  uint16_t lid = 0;         // this port's LID
  unsigned sq_depth = 0;    // send WRs outstanding at most (max_send_wr)
  unsigned rq_depth = 0;    // receive WRs posted at most
  unsigned max_inline = 0;  // bytes an inline send may carry
  unsigned ipoib_mtu = 0;   // the port's active MTU - 4: IP packet bytes per datagram
  ibv_ah* ah = nullptr;     // the peer's address handle (stays while requests use it)
  uint32_t remote_qpn = 0, remote_qkey = 0;
  std::string describe;  // "mlx5_0 port 1 (LID 3, active MTU 2048), QP 0x48"
};

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
                                                unsigned mtu, RxSink& sink, const RunWindow& window,
                                                double tsc_hz);

}  // namespace txbatch::verbs
