#pragma once
// Producers ("procs", DESIGN.md Terms): threads registered with EAL and pinned round-robin over
// the allowed CPUs, each writing `size`-byte messages of its own flows (--flows: a write each in
// turn, as one thread writing to several sockets) as fast as possible or at a paced rate, handing
// every frame to the queue (dev_queue_xmit).

#include <rte_mempool.h>

#include <atomic>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/counters.h"
#include "base/error.h"
#include "batching/flush_policy.h"
#include "dataplane/frame.h"
#include "dataplane/tsq.h"
#include "dataplane/tx_driver.h"
#include "dataplane/tx_queue.h"

namespace txbatch {

// Offered load: as fast as possible, or a rate in frames/s or in wire bit/s.
struct RateSpec {
  enum class Unit { kMax, kPps, kBits } unit = Unit::kMax;
  double value = 0;
  std::string ToString() const;  // "max", "40000pps", "500000000bit" (tc's words, base/units.h)
};
// Offered rates txbatch paces: at least 1 frame/s or 1 kbit/s (below, a window sees nothing,
// and 1e-300pps made the pacing interval infinite), at most 1000 Mpps or 10 Tbit/s (--link
// rate's ceiling), where pacing is no different from max.
inline constexpr double kMinRatePps = 1, kMaxRatePps = 1e9;
inline constexpr double kMinRateBits = 1e3, kMaxRateBits = 1e13;
Result<RateSpec> ParseRate(std::string_view text);

// Every producer sends best-effort traffic (TC_PRIO_BESTEFFORT -> band 1), as bw_tcp does.
inline constexpr int kProducerBand = 1;
// Fresh mbufs a producer takes from the pool at once (and may hold unused).
inline constexpr unsigned kProducerStash = 32;

struct ProducerConfig {
  Proto proto = Proto::kTcp;
  unsigned size = 0;
  unsigned mtu = 1500;
  unsigned procs = 1;
  // The flows each producer sends (--flows; the probe: 1), each its own FrameBuilder (source
  // port, sequence) and Segmenter (a TCP socket's corked remainder).
  unsigned flows = 1;
  double pps_per_producer = 0;  // 0 = as fast as possible
  double tsc_hz = 0;
  std::vector<int> cpus;  // pinned round-robin; empty = not pinned
  // `--qdisc none`: each producer batches its own frames as this policy says and hands them to
  // TxQueue::SendBatch; null: every frame goes through TxQueue::Send (the qdisc).
  const FlushPolicy* own_batches = nullptr;
  // Carry stage timestamps (TxMeta) for the sink's latency split: only where frames come back.
  bool track_stages = true;
  // Stamp every frame with the TSC (latency is measured from it). Off (--no-timing): frames
  // carry 0, and the clock is read only where pacing or a drain timer needs it.
  bool stamp = true;
  // --latency-sample: one frame in this many carries the stamp (LatencySampler; 1: every one).
  unsigned latency_sample = 1;
  // Flow f's first sequence number (missing: 0); a session's cells continue each flow.
  std::vector<uint64_t> first_seq;
  // TCP streams hand the stack GSO frames (--offload gso or tso, gso.h), not MSS frames.
  bool gso_frames = false;
  // TCP Small Queues (tsq.h; by flow id): each frame waits for room below its flow's socket and
  // is charged there. Null: no TSQ.
  TsqLedger* tsq = nullptr;
};

// One flow's counters, on its own cache line (producers write them on every frame). What is the
// producer thread's — registered, alloc_failures, flush_triggers — is on its first flow's.
struct alignas(64) ProducerStats {
  Counter generated;                    // wire frames: a GSO frame counts as its segments
  Counter alloc_failures;               // mbufs it could not get: never generated, not in the books
  Counter tsq_waits;                    // times TCP Small Queues throttled it (tsq.h)
  std::atomic<bool> registered{false};  // got an EAL lcore id (and so a mempool cache)
  // The sequence number its flow would have used next when it stopped: frames below it entered
  // the stack, so a receiver missing the last of them knows they were lost.
  std::atomic<uint64_t> next_seq{0};  // (its first, if it never built a frame)
  // --qdisc none: why its batches went to the driver, by FlushTrigger.
  std::array<Counter, kFlushTriggers> flush_triggers;
};

// Runs producer `index`, sending flows first_flow .. first_flow + cfg.flows - 1 (stats: theirs,
// cfg.flows of them), until `stop`, then flushes their corked TCP remainders and returns. Paced
// sleeps end early on `stop`, so a producer returns promptly unless it is blocked in Send (see
// TxQueue::Abort).
void RunProducer(const ProducerConfig& cfg, unsigned index, unsigned first_flow, rte_mempool* pool,
                 TxQueue& queue, const std::atomic<bool>& stop, std::span<ProducerStats> stats);

// Of a producer's `flows` flows, the one its next write goes to: from `next` on (its turn),
// the first that `throttled(f)` (f from 0) does not hold back; `next` where every one is
// throttled (the write waits for that one, as a blocking write to the next socket would).
template <typename Throttled>
unsigned NextFlow(unsigned next, unsigned flows, Throttled&& throttled) {
  for (unsigned k = 0; k < flows; ++k) {
    const unsigned f = (next + k) % flows;
    if (!throttled(f)) return f;
  }
  return next % flows;
}

// Mean bytes on `wire` per frame of the frame mix `proto`/`size`/`mtu` produces (to turn bit/s
// into frames/s): TCP sends full-MSS segments whatever the write size.
double MeanWireBytes(Proto proto, unsigned size, unsigned mtu, const WireSpec& wire);

// The producer -> CPU mapping and the txirq's CPUs, for the run header.
std::string DescribePinning(unsigned procs, const std::vector<int>& cpus);

// Sleeps `ns` (nothing if <= 0). Control and pacing only, never to wait for another thread.
void SleepNs(double ns);

}  // namespace txbatch
