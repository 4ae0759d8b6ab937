#pragma once
// A UD queue pair without an HCA, behind the driver's seam (drivers/verbs/ud_qp.h). It checks
// what a provider checks and records what was posted:
//  - a post beyond the send queue's depth fails with ENOMEM at the first request that does not
//    fit (*bad points at it), as mlx5 does;
//  - more SGEs than the QP has, an inline request over max_inline, a wrong opcode or peer: EINVAL
//    at that request;
//  - an SGE whose lkey is not registered or that reaches outside its region completes with
//    IBV_WC_LOC_PROT_ERR; a datagram longer than the MTU with IBV_WC_LOC_LEN_ERR (reported even
//    when unsignalled, as errors are);
//  - the send queue filling up with no signalled request outstanding is a violation: a real
//    queue pair would never complete anything again;
//  - a send that fails puts the QP in SQE: the requests behind it complete flushed, a post in
//    SQE is a violation (a real QP flushes it), and Recover() takes it back to RTS only once
//    nothing is outstanding.
// The datagram bytes are read when the request completes, not when it is posted (inline ones:
// at post), as an HCA reads them: a header slot reused or an mbuf freed too early shows.
// The test drives the hardware's side: Finish(k) completes the k oldest requests, Deliver()
// fills the oldest receive buffer (its 40-byte GRH slot too, as an HCA does).
// The port behind it: InfiniBand with LID 7 by default; OnPort() sets it up from a PortFacts
// (IbPort(), RocePort(): link layer, GIDs with their types, active MTU) through PlanPort and
// ApplyPlan, as the real open does, and keeps the address handle's attributes.
#include <gtest/gtest.h>

#include <cstring>
#include <deque>
#include <vector>

#include "drivers/verbs/ud_qp.h"

namespace txbatch::verbs::test {

class FakeUdQueuePair final : public UdQueuePair {
 public:
  struct Posted {
    uint64_t wr_id;
    unsigned flags;
    std::vector<ibv_sge> sges;
    std::vector<uint8_t> bytes;  // the datagram as the HCA would read it (header + packet)
    bool last_in_chain;
  };

  FakeUdQueuePair(unsigned sq_depth, unsigned rq_depth, unsigned max_inline = 0,
                  unsigned ipoib_mtu = 2044) {
    info_.qpn = 0x1234;
    info_.lid = 7;
    info_.sq_depth = sq_depth;
    info_.rq_depth = rq_depth;
    info_.max_inline = max_inline;
    info_.ipoib_mtu = ipoib_mtu;
    info_.ah = reinterpret_cast<ibv_ah*>(&ah_storage_);
    info_.remote_qpn = 0x48;
    info_.remote_qkey = 0x11111111;
    info_.describe = "fake0 port 1 (LID 7, active MTU 2048), QP 0x1234";
  }

  // A queue pair on a port with `facts`, set up by the driver's own PlanPort and ApplyPlan; the
  // sentence PlanPort gives when the options do not fit the port.
  static Result<std::unique_ptr<FakeUdQueuePair>> OnPort(const VerbsOptions& options,
                                                         const PortFacts& facts, unsigned sq_depth,
                                                         unsigned rq_depth,
                                                         unsigned max_inline = 0) {
    auto plan = PlanPort(options, facts);
    if (!plan) return plan.error();
    auto q = std::make_unique<FakeUdQueuePair>(sq_depth, rq_depth, max_inline);
    ApplyPlan(*plan, options, 0x1234, q->info_);
    q->ah_attr = plan->ah;
    if (!plan->has_peer) q->info_.ah = nullptr;  // a receiver has no address handle
    return q;
  }

  const UdQueueInfo& info() const override { return info_; }

