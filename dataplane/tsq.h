#pragma once
// TCP Small Queues (DESIGN.md "TSO and GSO"; Linux tcp_small_queue_check, 3.6 on): a TCP
// socket keeps at most `limit` bytes below it — in the qdisc and the driver's ring, not yet
// completed — and waits (TSQ_THROTTLED) until completions free its skbs (tcp_wfree) before it
// hands the stack another. The kernel's limit (3.12 on; 6.1's tcp_small_queue_check):
//
//   limit = min(max(2 x skb->truesize, sk_pacing_rate >> sk_pacing_shift), tcp_limit_output_bytes)
//
// with sk_pacing_shift 10 (about 1 ms of the flow's pacing rate). The pacing rate is
// tcp_update_pacing_rate's: 120 % (tcp_pacing_ca_ratio; 200 % in slow start) of
// max(cwnd, packets_out) x mss / srtt, and for a flow that TSQ, not its window, holds back,
// packets_out x mss / srtt is what it delivers (Little's law: what is in flight over the time a
// segment takes to be acked). So the ledger measures each flow's delivery rate from its own
// completions and takes 1.2 x that as its pacing rate. On a 1 Gb/s LAN one stream's limit is
// then ~140 KB (2 x truesize of a 64 KiB GSO skb, ~133 KB, is the floor), not the cap.
// The cap is --tsq (tcp_limit_output_bytes: 4 MiB since 6.16, 1 MiB in 5.0-6.15, 256 KiB in
// 4.2-4.20, 128 KiB in 3.6-4.1); a flow with nothing below it always sends.
//
// Bytes are the kernel's: an skb's truesize, its payload and kSkbTruesizeOverhead — what `ss -m`
// shows as skmem `t` (sk_wmem_alloc). A GSO frame is one skb under TSO; cut in the stack
// (software GSO) it becomes one skb a segment, each with its own overhead (tcp_gso_segment
// charges the socket the difference), which the ledger charges up front.
//
// The ledger keeps each flow's (producer's) bytes below the socket: the producer charges a frame
// before it hands it over and gives it back if it was dropped; the driver that reclaims it after
// its completion (the emulated NIC) releases it, at the completion's time. Thread-safe: a flow's
// bytes are written by its producer and by the completing role; a throttled producer sleeps on
// its flow's epoch, which a release bumps (seq_cst on both sides: no lost wake-up). The rate
// sample is taken by whichever releasing thread gets the flow's sample lock (one that does not
// skips it: the next release samples).

#include <rte_byteorder.h>
#include <rte_mbuf.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/tsc.h"
#include "batching/flush_policy.h"
#include "dataplane/frame.h"
#include "dataplane/gso.h"

