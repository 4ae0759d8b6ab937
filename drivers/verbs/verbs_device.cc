// The real UD queue pair over libibverbs, and the verbs driver's factory. Control plane only:
// every failure is one sentence naming the device and what to check.
#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "drivers/verbs/ud_qp.h"
#include "drivers/verbs/verbs_tx.h"

namespace txbatch::verbs {
namespace {

constexpr unsigned kCqSlack = 64;

std::string NoDevice() {
  return "no RDMA device found (ibv_get_device_list found none); check that the kernel's rdma "
         "modules are loaded (ib_core, ib_uverbs and the HCA's driver, e.g. mlx5_ib), that "
         "`rdma link` shows the port and `ibv_devices` lists the device";
}

// The port's link layer, state, LID, active MTU and GID table (with each GID's type).
Result<PortFacts> QueryPort(ibv_context* ctx, const VerbsOptions& o) {
  ibv_port_attr pa{};
  if (ibv_query_port(ctx, static_cast<uint8_t>(o.port), &pa) != 0)
    return MakeError(EINVAL, fmt::format("{} has no port {}; `ibv_devinfo -d {}` lists its "
                                         "ports",
                                         o.device, o.port, o.device));
  PortFacts f;
  f.link_layer = pa.link_layer;
  f.state = pa.state;
  f.lid = pa.lid;
  f.active_mtu = pa.active_mtu;
  f.gids.resize(pa.gid_tbl_len);
  for (int i = 0; i < pa.gid_tbl_len; ++i) {
    ibv_gid_entry e{};
    // An empty slot fails (ENODATA); a GID of all zeros is unused too.
    if (ibv_query_gid_ex(ctx, o.port, static_cast<uint32_t>(i), &e, 0) != 0) continue;
    PortFacts::Gid g;
    std::memcpy(g.raw.data(), e.gid.raw, 16);
    if (g.raw == std::array<uint8_t, 16>{}) continue;
    g.type = static_cast<ibv_gid_type>(e.gid_type);
    f.gids[i] = g;
  }
  return f;
}

class RealUdQueuePair final : public UdQueuePair {
 public:
  ~RealUdQueuePair() override {
    // Requests reference the AH: the QP goes first, then the AH, MRs, CQs, PD, context.
    if (qp_) ibv_destroy_qp(qp_);
    if (info_.ah) ibv_destroy_ah(info_.ah);
    for (ibv_mr* mr : mrs_) ibv_dereg_mr(mr);
    if (send_cq_) ibv_destroy_cq(send_cq_);
    if (recv_cq_) ibv_destroy_cq(recv_cq_);
    if (pd_) ibv_dealloc_pd(pd_);
    if (ctx_) ibv_close_device(ctx_);
  }

