// The simulated producers' steps (simulation.h): a write's frames built, each enqueued (or
// batched under --qdisc none), TCP Small Queues and the pool honoured as RunProducer does.
#include <array>

#include "batching/batch.h"
#include "dataplane/frame.h"
#include "dataplane/gso.h"
#include "dataplane/producer.h"
#include "dataplane/tsq.h"
#include "engine/simulation.h"

namespace txbatch::sim_detail {

bool Simulation::NextWrite(SimActor& p) {
  p.write.clear();
  p.next_frame = 0;
  const FlowRange own = ProducerFlows(cfg_, p.index);
  if (p.finishing) {
    // As RunProducer: each flow's corked TCP remainder goes, then the producer ends.
    for (; p.turn < own.count && p.write.empty(); ++p.turn) {
      p.flow = own.first + p.turn;
      segmenters_[p.flow].Flush([&](unsigned payload) { p.write.push_back(payload); });
    }
    return !p.write.empty();
  }
  const bool tsq = tsq_ && !IsProbe(p);
  const unsigned k = NextFlow(p.turn, own.count, [&](unsigned f) {
    return tsq && tsq_->Throttled(own.first + f);
  });
  p.flow = own.first + k;
  p.turn = k + 1;
  cpu_.Work(p, c_.write);
  segmenters_[p.flow].Write([&](unsigned payload) { p.write.push_back(payload); });
  return true;
}

void Simulation::Build(SimActor& p) {
  if (p.next_frame == p.write.size()) {
    if (p.finishing) {
      if (!NextWrite(p)) return Finish(p);
    } else if (p.t >= stop_at_) {
      p.finishing = true;
      p.turn = 0;
      if (!NextWrite(p)) return Finish(p);
    } else {
      NextWrite(p);
      if (p.write.empty()) return;  // corked: the next write completes a segment
    }
  }
  const double interval = Interval(p);
  if (interval > 0 && !p.finishing) {
    // Paced: sleep to the next frame's time, or to the own batch's drain timer if sooner.
    const Tsc next = static_cast<Tsc>(p.next_pace);
    const Tsc by = p.own.empty() ? kNever : policy_->FlushBy(p.own_first);
    if (by <= p.t) return FlushOwn(p, FlushTrigger::kTimer);
    if (next > p.t) {
      p.t = p.timer = std::min(next, by);  // nanosleep
      return;
    }
  }
  // tcp_small_queue_check: with too much below the socket, sleep until a release.
  const bool tsq = tsq_ && !IsProbe(p);
  if (tsq && tsq_->Throttled(p.flow)) {
    if (!p.tsq_throttled) stats_[p.flow].tsq_waits.Add();
    p.tsq_throttled = true;
    p.t = kNever;
    return;
  }
  p.tsq_throttled = false;
  const unsigned payload = p.write[p.next_frame];
  const unsigned mss = segmenters_[p.flow].mss();
  // A GSO frame takes an mbuf per slice and a pace interval per segment (RunProducer's).
  const unsigned slices = SlicesOf(payload, mss);
  if (interval > 0 && !p.finishing) p.next_pace += interval * slices;
  ++p.next_frame;
  std::array<rte_mbuf*, kMaxGsoSegs> chain;
  if (rte_pktmbuf_alloc_bulk(pool_, chain.data(), slices) != 0) {
    // The pool is empty (--pool-size): back off as the real producer does, asleep.
    stats_[ProducerFlows(cfg_, p.index).first].alloc_failures.Add();  // the thread's
    p.t += static_cast<Tsc>(kAllocBackoffS * tsc_hz_);
    p.timer = p.t;  // nanosleep
    return;
  }
  // An mbuf whose lines another CPU has comes through the pool's shared stack (`recycle`).
  cpu_.Work(p, c_.frame * slices + c_.recycle * pool_cpus_.Reused(slices, p.cpu));
  // Out of the --latency-sample sample: no stamp (the cost model's frame cost stays the one
  // calibrate measured, with a clock read a frame).
  rte_mbuf* const m = builders_[p.flow].BuildSlices({chain.data(), slices}, payload, mss,
                                                    p.sampler.Next() ? p.t : kNoTxStamp);
  pool_cpus_.Built(m);
  stats_[p.flow].generated.Add(slices);
  if (tsq && !cfg_.shape.noqueue) tsq_->Charge(p.flow, payload, slices);  // own batch: at FlushOwn
  p.held = m;
  p.held_payload = payload;
  p.held_waited = false;
  p.step = SimStep::kEnqueue;
}

void Simulation::Enqueue(SimActor& p) {
  SimQueue& q = *p.q;
  rte_mbuf* m = p.held;
  const bool write_done = p.next_frame == p.write.size();
  if (cfg_.shape.noqueue) {
    p.held = nullptr;
    p.step = SimStep::kBuild;
    if (p.own.empty()) p.own_first = p.t;
    p.own.Push(m);
    const FlushTrigger why = policy_->Trigger(p.own.size(), p.own_first, p.t, write_done);
    if (why != FlushTrigger::kNone) FlushOwn(p, why);
    return;
  }
  const SimStep step = p.step;
  p.step = SimStep::kBuild;  // or the run the enqueue begins
  const SimQueue::Put put = q.Enqueue(p, m, kProducerBand, p.held_waited);
  if (put == SimQueue::Put::kRetry) {
    p.step = step;  // the root lock was held: the same step again, when Acquire says
    return;
  }
  if (put == SimQueue::Put::kDone) {
    p.held = nullptr;
    return;
  }
  // The band was full: a datagram was dropped (counted), a stream producer blocks until a run
  // frees room (the probe's too, on a queue of stream producers: block_when_full).
  if (put == SimQueue::Put::kDropped) {
    if (tsq_ && !IsProbe(p)) tsq_->Uncharge(p.flow, p.held_payload, WireFrames(m));
    builders_[p.flow].Unbuild(p.held_payload, WireFrames(m));
    rte_pktmbuf_free(m);
    p.held = nullptr;
    return;
  }
  p.held_waited = true;
  q.Block(p);
}

void Simulation::Finish(SimActor& p) {
  if (!p.own.empty()) {
    FlushOwn(p, FlushTrigger::kEnd);
    if (p.step == SimStep::kFlush) return;  // the TX lock was held: again after the flush
  }
  const FlowRange own = ProducerFlows(cfg_, p.index);
  for (unsigned f = own.first; f < own.first + own.count; ++f)
    stats_[f].next_seq.store(builders_[f].next_seq());
  p.step = SimStep::kDone;
  p.t = kNever;
  --producers_left_;
}

void Simulation::FlushOwn(SimActor& p, FlushTrigger why) {
  // Its own batch goes below the socket now (RunProducer's; the probe has no TSQ).
  const bool tsq = tsq_ && !IsProbe(p);
  if (tsq)
    for (rte_mbuf* m : p.own.frames()) tsq_->Charge(FlowOf(m), m);
  if (!p.q->SendBatch(p, p.own)) {
    // The batch was cut into segments (the flush again at once), or the TX lock was held
    // (the flush again when Acquire says): nothing went. Not a driver call: a release its
    // uncharge makes is at the end of this step's CPU time, not at the driver's last clock
    // (another actor's, later: a producer running on past a GSO cut was moved on to it).
    clock_.now = p.ran_to;
    if (tsq)
      for (rte_mbuf* m : p.own.frames()) tsq_->Uncharge(FlowOf(m), m);
    p.flush_why = why;
    p.step = SimStep::kFlush;
    return;
  }
  if (p.step == SimStep::kFlush) p.step = SimStep::kBuild;
  stats_[ProducerFlows(cfg_, p.index).first].flush_triggers[static_cast<size_t>(why)].Add();
  // Refused (Linux drops what a device without a queue refuses): their numbers go back (the
  // batch's tail: each its flow's newest).
  for (auto it = p.own.frames().rbegin(); it != p.own.frames().rend(); ++it)
    builders_[FlowOf(*it)].Unbuild(PayloadBytes(*it), WireFrames(*it));
  if (tsq)
    for (rte_mbuf* m : p.own.frames()) tsq_->Uncharge(FlowOf(m), m);
  if (!p.own.empty()) rte_pktmbuf_free_bulk(p.own.frames().data(), p.own.size());
  p.own.Clear();
}

}  // namespace txbatch::sim_detail