namespace txbatch {

// tcp_limit_output_bytes in 5.0-6.15 (c73e5807e4f6): --tsq's default where no kernel era says
// otherwise (EraTsqBytes).
inline constexpr uint64_t kDefaultTsqBytes = 1 << 20;
// tcp_limit_output_bytes in 3.6-4.1 (3.18's, linux-2014's; 4.2 doubled it: c39c4c6abb89) and
// since 6.16 ("tcp: increase tcp_limit_output_bytes default value to 4MB", May 2025:
// linux-2025's).
inline constexpr uint64_t kTsqBytes3_6 = 131072;
inline constexpr uint64_t kTsqBytes6_16 = 4 << 20;

// --tsq's default for a cell: the tcp_limit_output_bytes of the kernel its policy names —
// linux-2014 (3.18) 128 KiB, linux-2025 4 MiB — and 1 MiB (5.0-6.15) for bql (today's BQL
// drivers) and the policies of no kernel (count:N, buffer:N). blist-2007's 2.6 kernel predates
// TCP Small Queues (3.6): a socket there was bounded by its send buffer, which txbatch does not
// model, and the 1 MiB stands in for it (doc/design.md "TCP Small Queues"). Every kind named:
// a new one is a compile warning here until its era is chosen.
inline uint64_t EraTsqBytes(const PolicySpec& policy) {
  switch (policy.kind) {
    case PolicyKind::kLinux2014:
      return kTsqBytes3_6;
    case PolicyKind::kLinux2025:
      return kTsqBytes6_16;
    case PolicyKind::kBql:
    case PolicyKind::kCount:
    case PolicyKind::kBuffer:
    case PolicyKind::kBlist2007:
      return kDefaultTsqBytes;
  }
  return kDefaultTsqBytes;
}
// The largest --tsq (the kernel's sysctl is an int): 1 GiB.
inline constexpr uint64_t kMaxTsqBytes = 1 << 30;
// An skb's truesize beyond its payload, for a TCP skb of x86-64 6.1 (Debian's config):
// tcp_stream_alloc_skb allocates MAX_TCP_HEADER (L1_CACHE_ALIGN(128 + MAX_HEADER 176) = 320)
// plus skb_shared_info (320) from kmalloc-1024, and SKB_TRUESIZE adds sk_buff (256 aligned)
// and skb_shared_info to the 704 usable: 1280; the payload sits in page frags, counted byte
// for byte (skb->truesize += copy).
inline constexpr uint32_t kSkbTruesizeOverhead = 1280;
// tcp_pacing_ca_ratio (120 %): the pacing rate over what the flow delivers, in congestion
// avoidance, where a LAN bulk flow is once HyStart has seen its own queue's delay.
inline constexpr double kPacingRatio = 1.2;
// 3.12-4.2's fixed ratio ("tcp: refine pacing rate determination", 43e122b014c9, 4.3, brought
// the 120 %/200 % split): 200 % of cwnd x mss / srtt whatever the phase — linux-2014's (3.18).
inline constexpr double kPacingRatio3_12 = 2.0;
// sk_pacing_shift: the limit is the pacing rate's 2^-10 s (~1 ms).
inline constexpr unsigned kPacingShift = 10;
// A delivery-rate sample spans at least this much of the flow's completions (4 GSO frames at
// 1 Gb/s: one frame's quantum is a quarter of the sample), and samples are smoothed with gain
// 1/4, as srtt smooths the kernel's rate (1/8 an ACK, several ACKs a frame).
inline constexpr double kRateSampleS = 2e-3;
inline constexpr double kRateGain = 0.25;

// sk_wmem_alloc starts at 1, the socket's own reference (sock_init_data), and the check reads it
// whole: two equal skbs below a limit of twice their truesize are over it. (`ss -m`'s skmem t is
// sk_wmem_alloc - 1: Below leaves the bias out.)
inline constexpr int64_t kWmemAllocBias = 1;

// The flow of a frame FrameBuilder built (from the lengths it set; no parsing).
inline uint16_t FlowOf(const rte_mbuf* m) {
  const auto* h =
      rte_pktmbuf_mtod_offset(m, const TxbatchHeader*, m->l2_len + m->l3_len + m->l4_len);
  return rte_be_to_cpu_16(h->flow_be);
}

struct TsqModel {
  uint64_t cap = kDefaultTsqBytes;  // tcp_limit_output_bytes (--tsq), > 0
  // The clock releases are timed by (TSC ticks a second); 0: no pacing term (the limit is
  // min(2 x truesize, cap)).
  double tsc_hz = 0;
  // Software GSO: a GSO frame becomes one skb a segment before the driver.
  bool segments_are_skbs = false;
  uint32_t skb_overhead = kSkbTruesizeOverhead;
  // The pacing rate over the delivery rate (EraPacingRatio).
  double pacing_ratio = kPacingRatio;
};

// The pacing ratio of the kernel a policy names: linux-2014 (3.18) 200 %, the others 120 %.
inline double EraPacingRatio(const PolicySpec& policy) {
  return policy.kind == PolicyKind::kLinux2014 ? kPacingRatio3_12 : kPacingRatio;
}

class TsqLedger {
 public:
  TsqLedger(unsigned flows, const TsqModel& model)
      : model_(model),
        sample_tsc_(model.tsc_hz * kRateSampleS),
        flows_(std::make_unique<Flow[]>(flows)),
        n_(flows) {}

  // The limit on `flow` now (bytes of truesize).
  int64_t Limit(unsigned flow) const {
    const Flow& f = flows_[flow];
    const auto paced = static_cast<int64_t>(f.pacing_bps.load() / (1u << kPacingShift));
    return std::min(static_cast<int64_t>(model_.cap), std::max(2 * f.last_truesize.load(), paced));
  }
  // tcp_small_queue_check for `flow`: whether it has more than its limit below it now, as the
  // kernel reads sk_wmem_alloc — with the socket's own reference (kWmemAllocBias) in it. A flow
  // with nothing below always sends (the kernel's: with nothing unacked, tcp_rtx_queue_empty).
  bool Throttled(unsigned flow) const {
    const int64_t below = flows_[flow].bytes.load();
    return below > 0 && below + kWmemAllocBias > Limit(flow);
  }
  int64_t Below(unsigned flow) const { return flows_[flow].bytes.load(); }
  // The flow's pacing rate (bytes a second): the model's pacing_ratio x its smoothed delivery
  // rate; 0 before its first sample or without a clock.
  double PacingRate(unsigned flow) const { return flows_[flow].pacing_bps.load(); }
  uint64_t cap() const { return model_.cap; }
  unsigned flows() const { return n_; }
  // Times `flow`'s producer went to sleep in WaitForRoom (each look that found it over).
  uint32_t sleeps(unsigned flow) const { return flows_[flow].sleeps.load(); }