  Status Open(const VerbsOptions& o) {
    int n = 0;
    ibv_device** list = ibv_get_device_list(&n);
    // NULL (ENOSYS: no RDMA in the kernel) and an empty list both mean no device.
    if (list == nullptr || n == 0) {
      if (list) ibv_free_device_list(list);
      return MakeError(ENODEV, NoDevice());
    }
    std::string names;
    for (int i = 0; i < n; ++i) {
      if (o.device == ibv_get_device_name(list[i])) ctx_ = ibv_open_device(list[i]);
      names += (names.empty() ? "" : ", ") + std::string(ibv_get_device_name(list[i]));
    }
    ibv_free_device_list(list);
    if (ctx_ == nullptr)
      return MakeError(ENODEV, fmt::format("RDMA device '{}' was not found or could not be "
                                           "opened; valid here: {}",
                                           o.device, names));
    what_ = fmt::format("{} port {}", o.device, o.port);
    auto facts = QueryPort(ctx_, o);
    if (!facts) return facts.error();
    auto plan = PlanPort(o, *facts);
    if (!plan) return plan.error();
    ibv_device_attr da{};
    (void)ibv_query_device(ctx_, &da);
    // The device's limits hold for both queues and their CQs; a depth cut is said in the port's
    // line.
    const auto fit = [&da](unsigned asked) {
      if (da.max_qp_wr > 0) asked = std::min<unsigned>(asked, static_cast<unsigned>(da.max_qp_wr));
      if (da.max_cqe > static_cast<int>(kCqSlack))
        asked = std::min<unsigned>(asked, static_cast<unsigned>(da.max_cqe) - kCqSlack);
      return asked;
    };
    const unsigned depth = fit(o.sq_depth);
    const unsigned rq_depth = fit(o.rq_depth);
    if ((pd_ = ibv_alloc_pd(ctx_)) == nullptr) return Fail("allocate a protection domain on");
    send_cq_ = ibv_create_cq(ctx_, static_cast<int>(depth + kCqSlack), nullptr, nullptr, 0);
    recv_cq_ = ibv_create_cq(ctx_, static_cast<int>(rq_depth + kCqSlack), nullptr, nullptr, 0);
    if (send_cq_ == nullptr || recv_cq_ == nullptr) return Fail("create completion queues on");
    ibv_qp_init_attr qa{};
    qa.send_cq = send_cq_;
    qa.recv_cq = recv_cq_;
    qa.qp_type = IBV_QPT_UD;
    qa.sq_sig_all = 0;  // selective signalling: the driver picks which requests complete
    qa.cap.max_send_wr = depth;
    qa.cap.max_recv_wr = rq_depth;
    qa.cap.max_send_sge = 2;
    qa.cap.max_recv_sge = 1;
    qa.cap.max_inline_data = o.inline_max;
    if ((qp_ = ibv_create_qp(pd_, &qa)) == nullptr) return Fail("create a UD queue pair on");
    // Never more than the CQ was sized for (a provider may grant more than asked).
    info_.sq_depth = std::min<unsigned>(qa.cap.max_send_wr, depth);
    info_.rq_depth = std::min<unsigned>(qa.cap.max_recv_wr, rq_depth);
    info_.max_inline = qa.cap.max_inline_data;

    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_INIT;
    at.pkey_index = static_cast<uint16_t>(o.pkey_index);
    at.port_num = static_cast<uint8_t>(o.port);
    at.qkey = o.qkey;
    if (ibv_modify_qp(qp_, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
      return Fail("move the QP to INIT (pkey_index, port, qkey) on");
    at = {};
    at.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(qp_, &at, IBV_QP_STATE)) return Fail("move the QP to RTR on");
    at = {};
    at.qp_state = IBV_QPS_RTS;
    at.sq_psn = 0;
    if (ibv_modify_qp(qp_, &at, IBV_QP_STATE | IBV_QP_SQ_PSN)) return Fail("move the QP to RTS on");

    // A receiver sends to nobody: no address handle (on RoCE there would be no GID to make one).
    if (plan->has_peer && (info_.ah = ibv_create_ah(pd_, &plan->ah)) == nullptr)
      return Fail(plan->link_layer == LinkLayer::kRoceV2
                      ? "create the peer's address handle (gid, sgid_index, hop_limit, sl) on"
                      : "create the peer's address handle (lid/gid, sl, sgid_index) on");
    ApplyPlan(*plan, o, qp_->qp_num, info_);
    if (info_.sq_depth < o.sq_depth || info_.rq_depth < o.rq_depth)
      info_.describe += fmt::format(
          ", queues of {} send / {} receive requests (the device's "
          "limits; asked {} / {})",
          info_.sq_depth, info_.rq_depth, o.sq_depth, o.rq_depth);
    return {};
  }

  const UdQueueInfo& info() const override { return info_; }
  int PostSend(ibv_send_wr* wr, ibv_send_wr** bad) override { return ibv_post_send(qp_, wr, bad); }
  int PollSend(int n, ibv_wc* wc) override { return ibv_poll_cq(send_cq_, n, wc); }
  int PostRecv(ibv_recv_wr* wr, ibv_recv_wr** bad) override { return ibv_post_recv(qp_, wr, bad); }
  int PollRecv(int n, ibv_wc* wc) override { return ibv_poll_cq(recv_cq_, n, wc); }
  Result<uint32_t> Register(void* addr, size_t len) override {
    ibv_mr* mr = ibv_reg_mr(pd_, addr, len, IBV_ACCESS_LOCAL_WRITE);
    if (mr == nullptr)
      return MakeError(errno, fmt::format("cannot register {} bytes of memory with {} ({}); "
                                          "check the locked-memory limit (ulimit -l)",
                                          len, what_, std::strerror(errno)));
    mrs_.push_back(mr);
    return mr->lkey;
  }
  void Flush() override {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_ERR;
    (void)ibv_modify_qp(qp_, &at, IBV_QP_STATE);
  }
  Status Recover() override {
    ibv_qp_attr at{};
    at.qp_state = IBV_QPS_RTS;
    at.cur_qp_state = IBV_QPS_SQE;
    if (ibv_modify_qp(qp_, &at, IBV_QP_STATE | IBV_QP_CUR_STATE) != 0)
      return Fail("move the QP from SQE back to RTS on");
    return {};
  }

 private:
  Error Fail(const char* what) {
    return MakeError(errno ? errno : EIO,
                     fmt::format("cannot {} {} ({})", what, what_.empty() ? "the device" : what_,
                                 std::strerror(errno ? errno : EIO)));
  }
  ibv_context* ctx_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* send_cq_ = nullptr;
  ibv_cq* recv_cq_ = nullptr;
  ibv_qp* qp_ = nullptr;
  std::vector<ibv_mr*> mrs_;
  UdQueueInfo info_;
  std::string what_;
};

}  // namespace

Result<std::unique_ptr<UdQueuePair>> OpenUdQueuePair(const VerbsOptions& options) {
  auto qp = std::make_unique<RealUdQueuePair>();
  if (Status s = qp->Open(options); !s) return s.error();
  return std::unique_ptr<UdQueuePair>(std::move(qp));
}

Result<std::unique_ptr<TxDriver>> CreateVerbsTx(const VerbsOptions& options,
                                                std::unique_ptr<UdQueuePair> qp, rte_mempool* pool,
                                                unsigned mtu, FrameReceiver& sink,
                                                const RunWindow& window, double tsc_hz) {
  auto d = std::make_unique<VerbsTx>(options, std::move(qp), &sink, window, tsc_hz);
  if (Status s = d->Init(pool, mtu); !s) return s.error();
  return std::unique_ptr<TxDriver>(std::move(d));
}

Result<std::unique_ptr<VerbsReceiver>> OpenVerbsReceiver(const VerbsOptions& options,
                                                         rte_mempool* pool, unsigned mtu,
                                                         double tsc_hz, unsigned held) {
  static const RunWindow kNoWindow;  // it sends nothing
  auto qp = OpenUdQueuePair(options);
  if (!qp) return qp.error();
  auto d = std::make_unique<VerbsTx>(options, std::move(*qp), nullptr, kNoWindow, tsc_hz);
  if (Status s = d->Init(pool, mtu, held); !s) return s.error();
  return std::unique_ptr<VerbsReceiver>(std::move(d));
}

Result<std::unique_ptr<TxDriver>> CreateVerbsDriver(const VerbsOptions& options, rte_mempool* pool,
                                                    unsigned mtu, FrameReceiver& sink,
                                                    const RunWindow& window, double tsc_hz) {
  auto qp = OpenUdQueuePair(options);
  if (!qp) return qp.error();
  return CreateVerbsTx(options, std::move(*qp), pool, mtu, sink, window, tsc_hz);
}

}  // namespace txbatch::verbs
