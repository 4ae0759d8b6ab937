#pragma once
// fq_codel, the qdisc a 2025 Linux box runs: Debian's kernels are built with
// CONFIG_DEFAULT_NET_SCH="fq_codel" (the VM lab's 6.1 among them) and systemd sets
// net.core.default_qdisc = fq_codel on most others. Linux net/sched/sch_fq_codel.c with
// include/net/codel_impl.h (6.x), step for step:
// * fq_codel_classify: a frame's flow hash (its IPv4 addresses, protocol and ports, jhash with a
//   fixed seed where the kernel draws skb_get_hash's at boot) scaled into `flows` buckets
//   (reciprocal_scale); a bucket is a FIFO with its own CoDel state.
// * fq_codel_enqueue: the frame joins its bucket's tail, stamped with its enqueue time; an
//   empty bucket not on a list joins new_flows with a deficit of `quantum` (new_flow_count).
//   Over `limit` frames (the requeued ones included, as q.qlen) or `memory_limit` bytes of
//   truesize afterwards, fq_codel_drop drops from the head of the fattest bucket (most bytes)
//   until half its bytes went, at most `drop_batch` frames, and adds them to its CoDel count.
//   The frame itself is never refused: fq_codel makes room instead (band_full is always false).
// * fq_codel_dequeue: DRR over new_flows, then old_flows; a bucket whose deficit is spent gets
//   `quantum` more and goes to old_flows' tail; codel_dequeue takes its head, and a bucket left
//   empty goes to old_flows once from new_flows (so a new flow cannot starve the old ones) or
//   off the lists.
// * codel_dequeue: a head that waited `target` or more, with more than one MTU queued in the
//   whole qdisc, for `interval` starts the dropping state: that frame dropped (or, ECN-capable,
//   marked CE), the next drop at interval / sqrt(count) after the last (the control law, whose
//   1/sqrt comes from one Newton step per drop, as the kernel's: count 2 gives 0.5, not 0.707).
//   Re-entering soon after it left, it starts from the count it had reached.
// Times are CoDel's: ns >> 10 (codel_time_t), 32 bits compared with wrap-around. Not modelled:
// ce_threshold, an external classifier (tc filter), priority-to-flow mapping.
// Root-locked (fq_codel is not TCQ_F_NOLOCK) with the empty-qdisc bypass (TCQ_F_CAN_BYPASS for
// limit >= 1). Not thread-safe: called under the queue's root lock.

#include <rte_mbuf.h>

#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/tsc.h"
#include "batching/batch.h"
#include "batching/flush_policy.h"
#include "dataplane/qdisc.h"

namespace txbatch {

// fq_codel's parameters, as tc names them; defaults are fq_codel_init's.
struct FqCodelParams {
  uint32_t target_us = 5000;       // CoDel's target (codel_params_init: 5 ms)
  uint32_t interval_us = 100000;   // CoDel's interval (100 ms)
  uint32_t limit = 10240;          // frames (sch->limit = 10 * 1024)
  uint32_t memory_limit = 32u << 20;  // bytes of truesize (32 MB)
  uint32_t flows = 1024;           // buckets (flows_cnt)
  uint32_t quantum = 0;            // bytes a DRR round; 0: psched_mtu (the device's MTU + 14)
  uint32_t drop_batch = 64;        // drop_batch_size
  bool ecn = true;                 // fq_codel_init sets it: mark ECN-capable frames, not drop
  bool operator==(const FqCodelParams&) const = default;
};

// Ranges the kernel accepts (fq_codel_change): flows 1..65536, quantum up to
// FQ_CODEL_QUANTUM_MAX (1 << 20; 256 at least), memory_limit up to 1 << 31 (the kernel clamps
// there; refused here); the rest within u32, target and interval at least one CoDel unit.
inline constexpr uint32_t kMaxFqCodelFlows = 65536;
inline constexpr uint32_t kMaxFqCodelQuantum = 1u << 20;
inline constexpr uint32_t kMaxFqCodelMemoryLimit = 1u << 31;

// Parses tc's words after "fq_codel" ("target 5ms interval 100ms limit 10240 quantum 1514 ecn
// flows 1024 memory_limit 32Mb drop_batch 64 noecn"): times as tc's get_time (s, ms, us; a bare
// number is us), sizes as its get_size (b, k/kb, m/mb, g/gb: powers of 1024). On bad words
// returns nothing and `*error` is one sentence.
std::optional<FqCodelParams> ParseFqCodel(std::string_view words, std::string* error);
// The words ParseFqCodel reads back to `p` ("limit 10240p flows 1024 quantum 1514 target 5ms
// interval 100ms memory_limit 32Mb ecn drop_batch 64", as `tc qdisc show` prints them; quantum
// omitted while it is the device's).
std::string DescribeFqCodel(const FqCodelParams& p);
// The parameters of `p` that are not the defaults, in tc's words and parentheses ("(target 1ms
// limit 1000p)"); empty for the defaults: what tells two fq_codel shapes apart in a table.
std::string FqCodelChanges(const FqCodelParams& p);

class FqCodel final : public Qdisc {
 public:
  // `psched_mtu`: the device's MTU plus its link header (the default quantum and CoDel's
  // `mtu`); `counters`: where its drops and marks are counted (the queue's).
  FqCodel(const FqCodelParams& params, unsigned psched_mtu, double tsc_hz,
          QdiscCounters& counters);