  // The producer of `flow`: sleeps while it is throttled, until a release brings it to the limit
  // or Abort. Returns whether it waited.
  bool WaitForRoom(unsigned flow) {
    Flow& f = flows_[flow];
    bool waited = false;
    while (true) {
      // The epoch before the abort flag: an Abort after this look bumps it, and the wait
      // returns at once.
      const uint32_t epoch = f.epoch.load();
      if (aborted_.load()) break;
      f.waiting.store(true);
      if (!Throttled(flow)) break;
      waited = true;
      f.sleeps.fetch_add(1);
      f.epoch.wait(epoch);
    }
    f.waiting.store(false);
    return waited;
  }

  // Truesize of a frame of `payload` bytes in `slices` MSS slices (a GSO frame, 1 otherwise) as
  // it goes below the socket.
  uint32_t Truesize(uint32_t payload, unsigned slices) const {
    return payload + model_.skb_overhead * (model_.segments_are_skbs ? slices : 1);
  }
  // A frame of `flow` goes below the socket (before the handover), or came back unsent.
  void Charge(unsigned flow, uint32_t payload, unsigned slices = 1) {
    // tcp_small_queue_check looks at TCP's skb, before any GSO cut: its truesize.
    flows_[flow].last_truesize.store(payload + model_.skb_overhead);
    flows_[flow].bytes.fetch_add(Truesize(payload, slices));
  }
  void Charge(unsigned flow, const rte_mbuf* m) { Charge(flow, PayloadBytes(m), WireFrames(m)); }
  void Uncharge(unsigned flow, uint32_t payload, unsigned slices = 1) {
    Give(flow, Truesize(payload, slices));
  }
  void Uncharge(unsigned flow, const rte_mbuf* m) { Uncharge(flow, PayloadBytes(m), WireFrames(m)); }

  // The driver reclaimed skb `m` (a frame, a segment, or a GSO frame the NIC cut) after its
  // completion at `now` (tcp_wfree): its flow may send again. now = 0: freed without a
  // completion (a purge), no rate sample.
  void Release(const rte_mbuf* m, Tsc now) {
    const unsigned flow = FlowOf(m);
    if (flow >= n_) return;  // not a producer's frame
    const uint32_t payload = PayloadBytes(m);
    if (now != 0 && model_.tsc_hz > 0) Sample(flows_[flow], payload, now);
    Give(flow, payload + model_.skb_overhead);
  }

  // A drain that did not finish: every waiting producer returns (and its frames are dropped).
  void Abort() {
    aborted_.store(true);
    for (unsigned i = 0; i < n_; ++i) {
      flows_[i].epoch.fetch_add(1);
      flows_[i].epoch.notify_all();
    }
  }
  // The simulation's producers do not sleep on a futex: it is told of each release instead.
  void set_on_release(std::function<void(unsigned)> f) { on_release_ = std::move(f); }

 private:
  struct alignas(64) Flow {
    std::atomic<int64_t> bytes{0};
    std::atomic<int64_t> last_truesize{0};  // of the skb it charged last
    std::atomic<uint32_t> epoch{0};
    std::atomic<bool> waiting{false};
    std::atomic<uint32_t> sleeps{0};
    // The delivery rate: payload completed since the sample began at sample_start.
    std::atomic<bool> sampling{false};
    Tsc sample_start = 0;
    uint64_t sample_bytes = 0;
    std::atomic<double> pacing_bps{0};
  };

  void Give(unsigned flow, uint32_t bytes) {
    if (flow >= n_) return;
    Flow& f = flows_[flow];
    f.bytes.fetch_sub(bytes);
    if (f.waiting.load()) {
      f.epoch.fetch_add(1);
      f.epoch.notify_all();
    }
    if (on_release_) on_release_(flow);
  }