  int PostSend(ibv_send_wr* wr, ibv_send_wr** bad) override {
    ++post_calls;
    if (state_ != State::kRts) ++violations;
    unsigned index = 0;
    for (; wr != nullptr; wr = wr->next, ++index) {
      if (fail_post_at && *fail_post_at == index) {
        fail_post_at.reset();
        *bad = wr;
        return fail_errno;
      }
      if (sq_.size() >= info_.sq_depth) {
        *bad = wr;
        return ENOMEM;
      }
      const bool inl = wr->send_flags & IBV_SEND_INLINE;
      unsigned total = 0;
      for (int s = 0; s < wr->num_sge; ++s) total += wr->sg_list[s].length;
      if (wr->num_sge < 1 || wr->num_sge > 2 || wr->opcode != IBV_WR_SEND ||
          wr->wr.ud.ah != info_.ah || wr->wr.ud.remote_qpn != info_.remote_qpn ||
          wr->wr.ud.remote_qkey != info_.remote_qkey || (inl && total > info_.max_inline)) {
        *bad = wr;
        return EINVAL;
      }
      Posted p{wr->wr_id, wr->send_flags, {}, {}, wr->next == nullptr};
      ibv_wc_status status = IBV_WC_SUCCESS;
      for (int s = 0; s < wr->num_sge; ++s) {
        const ibv_sge& g = wr->sg_list[s];
        p.sges.push_back(g);
        if (!inl && !Covered(g)) status = IBV_WC_LOC_PROT_ERR;
      }
      if (inl) p.bytes = Read(p.sges);  // copied by the provider now
      if (status == IBV_WC_SUCCESS && total > info_.ipoib_mtu + kIpoibHeaderBytes)
        status = IBV_WC_LOC_LEN_ERR;
      if (status == IBV_WC_SUCCESS && error_next) {
        status = *error_next;
        error_next.reset();
      }
      posted.push_back(p);
      sq_.push_back(
          {wr->wr_id, (wr->send_flags & IBV_SEND_SIGNALED) != 0, status, posted.size() - 1});
      if (sq_.size() == info_.sq_depth && !AnySignalled()) ++violations;
    }
    return 0;
  }

  int PollSend(int n, ibv_wc* wc) override { return Poll(cq_, n, wc); }

  int PostRecv(ibv_recv_wr* wr, ibv_recv_wr** bad) override {
    for (; wr != nullptr; wr = wr->next) {
      if (rq_.size() >= info_.rq_depth || wr->num_sge != 1 || !Covered(wr->sg_list[0])) {
        *bad = wr;
        return wr->num_sge != 1 ? EINVAL : ENOMEM;
      }
      rq_.push_back({wr->wr_id, wr->sg_list[0]});
    }
    return 0;
  }

  int PollRecv(int n, ibv_wc* wc) override { return Poll(rcq_, n, wc); }

  Result<uint32_t> Register(void* addr, size_t len) override {
    regions_.push_back({reinterpret_cast<uintptr_t>(addr), len, next_lkey_});
    return next_lkey_++;
  }

  Status Recover() override {
    if (state_ != State::kSqe || !sq_.empty()) {
      ++violations;
      return MakeError(EINVAL, "fake: Recover outside SQE or with requests outstanding");
    }
    state_ = State::kRts;
    return {};
  }

  void Flush() override {
    state_ = State::kErr;
    while (!sq_.empty()) {
      cq_.push_back(Wc(sq_.front().wr_id, IBV_WC_WR_FLUSH_ERR));
      sq_.pop_front();
    }
    while (!rq_.empty()) {
      ibv_wc w = Wc(rq_.front().wr_id, IBV_WC_WR_FLUSH_ERR);
      rcq_.push_back(w);
      rq_.pop_front();
    }
  }

  // The HCA finishes the `k` oldest send requests (all of them by default): a completion for
  // each signalled one and each that failed.
  void Finish(size_t k = ~size_t{0}) {
    while (k-- > 0 && !sq_.empty()) {
      const Req r = sq_.front();
      sq_.pop_front();
      Posted& p = posted[r.posted_index];
      if (!(p.flags & IBV_SEND_INLINE)) p.bytes = Read(p.sges);  // the HCA reads it now
      if (r.signalled || r.status != IBV_WC_SUCCESS) cq_.push_back(Wc(r.wr_id, r.status));
      if (r.status != IBV_WC_SUCCESS) {
        // SQE: everything behind the failed request is flushed, each with its own completion.
        state_ = State::kSqe;
        while (!sq_.empty()) {
          cq_.push_back(Wc(sq_.front().wr_id, IBV_WC_WR_FLUSH_ERR));
          sq_.pop_front();
        }
      }
    }
  }

  // A datagram arrives: written to the oldest posted receive buffer after the 40-byte GRH slot.
  bool Deliver(const std::vector<uint8_t>& datagram) {
    if (rq_.empty()) return false;
    const Recv r = rq_.front();
    rq_.pop_front();
    ibv_wc w = Wc(r.wr_id, IBV_WC_SUCCESS);
    w.byte_len = static_cast<uint32_t>(kGrhBytes + datagram.size());
    if (w.byte_len > r.sge.length) {
      w.status = IBV_WC_LOC_LEN_ERR;
    } else {
      // The GRH slot holds the packet's GRH (IB) or, on RoCE v2 over IPv4, 20 undefined bytes
      // and its IPv4 header: never the datagram's.
      std::memset(reinterpret_cast<uint8_t*>(r.sge.addr), 0x45, kGrhBytes);
      std::memcpy(reinterpret_cast<uint8_t*>(r.sge.addr) + kGrhBytes, datagram.data(),
                  datagram.size());
    }
    rcq_.push_back(w);
    return true;
  }