  [[nodiscard]] bool Enqueue(rte_mbuf* m, int band, Tsc now) override;
  uint16_t DequeueBulk(Batch& batch, const DequeueBudget& budget, Tsc now) override;
  void Requeue(std::span<rte_mbuf* const> frames, bool as_list) override;
  bool band_full(int /*band*/) const override { return false; }
  unsigned Purge() override;

  // The bucket `m` hashes to (0..flows-1).
  uint32_t Classify(const rte_mbuf* m) const;
  // tc -s's new_flows_len and old_flows_len, and memory_usage.
  unsigned new_flows_len() const { return static_cast<unsigned>(new_flows_.size()); }
  unsigned old_flows_len() const { return static_cast<unsigned>(old_flows_.size()); }
  uint32_t memory_usage() const { return memory_usage_; }
  uint32_t quantum() const { return quantum_; }
  // CoDel's time of a TSC reading (ns >> 10).
  uint32_t CodelTime(Tsc t) const;

 private:
  struct Entry {
    rte_mbuf* m;
    uint32_t enqueued;  // CoDel time
    uint32_t len;       // qdisc_pkt_len: a GSO frame's bytes with its segments' headers
    uint32_t mem;       // truesize
  };
  struct CodelVars {  // struct codel_vars
    uint32_t count = 0;
    uint32_t lastcount = 0;
    bool dropping = false;
    uint16_t rec_inv_sqrt = 0;
    uint32_t first_above_time = 0;
    uint32_t drop_next = 0;
    uint32_t ldelay = 0;
  };
  struct Flow {
    std::vector<Entry> ring;  // power-of-two ring, grown on demand
    uint32_t head = 0, n = 0;
    int32_t deficit = 0;
    bool listed = false;  // on new_flows or old_flows
    CodelVars cv;
    void Push(const Entry& e);
    Entry Pop();
  };

  // dequeue_func: the head of `f`, or nothing (the bookkeeping of a frame leaving the qdisc).
  std::optional<Entry> TakeHead(uint32_t idx);
  // codel_should_drop.
  bool ShouldDrop(const Entry* e, CodelVars& v, uint32_t now);
  // codel_dequeue for bucket `idx`: the frame to send, or nothing with the bucket emptied.
  std::optional<Entry> CodelDequeue(uint32_t idx, uint32_t now);
  // fq_codel_dequeue: the next frame, or null.
  rte_mbuf* DequeueOne(uint32_t now);
  // fq_codel_drop: returns the wire frames it dropped.
  uint64_t DropFattest();
  // drop_func: frees `e`'s frame, counting it in `counter` (and giving TSQ its bytes back).
  void Drop(const Entry& e, Counter& counter);
  // INET_ECN_set_ce: whether `m` is ECN-capable (then marked CE).
  static bool MarkCe(rte_mbuf* m);

  const FqCodelParams params_;
  const uint32_t quantum_;
  const uint32_t mtu_;       // cparams.mtu
  const uint32_t target_;    // CoDel time
  const uint32_t interval_;  // CoDel time
  const double ns_per_tsc_;
  QdiscCounters& counters_;
  std::vector<Flow> flows_;
  std::vector<uint32_t> backlogs_;  // bytes per bucket
  std::deque<uint32_t> new_flows_, old_flows_;
  uint64_t bytes_ = 0;  // sch->qstats.backlog: every queued frame's len, requeued ones included
  uint32_t memory_usage_ = 0;
};

}  // namespace txbatch
