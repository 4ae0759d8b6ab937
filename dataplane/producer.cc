#include "dataplane/producer.h"

#include <fmt/format.h>
#include <pthread.h>
#include <rte_lcore.h>
#include <sys/prctl.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>

#include "base/units.h"
#include "dataplane/gso.h"
#include "dataplane/workload.h"

namespace txbatch {
namespace {

// Longest single sleep while pacing, so a stop request is seen within this.
constexpr double kPaceSliceNs = 10e6;
// Back-off after a failed mbuf allocation (the pool is momentarily empty).
constexpr double kAllocBackoffNs = 20e3;

void PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

}  // namespace

void SleepNs(double ns) {
  if (ns <= 0) return;
  timespec ts{static_cast<time_t>(ns / 1e9), static_cast<long>(std::fmod(ns, 1e9))};
  nanosleep(&ts, nullptr);
}

std::string RateSpec::ToString() const {
  switch (unit) {
    case Unit::kMax:
      return "max";
    case Unit::kPps:
      return fmt::format("{}pps", value);
    case Unit::kBits:
      return fmt::format("{}bit", value);  // until 2026-12-05 "bps" (bits): ParseRecordRate
  }
  return "max";
}

Result<RateSpec> ParseRate(std::string_view text) {
  const auto bad = [&] {
    return MakeError(EINVAL,
                     fmt::format("rate '{}' is not valid; valid: max, or frames/s, {} ({:g}pps.."
                                 "{:g}mpps), or wire bits/s, {} ({:g}kbit..{:g}gbit)",
                                 text, kPacketRateUnitsSentence, kMinRatePps, kMaxRatePps / 1e6,
                                 kBitRateUnitsSentence, kMinRateBits / 1e3, kMaxRateBits / 1e9));
  };
  std::string word(text);
  std::transform(word.begin(), word.end(), word.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (word == "max") return RateSpec{};  // case-insensitive, as the units
  const bool pps = IsPacketRateWord(text);
  auto rate = pps ? ParsePacketRate("rate", text) : ParseBitRate("rate", text, false);
  if (!rate || *rate < (pps ? kMinRatePps : kMinRateBits) ||
      *rate > (pps ? kMaxRatePps : kMaxRateBits))
    return bad();
  return RateSpec{pps ? RateSpec::Unit::kPps : RateSpec::Unit::kBits, *rate};
}

double MeanWireBytes(Proto proto, unsigned size, unsigned mtu, const WireSpec& wire) {
  if (proto == Proto::kTcp) return wire.WireBytes(FrameBytes(proto, MaxPayload(proto, mtu)));
  Segmenter seg(proto, size, mtu);
  double bytes = 0, frames = 0;
  seg.Write([&](unsigned payload) {
    bytes += wire.WireBytes(FrameBytes(proto, payload));
    frames += 1;
  });
  return bytes / frames;
}

std::string DescribePinning(unsigned procs, const std::vector<int>& cpus) {
  std::string s;
  for (unsigned i = 0; i < procs; ++i)
    s += fmt::format("{}proc{}->cpu{}", i ? " " : "", i, cpus.empty() ? -1 : cpus[i % cpus.size()]);
  s += fmt::format("; txirq on cpus {} at SCHED_FIFO 1 where permitted", fmt::join(cpus, ","));
  if (procs > cpus.size())
    s += fmt::format(" ({} producers on {} CPUs: involuntary context switches are reported)", procs,
                     cpus.size());
  return s;
}

namespace {

// Fresh mbufs taken from the pool kStashFrames at a time (one cache access per refill, as
// testpmd's txonly allocates a burst), handed out one by one. Unused ones go back at the end.
class MbufStash {
 public:
  explicit MbufStash(rte_mempool* pool) : pool_(pool) {}
  ~MbufStash() { Release(); }
  MbufStash(const MbufStash&) = delete;
  MbufStash& operator=(const MbufStash&) = delete;

  // A reset mbuf, or null when the pool is empty.
  rte_mbuf* Take() {
    if (next_ == count_) {
      next_ = count_ = 0;
      // All or nothing: near exhaustion, fall back to one at a time.
      if (rte_pktmbuf_alloc_bulk(pool_, frames_.data(), kStashFrames) != 0)
        return rte_pktmbuf_alloc(pool_);
      count_ = kStashFrames;
    }
    return frames_[next_++];
  }
  void Release() {
    if (next_ < count_) rte_pktmbuf_free_bulk(frames_.data() + next_, count_ - next_);
    next_ = count_ = 0;
  }

 private:
  static constexpr unsigned kStashFrames = kProducerStash;
  rte_mempool* pool_;
  std::array<rte_mbuf*, kStashFrames> frames_{};
  unsigned next_ = 0, count_ = 0;
};

// One producer thread's writes: each of its flows a socket of its own (its frames' ports and
// sequence, its corked remainder), its pace, and under --qdisc none its own batch.
class Producer {
 public:
  Producer(const ProducerConfig& cfg, unsigned index, unsigned first_flow, rte_mempool* pool,
           TxQueue& queue, const std::atomic<bool>& stop, std::span<ProducerStats> stats)
      : cfg_(cfg),
        first_flow_(first_flow),
        pool_(pool),
        queue_(queue),
        stop_(stop),
        stats_(stats),
        thread_stats_(stats[0]),
        flows_(std::max(1u, cfg.flows)),
        interval_(cfg.pps_per_producer > 0 ? cfg.tsc_hz / cfg.pps_per_producer : 0),
        own_(cfg.own_batches),
        stash_(pool),
        sampler_(cfg.stamp ? cfg.latency_sample : 1),
        clock_per_frame_((cfg.stamp && cfg.latency_sample <= 1) || interval_ > 0 ||
                         (own_ != nullptr && own_->FlushBy(0) != kNever)) {
    // At full speed a flow always has data in flight: a GSO frame short of the goal waits.
    for (unsigned k = 0; k < flows_; ++k) {
      const unsigned f = first_flow + k;
      builders_.emplace_back(cfg.proto, static_cast<uint16_t>(f), cfg.track_stages,
                             f < cfg.first_seq.size() ? cfg.first_seq[f] : 0);
      stats[k].next_seq.store(builders_.back().next_seq());
      segmenters_.emplace_back(cfg.proto, cfg.size, cfg.mtu, cfg.gso_frames,
                               /*defer=*/cfg.pps_per_producer == 0);
    }
    mss_ = segmenters_[0].mss();
    // Producers start evenly staggered within one interval.
    next_ = static_cast<double>(Now()) + interval_ * index / std::max(1u, cfg.procs);
  }

  // Writes until `stop`, one write a flow in turn; then the corked remainders and what is left
  // of its own batch go (or are dropped) before the producer ends.
  void Run() {
    const auto send = [this](unsigned payload) { Send(payload); };
    unsigned turn = 0;  // whose turn the next write is, of this producer's flows
    if (const unsigned payload = BurstPayload(); payload > 0) RunBursts(payload);
    while (!stop_.load(std::memory_order_relaxed)) {
      // Under TSQ, to the next socket that may send.
      cur_ = flows_ == 1 ? 0 : NextFlow(turn, flows_, [&](unsigned k) {
        return cfg_.tsq != nullptr && cfg_.tsq->Throttled(first_flow_ + k);
      });
      turn = cur_ + 1;
      segmenters_[cur_].Write(send);
      // The write is done when its last frame was built: that frame's stamp is the clock.
      if (own_ != nullptr) MaybeFlush(true, last_now_);
    }
    for (cur_ = 0; cur_ < flows_; ++cur_) segmenters_[cur_].Flush(send);
    if (own_ != nullptr && !batch_.empty()) FlushFor(FlushTrigger::kEnd);
    stash_.Release();
    for (unsigned k = 0; k < flows_; ++k) stats_[k].next_seq.store(builders_[k].next_seq());
  }

 private:
  // Waits for the frame's turn at the pace (in wire frames: a GSO frame waits for as many
  // intervals as it has segments), firing its own batch's drain timer meanwhile.
  void Pace(unsigned payload) {
    while (!stop_.load(std::memory_order_relaxed)) {
      const Tsc now = Now();
      if (!batch_.empty() && now >= own_->FlushBy(first_))
        FlushFor(FlushTrigger::kTimer);  // the drain timer
      double until = next_;
      if (!batch_.empty()) until = std::min(until, static_cast<double>(own_->FlushBy(first_)));
      const double ahead = (until - static_cast<double>(now)) * 1e9 / cfg_.tsc_hz;
      if (ahead <= 0 && until >= next_) break;
      if (ahead > 0) SleepNs(std::min(ahead, kPaceSliceNs));
    }
    next_ += interval_ * SlicesOf(payload, mss_);
  }

  // One frame of the write in hand, to flow cur_: paced, past TSQ, built and sent (or batched).
  void Send(unsigned payload) {
    const unsigned flow = first_flow_ + cur_;
    if (interval_ > 0) Pace(payload);
    // tcp_small_queue_check: with too much below the socket, wait for completions.
    if (cfg_.tsq != nullptr && cfg_.tsq->Throttled(flow)) {
      stats_[cur_].tsq_waits.Add();
      cfg_.tsq->WaitForRoom(flow);
    }
    // A GSO frame takes an mbuf per slice (gso.h), all or none at once: producers that each
    // held part of a frame in a short pool would wait for each other for ever.
    const unsigned slices = SlicesOf(payload, mss_);
    std::array<rte_mbuf*, kMaxGsoSegs> chain;
    const bool got = slices == 1 ? (chain[0] = stash_.Take()) != nullptr
                                 : rte_pktmbuf_alloc_bulk(pool_, chain.data(), slices) == 0;
    if (!got) {
      thread_stats_.alloc_failures.Add();
      SleepNs(kAllocBackoffNs);
      return;
    }
    // One TSC read per frame: its stamp, the start of a batch and the policy's clock; with
    // --latency-sample, for a frame of the sample alone where nothing else needs the clock.
    const bool stamped = cfg_.stamp && sampler_.Next();
    const Tsc now = clock_per_frame_ || stamped ? Now() : 0;
    last_now_ = now;
    // Without timing (or out of the sample) the frame carries no stamp, even where pacing read
    // the clock: a receiver takes such frames alike (kNoTxStamp: counted, no latency).
    rte_mbuf* const m = builders_[cur_].BuildSlices({chain.data(), slices}, payload, mss_,
                                                    stamped ? now : kNoTxStamp);
    stats_[cur_].generated.Add(slices);
    if (own_ == nullptr) {
      if (cfg_.tsq != nullptr) cfg_.tsq->Charge(flow, payload, slices);
      if (!queue_.Send(m, kProducerBand)) {
        builders_[cur_].Unbuild(payload, slices);
        if (cfg_.tsq != nullptr) cfg_.tsq->Uncharge(flow, payload, slices);
      }
      return;
    }
    if (batch_.empty()) first_ = now;
    batch_.Push(m);
    MaybeFlush(false, now);
  }

  // The payload of every frame where the producer may build its own batch whole, write after
  // write (RunBursts); 0 where anything may come between two frames. That needs: its own
  // batches (--qdisc none) under a policy that waits for them to fill and has no drain timer
  // (buffer:N), no pace, no TCP Small Queues, and writes of one frame each (datagrams within
  // one MSS).
  unsigned BurstPayload() const {
    if (own_ == nullptr || own_->Trigger(1, 0, 0, true) != FlushTrigger::kNone ||
        own_->FlushBy(0) != kNever || interval_ > 0 || cfg_.tsq != nullptr ||
        cfg_.proto != Proto::kUdp || cfg_.size > mss_ || cfg_.size == 0)
      return 0;
    return cfg_.size;
  }

  // What Run's writes come to where BurstPayload says nothing comes between frames: the writes
  // that fill the batch, one frame each, each flow in turn, built in one loop (as testpmd's
  // txonly builds a burst), then the batch to the driver — the same frames, stamps, counts,
  // flushes and stop. Leaves on `stop`, what it built since the last flush in its batch.
  void RunBursts(unsigned payload) {
    const unsigned cap = own_->spec().frames;
    // Read once: the frame's bytes are written through char pointers, which may alias any
    // member, so a member read each frame is a load after each frame's stores.
    const bool stamp = cfg_.stamp, clock_per_frame = clock_per_frame_;
    while (!stop_.load(std::memory_order_relaxed)) {
      LatencySampler sampler = sampler_;  // kept in registers for the batch
      unsigned built = 0;  // one flow's frames, counted once a batch (a store a frame less)
      // The stop is seen before each write, as Run's loop sees it: what is built then goes
      // as the end's batch.
      for (unsigned k = batch_.size(); k < cap && !stop_.load(std::memory_order_relaxed); ++k) {
        rte_mbuf* const m = stash_.Take();
        if (m == nullptr) {  // the write is lost, and the next goes to the next flow
          thread_stats_.alloc_failures.Add();
          cur_ = cur_ + 1 == flows_ ? 0 : cur_ + 1;
          SleepNs(kAllocBackoffNs);
          break;
        }
        const bool stamped = stamp && sampler.Next();
        const Tsc now = clock_per_frame || stamped ? Now() : 0;
        builders_[cur_].Build(m, payload, stamped ? now : kNoTxStamp);
        batch_.Push(m);
        if (flows_ == 1) {
          ++built;
        } else {
          stats_[cur_].generated.Add();
          cur_ = cur_ + 1 == flows_ ? 0 : cur_ + 1;
        }
      }
      sampler_ = sampler;
      if (built > 0) stats_[0].generated.Add(built);
      if (batch_.size() >= cap) FlushFor(FlushTrigger::kFull);
    }
  }

  // --qdisc none: its own batch to the driver.
  void Flush() {
    // Its own batch is the producer's until now: TSQ charges it as it goes below the socket.
    if (cfg_.tsq != nullptr)
      for (rte_mbuf* m : batch_.frames()) cfg_.tsq->Charge(FlowOf(m), m);
    queue_.SendBatch(batch_);
    if (batch_.empty()) return;
    // Refused: dropped (counted by the queue). They are the batch's tail, so each is its flow's
    // newest: their sequence numbers go back and the receiver's gaps keep meaning loss after
    // the driver.
    for (auto it = batch_.frames().rbegin(); it != batch_.frames().rend(); ++it)
      builders_[FlowOf(*it) - first_flow_].Unbuild(PayloadBytes(*it), WireFrames(*it));
    if (cfg_.tsq != nullptr)
      for (rte_mbuf* m : batch_.frames()) cfg_.tsq->Uncharge(FlowOf(m), m);
    rte_pktmbuf_free_bulk(batch_.frames().data(), batch_.size());
    batch_.Clear();
  }
  void FlushFor(FlushTrigger why) {
    thread_stats_.flush_triggers[static_cast<size_t>(why)].Add();
    Flush();
  }
  void MaybeFlush(bool write_done, Tsc now) {
    if (own_ == nullptr) return;
    if (const FlushTrigger why = own_->Trigger(batch_.size(), first_, now, write_done);
        why != FlushTrigger::kNone)
      FlushFor(why);
  }

  const ProducerConfig& cfg_;
  const unsigned first_flow_;
  rte_mempool* const pool_;
  TxQueue& queue_;
  const std::atomic<bool>& stop_;
  const std::span<ProducerStats> stats_;
  ProducerStats& thread_stats_;  // the thread's own counters: on its first flow's
  const unsigned flows_;
  const double interval_;      // TSC between frames at the pace; 0: flat out
  const FlushPolicy* const own_;  // --qdisc none: the producer's own batching policy
  std::vector<FrameBuilder> builders_;
  std::vector<Segmenter> segmenters_;
  unsigned mss_ = 0;
  double next_ = 0;      // when the next frame is due at the pace
  unsigned cur_ = 0;     // the flow (of this producer's) the write in hand goes to
  Batch batch_;          // --qdisc none: its own batch, and when its first was buffered
  Tsc first_ = 0;
  MbufStash stash_;
  Tsc last_now_ = 0;     // the stamp of the frame built last
  LatencySampler sampler_;  // which frames carry a stamp (--latency-sample)
  // Whether anything reads the clock every frame: the stamp of each, the pacing, a buffer's
  // drain timer.
  const bool clock_per_frame_;
};

}  // namespace

void RunProducer(const ProducerConfig& cfg, unsigned index, unsigned first_flow, rte_mempool* pool,
                 TxQueue& queue, const std::atomic<bool>& stop, std::span<ProducerStats> stats) {
  if (!cfg.cpus.empty()) PinTo(cfg.cpus[index % cfg.cpus.size()]);
  pthread_setname_np(pthread_self(), fmt::format("txb-prod{}", index).substr(0, 15).c_str());
  // Paced sleeps end at their deadline, not up to 50 us later (the default timer slack).
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  ProducerStats& thread_stats = stats[0];  // the thread's own counters: on its first flow's
  thread_stats.registered = rte_thread_register() == 0;
  Producer(cfg, index, first_flow, pool, queue, stop, stats).Run();
  if (thread_stats.registered) rte_thread_unregister();
}

}  // namespace txbatch