  // A completion of `payload` bytes at `now`: the bytes completed after the sample's first
  // completion, over the time since it, once that is kRateSampleS or more.
  void Sample(Flow& f, uint32_t payload, Tsc now) {
    if (f.sampling.exchange(true, std::memory_order_acquire)) return;
    if (f.sample_start == 0 || now < f.sample_start) {
      f.sample_start = now;
      f.sample_bytes = 0;
    } else {
      f.sample_bytes += payload;
      const double span = static_cast<double>(now - f.sample_start);
      if (span >= sample_tsc_) {
        const double rate =
            model_.pacing_ratio * static_cast<double>(f.sample_bytes) * model_.tsc_hz / span;
        const double old = f.pacing_bps.load();
        f.pacing_bps.store(old == 0 ? rate : old + kRateGain * (rate - old));
        f.sample_start = now;
        f.sample_bytes = 0;
      }
    }
    f.sampling.store(false, std::memory_order_release);
  }

  const TsqModel model_;
  const double sample_tsc_;
  std::unique_ptr<Flow[]> flows_;
  const unsigned n_;
  std::atomic<bool> aborted_{false};
  std::function<void(unsigned)> on_release_;
};

// What a window's TCP Small Queues looked like, as `ss -tim` sampled at a steady period shows a
// kernel's (skmem t, pacing_rate): each flow's bytes below its socket at every sample, pooled,
// and each flow's limit and pacing rate at the window's end.
struct TsqSummary {
  uint64_t samples = 0;     // flow samples (flows x sampling instants)
  double below_p50 = 0;     // bytes below a socket, the median of the samples
  double below_p90 = 0;
  double limit = 0;         // the flows' median limit at the end (bytes)
  double pacing_rate = 0;   // the flows' median pacing rate at the end (bytes a second)
};

// Samples a ledger every `period` TSC ticks from `start` (the measured window's start).
class TsqSampler {
 public:
  TsqSampler(Tsc start, Tsc period) : next_(start), period_(std::max<Tsc>(1, period)) {}
  // Takes every sample due before `now` (the ledger as it stands: the simulation calls it
  // before each step, the real engine as its sleeps end).
  void TakeUntil(const TsqLedger& tsq, Tsc now) {
    for (; next_ < now; next_ += period_)
      for (unsigned f = 0; f < tsq.flows(); ++f) {
        ++below_[tsq.Below(f)];
        ++samples_;
      }
  }
  TsqSummary Summarise(const TsqLedger& tsq) const {
    TsqSummary s;
    s.samples = samples_;
    std::vector<std::pair<int64_t, uint64_t>> v(below_.begin(), below_.end());
    std::sort(v.begin(), v.end());
    s.below_p50 = Quantile(v, samples_, 0.5);
    s.below_p90 = Quantile(v, samples_, 0.9);
    std::vector<double> limits, rates;
    for (unsigned f = 0; f < tsq.flows(); ++f) {
      limits.push_back(static_cast<double>(tsq.Limit(f)));
      rates.push_back(tsq.PacingRate(f));
    }
    s.limit = Quantile(limits, 0.5);
    s.pacing_rate = Quantile(rates, 0.5);
    return s;
  }

 private:
  // The q-quantile by the nearest rank of `n` samples, given as (value, how often) in order.
  static double Quantile(const std::vector<std::pair<int64_t, uint64_t>>& v, uint64_t n,
                         double q) {
    if (n == 0) return 0;
    const uint64_t k = std::min(n - 1, static_cast<uint64_t>(q * static_cast<double>(n)));
    uint64_t below = 0;
    for (const auto& [value, count] : v) {
      below += count;
      if (below > k) return static_cast<double>(value);
    }
    return static_cast<double>(v.back().first);
  }
  // The q-quantile by the nearest rank (0 for no values).
  static double Quantile(std::vector<double>& v, double q) {
    if (v.empty()) return 0;
    const size_t k = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
    return v[k];
  }
  Tsc next_;
  const Tsc period_;
  // How often each number of bytes below was seen: a socket's bytes below take few values (sums
  // of its skbs' truesizes), so a long window of thousands of flows keeps a few thousand counts,
  // not a sample each (every flow every millisecond: 33 MB a second at 4096 flows).
  std::unordered_map<int64_t, uint64_t> below_;
  uint64_t samples_ = 0;
};
// How often a window samples its TSQ ledger: 1 ms (ss at 10 ms sees the same distribution; a
// finer period only gives short windows more samples).
inline constexpr double kTsqSampleS = 1e-3;

}  // namespace txbatch
