#pragma once
// TCP Small Queues (DESIGN.md "TSO and GSO"; Linux tcp_small_queue_check, 3.6 on): a TCP
// socket keeps at most `limit` bytes below it — in the qdisc and the driver's ring, not yet
// completed — and waits (TSQ_THROTTLED) until completions free its skbs (tcp_wfree) before it
// hands the stack another. The kernel's limit is min(max(2 x the skb's truesize, the pacing
// rate's 1 ms), tcp_limit_output_bytes); with no pacing modelled (a LAN's pacing rate is far
// above the wire's) it is tcp_limit_output_bytes (--tsq: 1 MiB since 5.0, 256 KiB in 4.7-4.20,
// 128 KiB in 3.6-4.6), and a flow with nothing below it always sends. Bytes are TCP payload
// bytes, the same whether a GSO frame is counted whole or as the segments it was cut into (the
// kernel counts truesize: the headers and a few hundred bytes more a skb).
//
// The ledger keeps each flow's (producer's) bytes below the socket: the producer charges a frame
// before it hands it over and gives it back if it was dropped; the driver that reclaims it after
// its completion (the emulated NIC) releases it. Thread-safe: a flow's bytes are written by its
// producer and by the completion role; a throttled producer sleeps on its flow's epoch, which a
// release bumps (seq_cst on both sides: no lost wake-up).

#include <rte_byteorder.h>
#include <rte_mbuf.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

#include "dataplane/frame.h"

namespace txbatch {

// tcp_limit_output_bytes since 5.0 (c73e5807e4f6): --tsq's default.
inline constexpr uint64_t kDefaultTsqBytes = 1 << 20;
// The largest --tsq (the kernel's sysctl is an int): 1 GiB.
inline constexpr uint64_t kMaxTsqBytes = 1 << 30;

// The flow of a frame FrameBuilder built (from the lengths it set; no parsing).
inline uint16_t FlowOf(const rte_mbuf* m) {
  const auto* h =
      rte_pktmbuf_mtod_offset(m, const TxbatchHeader*, m->l2_len + m->l3_len + m->l4_len);
  return rte_be_to_cpu_16(h->flow_be);
}

class TsqLedger {
 public:
  // `flows` producers, each allowed `limit` bytes below its socket (> 0).
  TsqLedger(unsigned flows, uint64_t limit)
      : limit_(static_cast<int64_t>(limit)), flows_(std::make_unique<Flow[]>(flows)), n_(flows) {}

  // tcp_small_queue_check for `flow`: whether it has more than the limit below it now.
  bool Throttled(unsigned flow) const { return flows_[flow].bytes.load() > limit_; }
  int64_t Below(unsigned flow) const { return flows_[flow].bytes.load(); }
  uint64_t limit() const { return static_cast<uint64_t>(limit_); }
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
      if (f.bytes.load() <= limit_) break;
      waited = true;
      f.sleeps.fetch_add(1);
      f.epoch.wait(epoch);
    }
    f.waiting.store(false);
    return waited;
  }
  // A frame of `flow` goes below the socket (before the handover), or came back unsent.
  void Charge(unsigned flow, uint32_t bytes) { flows_[flow].bytes.fetch_add(bytes); }
  void Uncharge(unsigned flow, uint32_t bytes) { Release(flow, bytes); }
  // The driver reclaimed `m` after its completion (tcp_wfree): its flow may send again.
  void Release(const rte_mbuf* m) { Release(FlowOf(m), PayloadBytes(m)); }
  void Release(unsigned flow, uint32_t bytes) {
    if (flow >= n_) return;  // not a producer's frame
    Flow& f = flows_[flow];
    f.bytes.fetch_sub(bytes);
    if (f.waiting.load()) {
      f.epoch.fetch_add(1);
      f.epoch.notify_all();
    }
    if (on_release_) on_release_(flow);
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
    std::atomic<uint32_t> epoch{0};
    std::atomic<bool> waiting{false};
    std::atomic<uint32_t> sleeps{0};
  };
  const int64_t limit_;
  std::unique_ptr<Flow[]> flows_;
  const unsigned n_;
  std::atomic<bool> aborted_{false};
  std::function<void(unsigned)> on_release_;
};

}  // namespace txbatch