  size_t outstanding() const { return sq_.size(); }
  size_t recv_posted() const { return rq_.size(); }
  uint32_t LkeyFor(const void* addr) const {
    for (const auto& r : regions_)
      if (reinterpret_cast<uintptr_t>(addr) >= r.start &&
          reinterpret_cast<uintptr_t>(addr) < r.start + r.len)
        return r.lkey;
    return 0;
  }

  ibv_ah_attr ah_attr{};  // OnPort: the peer's address handle as it would be created
  // Test knobs.
  std::optional<unsigned> fail_post_at;  // the next post fails at this index of its chain
  int fail_errno = ENOMEM;
  std::optional<ibv_wc_status> error_next;  // the next request posted completes with this
  // What was seen.
  std::vector<Posted> posted;
  unsigned post_calls = 0;
  unsigned violations = 0;  // the queue filled with nothing signalled in it

 private:
  enum class State { kRts, kSqe, kErr };
  struct Req {
    uint64_t wr_id;
    bool signalled;
    ibv_wc_status status;
    size_t posted_index;
  };
  static std::vector<uint8_t> Read(const std::vector<ibv_sge>& sges) {
    std::vector<uint8_t> bytes;
    for (const ibv_sge& g : sges) {
      const auto* from = reinterpret_cast<const uint8_t*>(g.addr);
      bytes.insert(bytes.end(), from, from + g.length);
    }
    return bytes;
  }
  struct Recv {
    uint64_t wr_id;
    ibv_sge sge;
  };
  struct Region {
    uintptr_t start;
    size_t len;
    uint32_t lkey;
  };
  // Up to `n` completions from the front of `cq` into `wc`, as ibv_poll_cq: how many it gave.
  static int Poll(std::deque<ibv_wc>& cq, int n, ibv_wc* wc) {
    int k = 0;
    while (k < n && !cq.empty()) {
      wc[k++] = cq.front();
      cq.pop_front();
    }
    return k;
  }
  static ibv_wc Wc(uint64_t id, ibv_wc_status status) {
    ibv_wc w{};
    w.wr_id = id;
    w.status = status;
    w.opcode = IBV_WC_SEND;
    return w;
  }
  bool AnySignalled() const {
    for (const Req& r : sq_)
      if (r.signalled) return true;
    return false;
  }
  bool Covered(const ibv_sge& g) const {
    for (const auto& r : regions_)
      if (r.lkey == g.lkey && g.addr >= r.start && g.addr + g.length <= r.start + r.len)
        return true;
    return false;
  }
  UdQueueInfo info_;
  State state_ = State::kRts;
  int ah_storage_ = 0;
  std::deque<Req> sq_;
  std::deque<ibv_wc> cq_;
  std::deque<Recv> rq_;
  std::deque<ibv_wc> rcq_;
  std::vector<Region> regions_;
  uint32_t next_lkey_ = 0x100;
};

// An InfiniBand port: LID 7, active MTU 2048, one IB GID.
inline PortFacts IbPort() {
  PortFacts f;
  f.lid = 7;
  f.gids.push_back(PortFacts::Gid{{0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 2, 0xc9, 3, 0, 1, 0x1b, 0x2c},
                                  IBV_GID_TYPE_IB});
  return f;
}

// A RoCE port laid out as rxe's over a netdev with 10.0.0.1 and a link-local IPv6 address:
// 0 fe80::1 v1, 1 fe80::1 v2, 2 ::ffff:10.0.0.1 v1, 3 ::ffff:10.0.0.1 v2, then empty slots.
inline PortFacts RocePort(ibv_mtu active_mtu = IBV_MTU_1024) {
  PortFacts f;
  f.link_layer = IBV_LINK_LAYER_ETHERNET;
  f.active_mtu = active_mtu;
  const std::array<uint8_t, 16> ll = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  const std::array<uint8_t, 16> v4 = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1};
  f.gids = {PortFacts::Gid{ll, IBV_GID_TYPE_ROCE_V1},
            PortFacts::Gid{ll, IBV_GID_TYPE_ROCE_V2},
            PortFacts::Gid{v4, IBV_GID_TYPE_ROCE_V1},
            PortFacts::Gid{v4, IBV_GID_TYPE_ROCE_V2},
            std::nullopt,
            std::nullopt};
  return f;
}

}  // namespace txbatch::verbs::test
