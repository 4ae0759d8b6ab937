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

}  // namespace

void RunProducer(const ProducerConfig& cfg, unsigned index, unsigned first_flow, rte_mempool* pool,
                 TxQueue& queue, const std::atomic<bool>& stop, std::span<ProducerStats> stats) {
  if (!cfg.cpus.empty()) PinTo(cfg.cpus[index % cfg.cpus.size()]);
  pthread_setname_np(pthread_self(), fmt::format("txb-prod{}", index).substr(0, 15).c_str());
  // Paced sleeps end at their deadline, not up to 50 us later (the default timer slack).
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  ProducerStats& thread_stats = stats[0];  // the thread's own counters: on its first flow's
  thread_stats.registered = rte_thread_register() == 0;
  const unsigned flows = std::max(1u, cfg.flows);
  // Each flow a socket of its own: its frames (ports, sequence) and its corked remainder. At
  // full speed a flow always has data in flight: a GSO frame short of the goal waits.
  std::vector<FrameBuilder> builders;
  std::vector<Segmenter> segmenters;
  for (unsigned k = 0; k < flows; ++k) {
    const unsigned f = first_flow + k;
    builders.emplace_back(cfg.proto, static_cast<uint16_t>(f), cfg.track_stages,
                          f < cfg.first_seq.size() ? cfg.first_seq[f] : 0);
    stats[k].next_seq.store(builders.back().next_seq());
    segmenters.emplace_back(cfg.proto, cfg.size, cfg.mtu, cfg.gso_frames,
                            /*defer=*/cfg.pps_per_producer == 0);
  }
  const unsigned mss = segmenters[0].mss();
  const double interval = cfg.pps_per_producer > 0 ? cfg.tsc_hz / cfg.pps_per_producer : 0;
  // Producers start evenly staggered within one interval.
  double next = static_cast<double>(Now()) + interval * index / std::max(1u, cfg.procs);
  unsigned cur = 0;  // the flow (of this producer's) the write in hand goes to

  // --qdisc none: this producer's own batch (its flows' frames), and when its first was buffered.
  const FlushPolicy* own = cfg.own_batches;
  Batch batch;
  Tsc first = 0;
  const auto flush = [&] {
    // Its own batch is the producer's until now: TSQ charges it as it goes below the socket.
    if (cfg.tsq != nullptr)
      for (rte_mbuf* m : batch.frames()) cfg.tsq->Charge(FlowOf(m), m);
    queue.SendBatch(batch);
    if (batch.empty()) return;
    // Refused: dropped (counted by the queue). They are the batch's tail, so each is its flow's
    // newest: their sequence numbers go back and the receiver's gaps keep meaning loss after
    // the driver.
    for (auto it = batch.frames().rbegin(); it != batch.frames().rend(); ++it)
      builders[FlowOf(*it) - first_flow].Unbuild(PayloadBytes(*it), WireFrames(*it));
    if (cfg.tsq != nullptr)
      for (rte_mbuf* m : batch.frames()) cfg.tsq->Uncharge(FlowOf(m), m);
    rte_pktmbuf_free_bulk(batch.frames().data(), batch.size());
    batch.Clear();
  };
  const auto flush_for = [&](FlushTrigger why) {
    thread_stats.flush_triggers[static_cast<size_t>(why)].Add();
    flush();
  };
  const auto maybe_flush = [&](bool write_done, Tsc now) {
    if (own == nullptr) return;
    if (const FlushTrigger why = own->Trigger(batch.size(), first, now, write_done);
        why != FlushTrigger::kNone)
      flush_for(why);
  };
  MbufStash stash(pool);
  Tsc last_now = 0;  // the stamp of the frame built last
  // Whether anything reads the clock a frame: the stamp, the pacing, a buffer's drain timer.
  const bool clock_per_frame =
      cfg.stamp || interval > 0 || (own != nullptr && own->FlushBy(0) != kNever);

  const auto send = [&](unsigned payload) {
    const unsigned flow = first_flow + cur;
    if (interval > 0) {
      while (!stop.load(std::memory_order_relaxed)) {
        const Tsc now = Now();
        if (!batch.empty() && now >= own->FlushBy(first))
          flush_for(FlushTrigger::kTimer);  // the drain timer
        double until = next;
        if (!batch.empty()) until = std::min(until, static_cast<double>(own->FlushBy(first)));
        const double ahead = (until - static_cast<double>(now)) * 1e9 / cfg.tsc_hz;
        if (ahead <= 0 && until >= next) break;
        if (ahead > 0) SleepNs(std::min(ahead, kPaceSliceNs));
      }
      // The pace is in wire frames: a GSO frame waits for as many intervals as it has segments.
      next += interval * SlicesOf(payload, mss);
    }
    // tcp_small_queue_check: with too much below the socket, wait for completions.
    if (cfg.tsq != nullptr && cfg.tsq->Throttled(flow)) {
      stats[cur].tsq_waits.Add();
      cfg.tsq->WaitForRoom(flow);
    }
    // A GSO frame takes an mbuf per slice (gso.h), all or none at once: producers that each
    // held part of a frame in a short pool would wait for each other for ever.
    const unsigned slices = SlicesOf(payload, mss);
    std::array<rte_mbuf*, kMaxGsoSegs> chain;
    const bool got = slices == 1 ? (chain[0] = stash.Take()) != nullptr
                                 : rte_pktmbuf_alloc_bulk(pool, chain.data(), slices) == 0;
    if (!got) {
      thread_stats.alloc_failures.Add();
      SleepNs(kAllocBackoffNs);
      return;
    }
    // One TSC read per frame: its stamp, the start of a batch and the policy's clock.
    const Tsc now = clock_per_frame ? Now() : 0;
    last_now = now;
    // Without timing the frame carries no stamp, even where pacing read the clock: a receiver
    // takes every frame of a --no-timing sender alike (kNoTxStamp: counted, no latency).
    rte_mbuf* const m = builders[cur].BuildSlices({chain.data(), slices}, payload, mss,
                                                  cfg.stamp ? now : kNoTxStamp);
    stats[cur].generated.Add(slices);
    if (own == nullptr) {
      if (cfg.tsq != nullptr) cfg.tsq->Charge(flow, payload, slices);
      if (!queue.Send(m, kProducerBand)) {
        builders[cur].Unbuild(payload, slices);
        if (cfg.tsq != nullptr) cfg.tsq->Uncharge(flow, payload, slices);
      }
      return;
    }
    if (batch.empty()) first = now;
    batch.Push(m);
    maybe_flush(false, now);
  };
  unsigned turn = 0;  // whose turn the next write is, of this producer's flows
  while (!stop.load(std::memory_order_relaxed)) {
    // One write a flow in turn; under TSQ, to the next socket that may send.
    cur = flows == 1 ? 0 : NextFlow(turn, flows, [&](unsigned k) {
      return cfg.tsq != nullptr && cfg.tsq->Throttled(first_flow + k);
    });
    turn = cur + 1;
    segmenters[cur].Write(send);
    // The write is done when its last frame was built: that frame's stamp is the clock.
    if (own != nullptr) maybe_flush(true, last_now);
  }
  for (cur = 0; cur < flows; ++cur) segmenters[cur].Flush(send);
  // Whatever is left goes (or is dropped) before the producer ends.
  if (own != nullptr && !batch.empty()) flush_for(FlushTrigger::kEnd);
  stash.Release();
  for (unsigned k = 0; k < flows; ++k) stats[k].next_seq.store(builders[k].next_seq());
  if (thread_stats.registered) rte_thread_unregister();
}

}  // namespace txbatch
