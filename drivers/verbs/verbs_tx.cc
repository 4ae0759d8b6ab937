// The verbs driver's data path over a UdQueuePair (see verbs_tx.h for what it does and why).
#include "drivers/verbs/verbs_tx.h"

#include <fmt/format.h>
#include <rte_byteorder.h>
#include <rte_ether.h>

#include <algorithm>
#include <cstring>

#include "dataplane/frame.h"

namespace txbatch::verbs {
namespace {

// The Ethernet header a received datagram is given ends where its IP packet starts.
constexpr unsigned kRxEthOffset = kGrhBytes + kIpoibHeaderBytes - kEthHeaderBytes;
// How long a teardown waits for the flushed requests to come back before freeing anyway.
constexpr double kPurgeWaitS = 1.0;

}  // namespace

VerbsTx::VerbsTx(const VerbsOptions& options, std::unique_ptr<UdQueuePair> qp, FrameReceiver* sink,
                 const RunWindow& window, double tsc_hz)
    : options_(options),
      qp_(std::move(qp)),
      info_(qp_->info()),
      sink_(sink),
      window_(window),
      tsc_hz_(tsc_hz),
      poll_interval_(static_cast<Tsc>(tsc_hz * 5e-6)),
      headers_(info_.sq_depth),
      slots_(info_.sq_depth, nullptr),
      wake_threshold_(std::max(1u, std::min(32u, info_.sq_depth / 4))),
      wrs_(kMaxBatch),
      sges_(kMaxBatch),
      recv_slots_(info_.rq_depth, nullptr) {
  FreeAllRecvSlots();
}

void VerbsTx::FreeAllRecvSlots() {
  recv_free_.clear();
  recv_free_.reserve(recv_slots_.size());
  for (size_t i = recv_slots_.size(); i-- > 0;) recv_free_.push_back(static_cast<uint32_t>(i));
}

VerbsTx::~VerbsTx() {
  (void)Purge();
  qp_.reset();  // its memory registrations go before the memory they cover
}

Status VerbsTx::RegisterPool(rte_mempool* pool) {
  struct Walk {
    UdQueuePair* qp;
    std::vector<Region>* regions;
    Status status;
  } walk{qp_.get(), &regions_, {}};
  rte_mempool_mem_iter(
      pool,
      [](rte_mempool*, void* arg, rte_mempool_memhdr* hdr, unsigned) {
        auto* w = static_cast<Walk*>(arg);
        if (!w->status) return;
        auto lkey = w->qp->Register(hdr->addr, hdr->len);
        if (!lkey) {
          w->status = lkey.error();
          return;
        }
        const auto start = reinterpret_cast<uintptr_t>(hdr->addr);
        w->regions->push_back({start, start + hdr->len, *lkey});
      },
      &walk);
  std::sort(regions_.begin(), regions_.end(),
            [](const Region& a, const Region& b) { return a.start < b.start; });
  return walk.status;
}

Status VerbsTx::Init(rte_mempool* pool, unsigned mtu, unsigned rx_extra) {
  if (mtu > info_.ipoib_mtu)
    return MakeError(EMSGSIZE, fmt::format("--mtu {} does not fit {}: a datagram there carries "
                                           "at most {} bytes of IP packet (the port's active MTU "
                                           "less the 4-byte IPoIB header); valid: --mtu 68..{}",
                                           mtu, info_.describe, info_.ipoib_mtu, info_.ipoib_mtu));
  // Every chunk of the pool, so any mbuf's data is posted where it lies.
  if (Status s = RegisterPool(pool); !s) return s;
  auto lkey = qp_->Register(headers_.data(), headers_.size() * kIpoibHeaderBytes);
  if (!lkey) return lkey.error();
  header_lkey_ = *lkey;
  // Receive buffers hold the GRH slot, the IPoIB header and a full datagram of the port's MTU,
  // whatever --mtu the sender's frames were built for (CreatePacketPool's room is MTU + 18).
  auto rx = CreatePacketPool(fmt::format("vrx{:x}", reinterpret_cast<uintptr_t>(this) & 0xffffff),
                             info_.rq_depth + kReceivePoolSlack + rx_extra,
                             info_.ipoib_mtu + kGrhBytes + kIpoibHeaderBytes - 18);
  if (!rx) return rx.error();
  rx_pool_ = std::move(*rx);
  if (Status s = RegisterPool(rx_pool_.get()); !s) return s;
  PostRecvBuffers();
  return {};
}

std::optional<uint32_t> VerbsTx::LkeyOf(const void* addr) const {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  auto it = std::upper_bound(regions_.begin(), regions_.end(), a,
                             [](uintptr_t v, const Region& r) { return v < r.start; });
  if (it == regions_.begin()) return std::nullopt;
  --it;
  if (a >= it->end) return std::nullopt;
  return it->lkey;
}

void VerbsTx::Break() {
  broken_ = true;
  qp_->Flush();  // what is outstanding completes flushed; Complete reaps it
}

unsigned VerbsTx::BuildChain(std::span<rte_mbuf* const> frames, size_t first, unsigned room) {
  unsigned built = 0;
  for (size_t f = first; f < frames.size() && built < room; ++f) {
    rte_mbuf* m = frames[f];
    const auto* data = rte_pktmbuf_mtod(m, const uint8_t*);
    const unsigned len = rte_pktmbuf_data_len(m);
    const auto lkey = LkeyOf(data);
    if (!lkey || len < kEthHeaderBytes) break;
    const uint64_t id = head_ + built;
    auto& hdr = headers_[id % info_.sq_depth];
    hdr = {data[12], data[13], 0, 0};  // the frame's EtherType, then the reserved bytes
    const unsigned packet = len - kEthHeaderBytes;
    auto& sge = sges_[built];
    sge[0] = {reinterpret_cast<uintptr_t>(hdr.data()), kIpoibHeaderBytes, header_lkey_};
    sge[1] = {reinterpret_cast<uintptr_t>(data + kEthHeaderBytes), packet, *lkey};
    ibv_send_wr& wr = wrs_[built];
    wr = {};
    wr.wr_id = id;
    wr.sg_list = sge.data();
    wr.num_sge = 2;
    wr.opcode = IBV_WR_SEND;
    wr.wr.ud.ah = info_.ah;
    wr.wr.ud.remote_qpn = info_.remote_qpn;
    wr.wr.ud.remote_qkey = info_.remote_qkey;
    if (kIpoibHeaderBytes + packet <= std::min(options_.inline_max, info_.max_inline))
      wr.send_flags |= IBV_SEND_INLINE;
    if (built > 0) wrs_[built - 1].next = &wr;
    ++built;
  }
  // Signals: every signal_every-th request, and the chain's last.
  for (unsigned i = 0, since = since_signal_; i < built; ++i)
    if (++since >= options_.signal_every || i + 1 == built) {
      wrs_[i].send_flags |= IBV_SEND_SIGNALED;
      since = 0;
    }
  return built;
}

uint16_t VerbsTx::XmitAt(std::span<rte_mbuf* const> frames, Tsc now) {
  if (frames.empty()) return 0;
  if (broken_) {
    // Nothing can be sent any more: drop, counted, so the run drains and its books close.
    for (rte_mbuf* m : frames) rte_pktmbuf_free(m);
    vc_.dropped_broken.Add(frames.size());
    return static_cast<uint16_t>(frames.size());
  }
  if (recovering_) {
    stopped_ = true;  // until the QP is back in RTS (Complete)
    counters_.stops.Add();
    return 0;
  }
  // Counted where the driver accepts them (counted_at driver), with the link's headers (IB or
  // RoCE v2).
  const bool count_here = window_.Contains(now);

  // Frames outside registered memory lead the batch only (never in txbatch's own runs): drop
  // them, counted; one met after the chain has started ends the chain, so one post per call.
  size_t skipped = 0;
  while (skipped < frames.size()) {
    const auto* data = rte_pktmbuf_mtod(frames[skipped], const uint8_t*);
    if (LkeyOf(data) && rte_pktmbuf_data_len(frames[skipped]) >= kEthHeaderBytes) break;
    rte_pktmbuf_free(frames[skipped++]);
    vc_.unregistered.Add();
  }
  const unsigned built = BuildChain(frames, skipped, FreeSlots());
  unsigned posted = 0;
  int rc = 0;
  if (built > 0) {
    ibv_send_wr* bad = nullptr;
    rc = qp_->PostSend(wrs_.data(), &bad);
    posted = rc == 0 ? built : bad != nullptr ? static_cast<unsigned>(bad - wrs_.data()) : 0;
  }
  uint64_t window_frames = 0, window_payload = 0, window_wire = 0;
  if (posted > 0) {
    vc_.posts.Add();
    counters_.doorbells.Add();
    vc_.work_requests.Add(posted);
  }
  for (unsigned i = 0; i < posted; ++i) {
    rte_mbuf* m = frames[skipped + i];
    if (count_here) {
      ++window_frames;
      window_payload += PayloadBytes(m);
      // The UD payload (IPoIB header + IP packet) and what the port's link wraps it in.
      window_wire +=
          kIpoibHeaderBytes + rte_pktmbuf_data_len(m) - kEthHeaderBytes + info_.wire_overhead;
    }
    if (wrs_[i].send_flags & IBV_SEND_SIGNALED) {
      vc_.signalled.Add();
      since_signal_ = 0;
    } else {
      ++since_signal_;
    }
    if (wrs_[i].send_flags & IBV_SEND_INLINE) {
      rte_pktmbuf_free(m);  // the provider copied it at post time
      vc_.inline_sends.Add();
      m = nullptr;
    }
    slots_[(head_ + i) % info_.sq_depth] = m;
  }
  head_ += posted;
  size_t done = skipped + posted;
  if (rc != 0 && rc != ENOMEM) {
    // The requests were built within the QP's limits: a refusal means the QP is broken.
    for (unsigned i = posted; i < built; ++i) rte_pktmbuf_free(frames[skipped + i]);
    vc_.post_errors.Add(built - posted);
    done = skipped + built;
    Break();
  }
  if (posted > 0) counters_.last_departure.Max(now);
  if (window_frames > 0) {
    counters_.window_frames.Add(window_frames);
    counters_.window_payload_bytes.Add(window_payload);
    counters_.window_wire_bytes.Add(window_wire);
  }
  if (done < frames.size()) {
    stopped_ = true;
    counters_.stops.Add();
  }
  return static_cast<uint16_t>(done);
}

unsigned VerbsTx::ReleaseThrough(uint64_t upto) {
  std::array<rte_mbuf*, kMaxBatch> freed;
  unsigned n = 0, total = 0;
  while (tail_ <= upto) {
    rte_mbuf*& slot = slots_[tail_ % info_.sq_depth];
    if (slot != nullptr) freed[n++] = slot;
    slot = nullptr;
    ++tail_;
    ++total;
    if (n == freed.size()) {
      rte_pktmbuf_free_bulk(freed.data(), n);
      n = 0;
    }
  }
  if (n > 0) rte_pktmbuf_free_bulk(freed.data(), n);
  return total;
}

unsigned VerbsTx::ReapSend() {
  unsigned released = 0;
  std::array<ibv_wc, kPollBatch> wc;
  while (true) {
    const int got = qp_->PollSend(kPollBatch, wc.data());
    if (got <= 0) break;
    for (int i = 0; i < got; ++i) {
      vc_.send_completions.Add();
      if (wc[i].status != IBV_WC_SUCCESS) {
        vc_.wc_errors[std::min<size_t>(wc[i].status, kWcStatuses - 1)].Add();
        // A failed send puts the QP in SQE; the requests behind it come back flushed.
        if (wc[i].status != IBV_WC_WR_FLUSH_ERR && !broken_) recovering_ = true;
      }
      // In order: everything up to a completed request has completed (an error is reported for
      // the request itself even when it was unsignalled).
      if (wc[i].wr_id >= tail_ && wc[i].wr_id < head_) released += ReleaseThrough(wc[i].wr_id);
    }
    if (got < static_cast<int>(kPollBatch)) break;
  }
  if (recovering_ && Outstanding() == 0) {
    recovering_ = false;
    if (Status s = qp_->Recover(); s) {
      vc_.recoveries.Add();
    } else {
      Break();
    }
  }
  return released;
}

void VerbsTx::PostRecvBuffers() {
  if (!rx_pool_ || broken_) return;
  while (!recv_free_.empty()) {
    const uint32_t i = recv_free_.back();
    rte_mbuf* m = rte_pktmbuf_alloc(rx_pool_.get());
    const auto lkey = m != nullptr ? LkeyOf(m->buf_addr) : std::nullopt;
    if (!lkey) {
      if (m != nullptr) rte_pktmbuf_free(m);
      vc_.recv_refill_failures.Add();
      return;  // tried again at the next Receive
    }
    ibv_sge sge{reinterpret_cast<uintptr_t>(rte_pktmbuf_mtod(m, void*)),
                static_cast<uint32_t>(rte_pktmbuf_tailroom(m)), *lkey};
    ibv_recv_wr wr{};
    wr.wr_id = i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    ibv_recv_wr* bad = nullptr;
    if (qp_->PostRecv(&wr, &bad) != 0) {
      rte_pktmbuf_free(m);
      vc_.recv_refill_failures.Add();
      return;
    }
    recv_slots_[i] = m;
    recv_free_.pop_back();
    ++recv_posted_;
  }
}

uint16_t VerbsTx::Receive(std::span<rte_mbuf*> out) {
  std::array<ibv_wc, kPollBatch> wc;
  const int got =
      qp_->PollRecv(static_cast<int>(std::min<size_t>(out.size(), kPollBatch)), wc.data());
  uint16_t k = 0;
  for (int i = 0; i < got; ++i) {
    if (wc[i].wr_id >= recv_slots_.size() || recv_slots_[wc[i].wr_id] == nullptr) continue;
    rte_mbuf* m = recv_slots_[wc[i].wr_id];
    recv_slots_[wc[i].wr_id] = nullptr;
    recv_free_.push_back(static_cast<uint32_t>(wc[i].wr_id));
    --recv_posted_;
    if (wc[i].status != IBV_WC_SUCCESS || wc[i].byte_len < kGrhBytes + kIpoibHeaderBytes) {
      vc_.recv_errors.Add();
      rte_pktmbuf_free(m);
      continue;
    }
    vc_.recv_completions.Add();
    // [GRH 40][EtherType 2][reserved 2][IP packet]: the Ethernet header takes the 14 bytes
    // before the packet, its EtherType where the reserved bytes were.
    auto* b = rte_pktmbuf_mtod(m, uint8_t*);
    const uint8_t et[2] = {b[kGrhBytes], b[kGrhBytes + 1]};
    auto* eth = reinterpret_cast<rte_ether_hdr*>(b + kRxEthOffset);
    eth->dst_addr = kTxbatchDstMac;
    eth->src_addr = kTxbatchSrcMac;
    std::memcpy(&eth->ether_type, et, 2);
    m->data_off += kRxEthOffset;
    m->data_len = static_cast<uint16_t>(wc[i].byte_len - kRxEthOffset);
    m->pkt_len = m->data_len;
    out[k++] = m;
  }
  // Whatever is not posted (taken now, or a refill that failed before): posted again.
  if (recv_posted_ < recv_slots_.size()) PostRecvBuffers();
  return k;
}

unsigned VerbsTx::Complete(Tsc now) {
  const unsigned released = ReapSend();
  if (stopped_ && !recovering_ && FreeSlots() >= wake_threshold_) {
    stopped_ = false;
    counters_.wakes.Add();
  }
  if (sink_ != nullptr) {
    std::array<rte_mbuf*, kPollBatch> frames;
    std::array<Tsc, kPollBatch> arrival;
    arrival.fill(now);
    while (const uint16_t k = Receive(frames)) {
      sink_->Receive({frames.data(), k}, {arrival.data(), k});
      if (k < frames.size()) break;
    }
  }
  return released;
}

Tsc VerbsTx::NextCompletion() const {
  // An HCA completes on its own time: poll soon while anything is in flight.
  return Outstanding() > 0 ? Now() + poll_interval_ : kNever;
}

unsigned VerbsTx::Purge() {
  const unsigned held = Outstanding();
  if (held == 0 && recv_posted_ == 0) return 0;
  // The HCA lets go of every buffer first: the error state flushes what is outstanding, and
  // the flushes come back (asynchronously) before anything is freed.
  qp_->Flush();
  broken_ = true;
  const Tsc deadline = Now() + static_cast<Tsc>(kPurgeWaitS * tsc_hz_);
  std::array<ibv_wc, kPollBatch> wc;
  while ((Outstanding() > 0 || recv_posted_ > 0) && Now() < deadline) {
    (void)ReapSend();
    const int got = qp_->PollRecv(kPollBatch, wc.data());
    for (int i = 0; i < got; ++i)
      if (wc[i].wr_id < recv_slots_.size() && recv_slots_[wc[i].wr_id] != nullptr) {
        rte_pktmbuf_free(recv_slots_[wc[i].wr_id]);
        recv_slots_[wc[i].wr_id] = nullptr;
        --recv_posted_;
      }
  }
  if (Outstanding() > 0 || recv_posted_ > 0) vc_.purge_timeouts.Add();
  if (head_ > tail_) (void)ReleaseThrough(head_ - 1);
  for (rte_mbuf*& m : recv_slots_) {
    if (m != nullptr) rte_pktmbuf_free(m);
    m = nullptr;
  }
  FreeAllRecvSlots();
  recv_posted_ = 0;
  stopped_ = false;
  return held;
}

std::map<std::string, uint64_t> VerbsTx::ExtraCounters() const {
  std::map<std::string, uint64_t> c = {
      {"posts", vc_.posts.Get()},
      {"work_requests", vc_.work_requests.Get()},
      {"signalled", vc_.signalled.Get()},
      {"send_completions", vc_.send_completions.Get()},
      {"inline_sends", vc_.inline_sends.Get()},
      {"post_errors", vc_.post_errors.Get()},
      {"dropped_broken", vc_.dropped_broken.Get()},
      {"unregistered", vc_.unregistered.Get()},
      {"recoveries", vc_.recoveries.Get()},
      {"recv_completions", vc_.recv_completions.Get()},
      {"recv_errors", vc_.recv_errors.Get()},
      {"recv_refill_failures", vc_.recv_refill_failures.Get()},
      {"purge_timeouts", vc_.purge_timeouts.Get()},
  };
  for (size_t s = 0; s < kWcStatuses; ++s)
    if (const uint64_t n = vc_.wc_errors[s].Get()) {
      std::string name = std::string("wc_") + ibv_wc_status_str(static_cast<ibv_wc_status>(s));
      std::replace(name.begin(), name.end(), ' ', '_');
      c[name] = n;  // "wc_local_protection_error"
    }
  return c;
}

std::string VerbsTx::link_layer() const { return std::string(LinkLayerName(info_.link_layer)); }

std::string VerbsTx::Describe() const {
  return fmt::format("{} ({})", options_.ToString(), info_.describe);
}

}  // namespace txbatch::verbs
