// The batching policies as the runner applies them, on a scripted driver and a virtual clock:
// the test decides when the ring has room and what completes (it plays the txirq through the
// queue's completion step; no thread runs), and reads back every driver call — how many frames
// each handover carried, which were marked xmit_more, how many doorbells rang.
//
// Every case runs on the three places a qdisc is run (QdiscRun, dataplane/qdisc_run.h): the
// root-locked queue, the lock-free queue (--sync nolock) and the simulation's queue
// (engine/sim_queue.h, stepped by its actors), root-locked and lock-free. A pfifo case runs
// root-locked on the nolock rows too, as txbatch runs it (MakeTxQueue: tc's pfifo has no
// TCQ_F_NOLOCK here).
//
// The kernel traces (the cases that cite a function and a version) were worked by hand from the
// kernel's source: net/sched/sch_generic.c (dequeue_skb, try_bulk_dequeue_skb, sch_direct_xmit,
// dev_requeue_skb, __qdisc_run), net/core/dev.c (__dev_xmit_skb, dev_hard_start_xmit) and
// include/net/sch_generic.h (qdisc_run_begin/end) of 3.18 for linux-2014 and of 6.9 with
// upstream 0345552a653c ("net_sched: limit try_bulk_dequeue_skb() batches") for linux-2025.
// A Rig runs without the empty-qdisc bypass unless a case asks for it: its traces are the
// kernel's when the qdisc was not empty and idle at the first enqueue (with the bypass, the
// first frame into a stopped queue goes alone at the wake: the bypass cases show that). A
// linux-2014 trace of a pinned BQL limit starts from a primed rig (Rig::PrimeBql): 3.18's BQL
// starts at 0 whatever limit_min says, until a completion clamps it.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "batching/flush_policy.h"
#include "dataplane/fq_codel.h"
#include "dataplane/frame.h"
#include "dataplane/gso.h"
#include "dataplane/make_queue.h"
#include "dataplane/netdev_queue.h"
#include "dataplane/qdisc_run.h"
#include "dataplane/run_window.h"
#include "dataplane/tsq.h"
#include "dataplane/tx_queue.h"
#include "engine/sim_queue.h"
#include "tests/unit/gate.h"
#include "tests/unit/holding_driver.h"
#include "tests/unit/test_eal.h"

namespace txbatch {
namespace {

constexpr uint32_t kFrameBytes = 1000;

// A driver whose ring room and completions the test scripts. Counts a doorbell per Xmit call
// and per xmit_more chain (rung on the last frame, or when the ring fills), as a driver that
// honours xmit_more does.
class ScriptedDriver final : public test::HoldingDriver {
 public:
  struct Call {
    uint16_t offered;
    uint16_t accepted;
    bool one;   // XmitOne (else Xmit)
    bool more;  // XmitOne's xmit_more
  };

  // Frames a driver may be offered in one case (refused ones again each time): no case queues
  // more than 300, so a queue offered this many is in a run that never ends (a requeue that went
  // on dequeueing offered the same refused frames until memory ran out, 6 GB).
  static constexpr uint64_t kMaxOffered = 100'000;

  explicit ScriptedDriver(bool bql) : bql_(bql) {}

  uint16_t XmitAt(std::span<rte_mbuf* const> frames, Tsc /*now*/) override {
    Hook();
    if (Runaway(frames.size())) return Swallow(frames);
    const auto n = static_cast<uint16_t>(std::min<size_t>(frames.size(), Room()));
    Take(frames.first(n));
    calls.push_back({static_cast<uint16_t>(frames.size()), n, false, false});
    if (n > 0) counters_.doorbells.Add();
    return n;
  }
  bool XmitOneAt(rte_mbuf* m, bool more, Tsc /*now*/) override {
    Hook();
    if (Runaway(1)) return Swallow({&m, 1}) == 1;
    const bool ok = Room() > 0;
    if (ok) Take({&m, 1});
    calls.push_back({1, static_cast<uint16_t>(ok), true, more});
    if (ok) unrung_ = true;
    if (unrung_ && (!more || FreeSlots() == 0)) {
      counters_.doorbells.Add();
      unrung_ = false;
    }
    return ok;
  }
  unsigned FreeSlots() const override { return capacity - static_cast<unsigned>(held_.size()); }
  bool has_bql() const override { return bql_; }
  bool Stopped() const override { return FreeSlots() == 0; }
  // The ring gets the room the test scripted, and the `to_complete` oldest frames complete.
  unsigned Complete(Tsc) override {
    capacity = next_capacity;
    unsigned n = 0;
    for (; to_complete > 0 && !held_.empty(); --to_complete, ++n) {
      counters_.completed_bytes.Add(rte_pktmbuf_pkt_len(held_.front()));
      rte_pktmbuf_free(held_.front());
      held_.pop_front();
    }
    return n;
  }
  // The frames it took and has not completed, oldest first.
  const std::deque<rte_mbuf*>& ring() const { return held_; }
  bool owns_doorbell() const override { return true; }
  std::string Describe() const override { return "scripted"; }

  // Frames per handover as the queue made them: an Xmit call, or an XmitOne chain up to the
  // frame without xmit_more (refused frames included: they were offered).
  std::vector<uint16_t> Handovers() const {
    std::vector<uint16_t> out;
    uint16_t chain = 0;
    for (const Call& c : calls) {
      if (!c.one) {
        out.push_back(c.offered);
        continue;
      }
      ++chain;
      if (!c.more || !c.accepted) {
        out.push_back(chain);
        chain = 0;
      }
    }
    if (chain) out.push_back(chain);
    return out;
  }

  unsigned capacity = 0;       // ring slots (0 until the first completion: the ring is closed)
  unsigned next_capacity = 0;  // what the next Complete gives
  unsigned to_complete = 0;
  // Frames it takes before it refuses without stopping (a PMD's tx_burst short of room it does
  // not announce); UINT_MAX: as many as the ring has.
  unsigned take_limit = UINT_MAX;
  // Run once, at the next driver call: what other CPUs do meanwhile.
  std::function<void()> on_call;
  std::vector<Call> calls;

 private:
  unsigned Room() const { return std::min(FreeSlots(), take_limit); }
  // Counts `n` frames offered; past kMaxOffered the case fails, once, with a sentence.
  bool Runaway(size_t n) {
    offered_ += n;
    if (offered_ <= kMaxOffered) return false;
    if (!runaway_)
      ADD_FAILURE() << "the driver was offered more than " << kMaxOffered
                    << " frames: a run that never ends (it takes everything from here on, so "
                       "the qdisc empties and the run can stop)";
    runaway_ = true;
    return true;
  }
  // A runaway run's frames: taken whatever the ring's room, and not recorded in `calls`.
  uint16_t Swallow(std::span<rte_mbuf* const> frames) {
    for (rte_mbuf* m : frames) held_.push_back(m);
    return static_cast<uint16_t>(frames.size());
  }
  void Hook() {
    if (!on_call) return;
    const auto f = std::move(on_call);
    on_call = nullptr;
    f();
  }
  void Take(std::span<rte_mbuf* const> frames) {
    for (rte_mbuf* m : frames) held_.push_back(m);
    if (take_limit != UINT_MAX) take_limit -= static_cast<unsigned>(frames.size());
  }
  bool bql_;
  bool unrung_ = false;
  uint64_t offered_ = 0;
  bool runaway_ = false;
};

enum class Engine { kRootlock, kNolock, kSim, kSimNolock };
bool Simulated(Engine e) { return e == Engine::kSim || e == Engine::kSimNolock; }
bool Lockfree(Engine e) { return e == Engine::kNolock || e == Engine::kSimNolock; }

// A queue as a case plays it: a producer's send, and the txirq's work at a virtual time.
class PlayedQueue {
 public:
  virtual ~PlayedQueue() = default;
  virtual bool Send(rte_mbuf* m, int band) = 0;
  // Another producer's send, made while a run is in its driver call (Rig's
  // QueueDuringTheNextDriverCall): on another thread, or another actor of the simulation.
  virtual bool SendAsAnother(rte_mbuf* m, int band) = 0;
  // A stream producer's send into a full band: it waits for room (counted in waits), on
  // another thread or as another actor of the simulation; returns once it waits.
  virtual void SendBlocked(rte_mbuf* m, int band) = 0;
  // Waits for the blocked producers a run woke to put their frames in (and to run the qdisc,
  // as they do); returns whether every one did.
  virtual bool Unblock() = 0;
  virtual void Completion(Tsc now, bool resched) = 0;
  virtual const TxQueueCounters& counters() const = 0;
  virtual std::optional<uint32_t> bql_limit() = 0;
  virtual unsigned backlog() = 0;
  virtual unsigned Purge() = 0;
};

class RealQueue final : public PlayedQueue {
 public:
  RealQueue(TxDriver& driver, const FlushPolicy& policy, const TxQueueConfig& cfg,
            const RunWindow& window)
      : q_(MakeTxQueue(driver, policy, cfg, window)) {}
  bool Send(rte_mbuf* m, int band) override { return q_->Send(m, band); }
  bool SendAsAnother(rte_mbuf* m, int band) override {
    bool sent = false;
    std::thread other([&] { sent = q_->Send(m, band); });
    other.join();
    return sent;
  }
  void SendBlocked(rte_mbuf* m, int band) override {
    const uint64_t waits = q_->counters().waits.Get();
    blocked_.emplace_back([this, m, band] {
      q_->Send(m, band);
      returned_.fetch_add(1);
    });
    // Bounded: a producer that never waits fails the case here, not by hanging it.
    for (int i = 0; i < 5000 && q_->counters().waits.Get() == waits; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_GT(q_->counters().waits.Get(), waits) << "the producer did not wait for room";
  }
  bool Unblock() override {
    // Each returns once its frame is in and its run over; one still waiting after 5 s is freed
    // by Abort (so the join cannot hang) and the case fails.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (returned_.load() < blocked_.size() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const bool all = returned_.load() == blocked_.size();
    if (!all) q_->Abort();
    for (std::thread& t : blocked_) t.join();
    blocked_.clear();
    returned_.store(0);
    return all;
  }
  void Completion(Tsc now, bool resched) override { q_->Completion(now, resched); }
  const TxQueueCounters& counters() const override { return q_->counters(); }
  std::optional<uint32_t> bql_limit() override { return q_->bql_limit(); }
  unsigned backlog() override { return q_->backlog(); }
  unsigned Purge() override { return q_->Purge(); }
  ~RealQueue() override {
    if (!blocked_.empty()) (void)Unblock();
  }

 private:
  std::unique_ptr<TxQueue> q_;
  std::vector<std::thread> blocked_;
  std::atomic<size_t> returned_{0};
};

// The simulation's queue with free locks (no costs): a producer actor and the txirq actor, each
// stepped through the run it begins until it is back home.
class SimulatedQueue final : public PlayedQueue {
 public:
  SimulatedQueue(TxDriver& driver, const FlushPolicy& policy, const TxQueueConfig& cfg,
                 const RunWindow& window)
      : cpu_{cycles_, window}, q_(driver, nullptr, policy, cfg, cpu_, clock_) {
    for (SimActor* p : {&producer_, &other_}) {
      p->role = SimRole::kProducer;
      p->step = p->home = SimStep::kBuild;
      p->q = &q_;
    }
    irq_.role = SimRole::kIrq;
    irq_.step = irq_.home = SimStep::kIrq;
    irq_.q = &q_;
    q_.Attach(&irq_, nullptr);
  }
  bool Send(rte_mbuf* m, int band) override { return SendBy(producer_, m, band); }
  // The run in progress is another actor's: this one only enqueues.
  bool SendAsAnother(rte_mbuf* m, int band) override { return SendBy(other_, m, band); }
  void SendBlocked(rte_mbuf* m, int band) override {
    SimActor& p = blocked_.emplace_back();
    p.role = SimRole::kProducer;
    p.step = p.home = SimStep::kBuild;
    p.q = &q_;
    p.t = clock_.now;
    const SimQueue::Put put = q_.Enqueue(p, m, band, false);
    EXPECT_EQ(put, SimQueue::Put::kWait) << "the producer did not wait for room";
    if (put != SimQueue::Put::kWait) {
      if (put != SimQueue::Put::kDone) rte_pktmbuf_free(m);
      Finish(p);  // the run it may have begun
      blocked_.pop_back();
      return;
    }
    held_.push_back({m, band});
    q_.Block(p);  // as Simulation::Enqueue: asleep (p.t kNever) until a run wakes it
  }
  bool Unblock() override {
    // A woken actor steps its enqueue again (Simulation::Enqueue's kBlocked), the frame
    // restamped, and steps the run it begins.
    for (size_t i = 0; i < blocked_.size(); ++i) {
      SimActor& p = blocked_[i];
      if (held_[i].m == nullptr || p.t == kNever) continue;
      p.step = SimStep::kBuild;
      if (q_.Enqueue(p, held_[i].m, held_[i].band, /*waited=*/true) != SimQueue::Put::kDone)
        continue;
      held_[i].m = nullptr;
      Finish(p);
    }
    bool all = true;
    for (Held& h : held_) {
      all = all && h.m == nullptr;
      if (h.m != nullptr) rte_pktmbuf_free(std::exchange(h.m, nullptr));
    }
    return all;
  }
  void Completion(Tsc now, bool resched) override {
    clock_.now = std::max(clock_.now, now);
    irq_.t = clock_.now;
    // As the real rows: the case says what the txirq was told (a kick the run left is not it).
    (void)q_.TakeKicks();
    q_.Complete(irq_, resched);
    Finish(irq_);
  }
  const TxQueueCounters& counters() const override { return q_.counters(); }
  std::optional<uint32_t> bql_limit() override { return q_.dev().bql_limit(); }
  unsigned backlog() override { return q_.qdisc().backlog(); }
  unsigned Purge() override { return q_.Purge(); }

 private:
  bool SendBy(SimActor& p, rte_mbuf* m, int band) {
    p.t = clock_.now;
    const SimQueue::Put put = q_.Enqueue(p, m, band, false);
    EXPECT_NE(put, SimQueue::Put::kRetry) << "free locks are never held";
    EXPECT_NE(put, SimQueue::Put::kWait) << "a rig's producer that would block";
    if (put != SimQueue::Put::kDone) rte_pktmbuf_free(m);
    Finish(p);  // a drop runs the qdisc too (EnqueueStep)
    return put == SimQueue::Put::kDone;
  }
  // Steps the run `a` began (if it did) to its end.
  void Finish(SimActor& a) {
    for (int steps = 0; a.step != a.home; ++steps) {
      ASSERT_LT(steps, 100000) << "a simulated run that never ends";
      q_.StepRun(a);
    }
  }
  SimCycles cycles_;
  VirtualClock clock_;
  SimCpu cpu_;
  SimQueue q_;
  SimActor producer_, other_, irq_;
  // Blocked producers (SendBlocked), each another actor, and the frame each holds.
  struct Held {
    rte_mbuf* m;
    int band;
  };
  std::deque<SimActor> blocked_;  // the queue keeps pointers to them
  std::vector<Held> held_;
};

constexpr std::array<const char*, 4> kEngineNames = {"rootlock", "nolock", "sim", "sim_nolock"};

struct Rig {
  // `bypass`: the empty-qdisc bypass where the policy's kernel has it for the shape
  // (KernelBypass), as a cell runs unless --no-bypass.
  // `segment_gso`: the stack cuts GSO frames into segments before the driver (--offload gso).
  // `fq_codel`: that qdisc (root-locked on every row, as txbatch runs it: it has no
  // TCQ_F_NOLOCK).
  Rig(Engine engine, const char* policy_text, bool pfifo = false, BqlBounds bql = {},
      bool driver_bql = true, bool bypass = false, bool segment_gso = false,
      std::optional<FqCodelParams> fq_codel = std::nullopt,
      const std::function<void(TxQueueConfig&)>& edit = nullptr)
      : driver(driver_bql) {
    auto spec = ParsePolicySpec(policy_text);
    EXPECT_TRUE(spec.ok()) << policy_text;
    policy = MakeFlushPolicy(*spec, 1e9);
    TxQueueConfig cfg;
    cfg.tsc_hz = 1e9;  // the virtual clock ticks in ns
    cfg.track_stages = false;
    cfg.shape.pfifo = pfifo;
    cfg.shape.nolock = Lockfree(engine) && !fq_codel;
    cfg.shape.fq_codel = fq_codel;
    cfg.psched_mtu = 1514;
    cfg.bql = bql;
    cfg.bypass = bypass && KernelBypass(*spec, cfg.shape);
    cfg.segment_gso = segment_gso;
    if (edit) edit(cfg);
    if (Simulated(engine))
      queue = std::make_unique<SimulatedQueue>(driver, *policy, cfg, window);
    else
      queue = std::make_unique<RealQueue>(driver, *policy, cfg, window);
  }
  ~Rig() {
    (void)queue->Unblock();  // a blocked producer's frame goes in (or is freed) before the purge
    driver.Purge();
    queue->Purge();
  }
  // Sends `n` frames of kFrameBytes (while the ring is closed: queues them; nothing is sent, the
  // queue is stopped). `another`: as another producer while a run is in its driver call.
  void Queue(unsigned n, bool another = false) {
    for (unsigned i = 0; i < n; ++i) {
      rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
      ASSERT_NE(m, nullptr);
      ASSERT_NE(rte_pktmbuf_append(m, kFrameBytes), nullptr);
      ASSERT_TRUE(another ? queue->SendAsAnother(m, kProducerBandForTest)
                          : queue->Send(m, kProducerBandForTest));
    }
  }
  // Sends `n` UDP frames of `bytes` of flow `flow` (FrameBuilder's: headers a qdisc can hash),
  // as Queue does.
  void QueueFlow(uint16_t flow, unsigned n, unsigned bytes) {
    FrameBuilder& b = flow_builders.try_emplace(flow, Proto::kUdp, flow, false).first->second;
    for (unsigned i = 0; i < n; ++i) {
      rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
      ASSERT_NE(m, nullptr);
      b.Build(m, bytes - FrameBytes(Proto::kUdp, 0), 1);
      ASSERT_TRUE(queue->Send(m, kProducerBandForTest));
    }
  }
  // Sends `n` GSO frames (gso.h) of `slices` MSS slices each, as Queue does frames.
  void QueueGso(unsigned n, unsigned slices) {
    for (unsigned i = 0; i < n; ++i) {
      std::array<rte_mbuf*, kMaxGsoSegs> chain;
      ASSERT_EQ(rte_pktmbuf_alloc_bulk(test::Pool(), chain.data(), slices), 0);
      const unsigned mss = MaxPayload(Proto::kTcp, 1500);
      gso_builder.BuildGso({chain.data(), slices}, slices * mss, mss, 0);
      ASSERT_TRUE(queue->Send(chain[0], kProducerBandForTest));
    }
  }
  // The txirq's work at `now`: `complete` frames complete and the ring has `capacity` slots.
  void Irq(Tsc now, unsigned capacity, unsigned complete, bool resched = false) {
    driver.next_capacity = capacity;
    driver.to_complete = complete;
    driver.calls.clear();
    queue->Completion(now, resched);
  }
  // 3.18's dql_reset leaves BQL's limit at 0 whatever limit_min says (DqlStart::kZero): the
  // first frame goes alone and stops the queue, and the first completion clamps the limit into
  // [limit_min, limit_max]. A 2014 trace of a pinned limit is a device's that has sent before:
  // one frame goes and completes, and the ring is closed again (capacity 0), as a new rig's.
  // Leaves a doorbell and a BQL stop in the counters (and a bypass where the rig takes it).
  void PrimeBql() {
    Irq(0, 512, 0);  // the ring opens
    Queue(1);
    Irq(0, 0, 1);  // it completes; the ring closes
    driver.calls.clear();
  }
  // Sends a frame of kFrameBytes as a stream producer whose band is full: it waits for room.
  void QueueBlocked() {
    rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
    ASSERT_NE(m, nullptr);
    ASSERT_NE(rte_pktmbuf_append(m, kFrameBytes), nullptr);
    queue->SendBlocked(m, kProducerBandForTest);
  }
  // At the driver's next call, another producer queues `n` frames (the run holds its run flag
  // or has let the root lock go, as while another CPU sends).
  void QueueDuringTheNextDriverCall(unsigned n) {
    driver.on_call = [this, n] { Queue(n, /*another=*/true); };
  }
  static constexpr int kProducerBandForTest = 1;
  FrameBuilder gso_builder{Proto::kTcp, 0, /*track_stages=*/false};
  std::map<uint16_t, FrameBuilder> flow_builders;
  RunWindow window;
  ScriptedDriver driver;
  std::unique_ptr<FlushPolicy> policy;
  std::unique_ptr<PlayedQueue> queue;
};

class PolicyRun : public ::testing::TestWithParam<Engine> {};

using Sizes = std::vector<uint16_t>;

// Deep BQL: a fixed 1 MB limit never bounds a bulk here.
constexpr BqlBounds kDeepBql{1'000'000, 1'000'000, 1.0};

TEST_P(PolicyRun, BqlBulksFollowTheLimitAsItGrowsFromZero) {
  Rig rig(GetParam(), "bql");
  rig.Queue(100);
  // Limit 0: the first frame always goes (bytelimit = 0 - len), and stops the queue (avail < 0).
  rig.Irq(1, 512, 0);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({1}));
  // Starved over the limit: the limit grows by what completed, to 1000: one frame fits exactly
  // (avail 0 after it: not stopped), the next takes the queue over the limit.
  rig.Irq(2, 512, 1);
  EXPECT_EQ(rig.queue->bql_limit(), 1000u);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({1, 1}));
  rig.Irq(3, 512, 2);  // starved again: 1000 + 2000 beyond the previous queue level
  EXPECT_EQ(rig.queue->bql_limit(), 3000u);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({3, 1}));
  rig.Irq(4, 512, 4);
  EXPECT_EQ(rig.queue->bql_limit(), 7000u);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({7, 1}));
  EXPECT_EQ(rig.queue->counters().bql_stops.Get(), 4u);
  for (const auto& c : rig.driver.calls) EXPECT_FALSE(c.one) << "bql hands a bulk over in one call";
}

TEST_P(PolicyRun, BqlBulksShrinkOnceSlackOutlastsTheHoldTime) {
  Rig rig(GetParam(), "bql", false, BqlBounds{0, kDqlMaxLimit, /*hold_s=*/100e-9});
  rig.Queue(300);
  rig.Irq(1, 512, 0);
  for (Tsc t = 2; t <= 5; ++t) rig.Irq(t, 512, 512);  // grow: 1000, 3000, 7000, 15000
  const uint32_t grown = *rig.queue->bql_limit();
  ASSERT_EQ(grown, 15000u);
  // Now completions come a frame at a time, well inside the hold time: the limit holds.
  Tsc t = 10;
  for (int i = 0; i < 5; ++i) rig.Irq(t++, 512, 1);
  EXPECT_EQ(*rig.queue->bql_limit(), grown);
  // Past the hold time the lowest slack seen is given back, and the bulks shrink with it. In
  // frames of 1000 bytes (dql_completed, batching/dql.cc): the growth ended with 15 completed, 31
  // queued (16 in flight), the limit 15 and prev_ovlimit 0. Each single completion then leaves
  // 15 in progress against a limit of 15, over it by 1 (its prev_ovlimit from the second on), and
  // the run sends one more (avail 0 is not stopped). From the second, the slack branch runs:
  // slack = limit + prev_ovlimit - 2 x completed = 15 + 1 - 2 = 14, the lowest each time. At
  // t + 200, past the hold time (100 ns since the growth at 5), the limit gives it back:
  // 15 - 14 = 1 frame, and with 15 in flight nothing is sent.
  rig.Irq(t + 200, 512, 1);
  const uint32_t shrunk = *rig.queue->bql_limit();
  EXPECT_EQ(shrunk, 1000u);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({}));
  // Everything out (15): starved, but growth adds completed - prev_num_queued = 0 and a
  // prev_ovlimit the shrink zeroed: the limit stays 1 frame, and the run sends a bulk of what it
  // allows (1), then, the queue not stopped at avail 0, the one frame that takes it over.
  rig.Irq(t + 201, 512, 512);
  EXPECT_EQ(*rig.queue->bql_limit(), 1000u);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({1, 1}));
}

// Where BQL's limit starts (batching/dql.h, DqlStart). 3.18's dql_reset leaves it at 0 whatever
// limit_min says: of 30 frames under a pinned 1 MB limit the first goes alone (bytelimit 0 - len)
// and stops the queue (avail -1000), and its completion's clamp (starved: 0 + 1000, then up to
// limit_min) opens the limit for the other 29: {1}, then {29}. Since upstream 3a17f23f7c36
// (2025) dql_reset starts it at limit_min: {30} at once.
TEST_P(PolicyRun, BqlStartsAtZeroIn2014AndAtLimitMinIn2025) {
  Rig r2014(GetParam(), "linux-2014", false, kDeepBql);
  EXPECT_EQ(r2014.queue->bql_limit(), 0u);
  r2014.Queue(30);
  r2014.Irq(1, 512, 0);
  EXPECT_EQ(r2014.driver.Handovers(), Sizes({1}));
  EXPECT_EQ(r2014.queue->counters().bql_stops.Get(), 1u);
  r2014.Irq(2, 512, 1);
  EXPECT_EQ(r2014.queue->bql_limit(), 1'000'000u);
  EXPECT_EQ(r2014.driver.Handovers(), Sizes({29}));
  Rig r2025(GetParam(), "linux-2025", false, kDeepBql);
  EXPECT_EQ(r2025.queue->bql_limit(), 1'000'000u);
  r2025.Queue(30);
  r2025.Irq(1, 512, 0);
  EXPECT_EQ(r2025.driver.Handovers(), Sizes({30}));
  EXPECT_EQ(r2025.queue->counters().bql_stops.Get(), 0u);
}

// tc's pfifo bulks as pfifo_fast does. qdisc_create sets TCQ_F_ONETXQUEUE on any qdisc of a
// device with one TX queue (`if (!netif_is_multiqueue(dev))`, 3.17 to 6.9), so 3.18's
// dequeue_skb takes try_bulk_dequeue_skb, bounded by BQL alone: 30 frames queued while the queue
// was stopped (and, no bypass, enqueued from the first) go as one chain when it wakes — {30},
// one doorbell. (The slow path of 4.8 on, 9 frames, is a root qdisc's over several TX queues.)
TEST_P(PolicyRun, TcPfifoBulksByBqlAsPfifoFastDoes) {
  Rig rig(GetParam(), "linux-2014", /*pfifo=*/true, kDeepBql);
  rig.PrimeBql();
  const uint64_t doorbells = rig.driver.counters().doorbells.Get();
  rig.Queue(30);
  rig.Irq(1, 512, 0);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({30}));
  int unmarked = 0;
  for (const auto& c : rig.driver.calls) {
    EXPECT_TRUE(c.one) << "one driver call per frame";
    unmarked += !c.more;
  }
  EXPECT_EQ(unmarked, 1) << "xmit_more on all but the chain's last frame";
  EXPECT_EQ(rig.driver.counters().doorbells.Get(), doorbells + 1);
  // Without BQL (qdisc_avail_bulklimit = dql_avail = 0: bytelimit = 0 - len) every restart
  // hands one frame over: 30 x {1}, as pfifo_fast.
  Rig plain(GetParam(), "linux-2014", /*pfifo=*/true, BqlBounds{}, /*driver_bql=*/false);
  plain.Queue(30);
  plain.Irq(1, 512, 0);
  EXPECT_EQ(plain.driver.Handovers(), Sizes(30, 1));
}

// fq_codel's deficit round robin as the driver sees it, on the real queue and the simulation's
// (fq_codel is root-locked on the nolock rows too: they repeat the others): the trace of
// FqCodel.ServesFlowsByDeficitRoundRobinNewFlowsFirst (worked from 6.x sch_fq_codel.c: A 4 x
// 1514 bytes, B 4 x 764, C 8 x 64 queued in that order, quantum 1514, new flows first) leaves
// the qdisc as ABBCCCCCCCCABBAA. Queued while the ring is closed (the queue stopped: 6.x's
// dequeue_skb takes nothing from a TCQ_F_ONETXQUEUE qdisc whose queue is stopped), all 16 wait
// in fq_codel; when the ring opens, linux-2025's run hands them over in one bulk
// (try_bulk_dequeue_skb under deep BQL, 16 within the quota of 64; fq_codel is
// TCQ_F_ONETXQUEUE on a one-queue device). The UDP frames of flows 0, 1, 2 hash to buckets of
// their own under fq_codel.cc's fixed seed (a shared bucket would merge two flows, and the order
// would show it).
TEST_P(PolicyRun, FqCodelHandsTheDriverItsDeficitRoundRobinOrder) {
  Rig rig(GetParam(), "linux-2025", false, kDeepBql, true, false, false, FqCodelParams{});
  rig.QueueFlow(0, 4, 1514);
  rig.QueueFlow(1, 4, 764);
  rig.QueueFlow(2, 8, 64);
  rig.Irq(1, 512, 0);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({16}));
  std::string order;
  for (const rte_mbuf* m : rig.driver.ring()) order += static_cast<char>('A' + FlowOf(m));
  EXPECT_EQ(order, "ABBCCCCCCCCABBAA");
  EXPECT_EQ(rig.queue->backlog(), 0u);
}

TEST_P(PolicyRun, WithoutBqlTheFastPathDoesNotBulk) {
  Rig rig(GetParam(), "linux-2014", false, BqlBounds{}, /*driver_bql=*/false);
  rig.Queue(10);
  rig.Irq(1, 512, 0);
  EXPECT_EQ(rig.driver.Handovers(), Sizes(10, 1));  // bytelimit 0 - len: the first frame alone
}

// The quota (dev_tx_weight, 64) against 100 frames queued, deep BQL.
// 3.18: try_bulk_dequeue_skb has no frame cap, so one bulk takes all 100 (packets 100: quota
// -36, __netif_schedule for a run that finds nothing).
// 0345552a653c: try_bulk_dequeue_skb(..., budget = the quota left) adds frames after the first
// until `++cnt >= budget`: {65} (packets 65, quota -1, the run ends and reschedules); the
// softirq's run has a fresh quota of 64: {35}.
TEST_P(PolicyRun, TheQuotaEndsARunThatTheTxirqReschedules) {
  Rig r2014(GetParam(), "linux-2014", false, kDeepBql);
  r2014.PrimeBql();
  r2014.Queue(100);
  r2014.Irq(1, 512, 0);
  EXPECT_EQ(r2014.driver.Handovers(), Sizes({100}));
  Rig r2025(GetParam(), "linux-2025", false, kDeepBql);
  r2025.Queue(100);
  r2025.Irq(1, 512, 0);
  EXPECT_EQ(r2025.driver.Handovers(), Sizes({65}));
  const uint64_t before = r2025.queue->counters().reschedules.Get();
  r2025.Irq(2, 512, 0, /*resched=*/true);  // __netif_schedule: the softirq runs it again
  EXPECT_EQ(r2025.driver.Handovers(), Sizes({35}));
  EXPECT_EQ(r2025.queue->counters().reschedules.Get(), before + 1);
}

// A GSO frame is one packet for the quota and the bulk, as a GSO skb is to __qdisc_run and
// try_bulk_dequeue_skb: 100 GSO frames of 2 MSS slices under linux-2025 go as the kernel's
// {65}, {35} bulks. With gso the stack cuts each bulk into its segments before the driver
// (validate_xmit_skb_list): the driver sees {130}, {70}, one xmit_more chain a bulk; with tso the
// driver gets the GSO frames themselves. Counted a packet a segment, the first run would have
// ended after 33 GSO frames.
TEST_P(PolicyRun, AGsoFrameIsOnePacketForTheQuotaAndTheBulk) {
  for (const bool segment : {true, false}) {
    Rig rig(GetParam(), "linux-2025", false, kDeepBql, true, false, segment);
    rig.QueueGso(100, 2);
    rig.Irq(1, 512, 0);
    EXPECT_EQ(rig.driver.Handovers(), segment ? Sizes({130}) : Sizes({65})) << segment;
    rig.Irq(2, 512, 0, /*resched=*/true);
    EXPECT_EQ(rig.driver.Handovers(), segment ? Sizes({70}) : Sizes({35})) << segment;
    EXPECT_EQ(rig.queue->backlog(), 0u);
  }
}

TEST(PolicyBudget, Linux2025CapsEachBulkAtOneMoreThanTheQuotaLeft) {
  const auto policy = MakeFlushPolicy(*ParsePolicySpec("linux-2025"), 1e9);
  DequeueContext ctx;
  ctx.has_bql = true;
  ctx.bql_avail = 1'000'000;
  ctx.quota_left = 64 - 40;  // after a 40-frame bulk: the first frame and 24 more
  EXPECT_EQ(policy->Budget(ctx).frames, 25);
  const auto old = MakeFlushPolicy(*ParsePolicySpec("linux-2014"), 1e9);
  EXPECT_EQ(old->Budget(ctx).frames, kMaxBatch);
  EXPECT_EQ(old->Budget(ctx).bytes, 1'000'000);
  EXPECT_EQ(old->Budget(ctx).handover, Handover::kXmitMore);
}

// 3.18 charges a requeued list one packet. 200 frames, deep BQL, a ring of 100: the first bulk
// takes all 200, the ring takes 100 and stops, and dev_requeue_skb keeps the other 100 as one
// list in q->gso_skb (sch_direct_xmit returns 0: the run ends). 20 more are queued meanwhile. At
// the wake dequeue_skb hands the list back whole with `*packets = 1` (quota 63), so the same run
// goes on to the 20: {100, 20}. Charged a packet a frame, the run would have ended after the
// list and left the 20 to a reschedule.
TEST_P(PolicyRun, A2014RequeuedListCostsTheQuotaOnePacket) {
  Rig rig(GetParam(), "linux-2014", false, kDeepBql);
  rig.PrimeBql();
  rig.Queue(200);
  rig.Irq(1, 100, 0);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({100}));
  EXPECT_EQ(rig.queue->counters().requeued_frames.Get(), 100u);
  rig.Queue(20);
  const uint64_t resched = rig.queue->counters().reschedules.Get();
  rig.Irq(2, 200, 100);  // the ring empties and has 200 slots
  EXPECT_EQ(rig.driver.Handovers(), Sizes({100, 20}));
  EXPECT_EQ(rig.queue->counters().reschedules.Get(), resched + 1) << "one run, the wake's";
}

// A 3.18 requeued list is handed back whole, however many segments the stack cut it into
// (--offload gso): dequeue_skb returns q->gso_skb as it is, and nothing bounds a bulk by its GSO
// frames there. 10 GSO frames of 45 slices, deep BQL, a ring of 100: the bulk takes all 10,
// validate_xmit_skb_list cuts them into 450 segments, the ring takes 100 and stops, and 350 go
// back as one list. At the wake they go as one xmit_more chain, {350}. Clipped to the 91 GSO
// frames a bulk may take before the cut (kMaxGsoBulk), the list went as {91, 91, 91, 77}.
TEST_P(PolicyRun, A2014RequeuedSegmentListComesBackWhole) {
  Rig rig(GetParam(), "linux-2014", false, kDeepBql, true, false, /*segment_gso=*/true);
  rig.PrimeBql();
  rig.QueueGso(10, 45);
  rig.Irq(1, 100, 0);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({100}));
  EXPECT_EQ(rig.queue->counters().requeued_frames.Get(), 350u);
  rig.Irq(2, 512, 100);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({350}));
  EXPECT_EQ(rig.queue->backlog(), 0u);
}

// A requeue ends the run (3.18 sch_direct_xmit returns dev_requeue_skb's 0; 6.9 returns false)
// and schedules the softirq (__netif_schedule; a lock-free qdisc's MISSED note does it at
// qdisc_run_end), whose run has a fresh quota. A driver that refuses without stopping (a PMD's
// short tx_burst) shows it: {10} of 30 taken, the run ends asking for a reschedule, and the
// reschedule sends the rest.
TEST_P(PolicyRun, ARequeueEndsTheRunAndReschedulesIt) {
  Rig rig(GetParam(), "count:30");
  rig.Queue(30);
  rig.driver.take_limit = 10;
  rig.Irq(1, 512, 0);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({30})) << "one bulk offered, 20 refused";
  EXPECT_EQ(rig.queue->counters().requeued_frames.Get(), 20u);
  EXPECT_EQ(rig.queue->backlog(), 20u) << "the run ended at the requeue";
  rig.driver.take_limit = UINT_MAX;
  rig.Irq(2, 512, 0, /*resched=*/true);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({20}));
  EXPECT_EQ(rig.queue->backlog(), 0u);
}

// The empty-qdisc bypass does not look at the queue's state: neither 3.18's nor 6.9's
// __dev_xmit_skb condition does (`TCQ_F_CAN_BYPASS && !qdisc_qlen(q) && qdisc_run_begin(q)`;
// 6.9 NOLOCK: `nolock_qdisc_is_empty(q) && qdisc_run_begin(q)`). The first of 100 frames sent
// into a stopped queue takes it; sch_direct_xmit finds the queue stopped, calls no driver and
// requeues it; the other 99 are enqueued. At the wake the requeued frame goes first and alone
// (the gso_skb path never bulks), costing one packet:
//   3.18 (linux-2014): {1}, then a bulk bounded by BQL alone: {1, 99};
//   6.9 + 0345552a653c (linux-2025): {1}, then 1 + 63: {1, 64}, the quota spent (63 - 64 = -1),
//   a reschedule and {35}.
// linux-2014 on --sync nolock has no bypass (3.18 had no lock-free qdisc; it came with 5.14):
// all 100 are enqueued and go as one bulk, {100}.
TEST_P(PolicyRun, AFrameThatBypassesIntoAStoppedQueueIsRequeuedAndGoesFirstAlone) {
  Rig r2014(GetParam(), "linux-2014", false, kDeepBql, true, /*bypass=*/true);
  r2014.PrimeBql();
  const uint64_t primed = r2014.queue->counters().bypassed.Get();
  r2014.Queue(100);
  EXPECT_EQ(r2014.driver.calls.size(), 0u) << "a stopped queue's driver is not called";
  r2014.Irq(1, 512, 0);
  const bool bypassed = !Lockfree(GetParam());
  EXPECT_EQ(r2014.queue->counters().bypassed.Get() - primed, bypassed ? 1u : 0u);
  EXPECT_EQ(r2014.driver.Handovers(), bypassed ? Sizes({1, 99}) : Sizes({100}));
  Rig r2025(GetParam(), "linux-2025", false, kDeepBql, true, /*bypass=*/true);
  r2025.Queue(100);
  r2025.Irq(1, 512, 0);
  EXPECT_EQ(r2025.queue->counters().bypassed.Get(), 1u);
  EXPECT_EQ(r2025.queue->counters().requeued_frames.Get(), 1u);
  EXPECT_EQ(r2025.driver.Handovers(), Sizes({1, 64}));
  r2025.Irq(2, 512, 0, /*resched=*/true);
  EXPECT_EQ(r2025.driver.Handovers(), Sizes({35}));
}

// A frame that bypasses costs its run no quota: __dev_xmit_skb's sch_direct_xmit comes before
// __qdisc_run, which begins with dev_tx_weight of its own. One frame sent into an open, empty
// queue goes alone, and 100 queued during its driver call follow in the same run as 1 + 64
// (0345552a653c's cap at the whole quota): {1, 65}, then {35} after the reschedule.
TEST_P(PolicyRun, TheBypassedFrameCostsTheRunNoQuota) {
  Rig rig(GetParam(), "linux-2025", false, kDeepBql, true, /*bypass=*/true);
  rig.Irq(1, 512, 0);  // the ring opens; nothing is queued
  rig.driver.calls.clear();
  rig.QueueDuringTheNextDriverCall(100);
  rig.Queue(1);
  EXPECT_EQ(rig.queue->counters().bypassed.Get(), 1u);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({1, 65}));
  rig.Irq(2, 512, 0, /*resched=*/true);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({35}));
}

// A bypassed GSO frame under --offload gso goes as the kernel's bypass sends it: sch_direct_xmit
// (validate: true, 3.18 and 6.9 alike) cuts it in validate_xmit_skb_list, and
// dev_hard_start_xmit hands the segments over one xmit_one call each, xmit_more on all but the
// last: a chain of 45 with one doorbell. It went as one burst of 45 (a single Xmit call).
TEST_P(PolicyRun, ABypassedGsoFrameGoesASegmentACallWithXmitMore) {
  Rig rig(GetParam(), "linux-2025", false, kDeepBql, true, /*bypass=*/true, /*segment_gso=*/true);
  rig.Irq(1, 512, 0);  // the ring opens; nothing is queued
  rig.driver.calls.clear();
  const uint64_t doorbells = rig.driver.counters().doorbells.Get();
  rig.QueueGso(1, 45);
  EXPECT_EQ(rig.queue->counters().bypassed.Get(), 1u);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({45}));
  ASSERT_EQ(rig.driver.calls.size(), 45u);
  for (size_t i = 0; i < rig.driver.calls.size(); ++i) {
    EXPECT_TRUE(rig.driver.calls[i].one) << i;
    EXPECT_EQ(rig.driver.calls[i].more, i + 1 < rig.driver.calls.size()) << i;
  }
  EXPECT_EQ(rig.driver.counters().doorbells.Get() - doorbells, 1u);
}

// Frames another producer queues while a run is in its driver call go in that same run, within
// its quota; only what the quota leaves is rescheduled, with a fresh quota. 6.9: a lock-free
// qdisc's producer that finds q->seqlock taken leaves MISSED (qdisc_run_begin) and returns; the
// holder's __qdisc_run dequeues its frames, and pfifo_fast_dequeue clears MISSED only when it
// finds nothing; the root-locked one enqueues under the root lock the run let go. 14 queued, 86
// more during the first driver call, deep BQL, linux-2025: {14} (quota 50), {51} (1 + 50; quota
// -1: MISSED or __netif_schedule), then the softirq's {35}.
TEST_P(PolicyRun, FramesQueuedDuringARunGoInThatRunWithinItsQuota) {
  Rig rig(GetParam(), "linux-2025", false, kDeepBql);
  rig.Queue(14);
  rig.QueueDuringTheNextDriverCall(86);
  rig.Irq(1, 512, 0);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({14, 51}));
  if (Lockfree(GetParam())) {
    EXPECT_GT(rig.queue->counters().missed.Get(), 0u);
  }
  rig.Irq(2, 512, 0, /*resched=*/true);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({35}));
}

// The enqueue step (EnqueueStep, dataplane/enqueue_step.h) on a band of 4 frames, the ring
// closed: a datagram that finds the band full is dropped, counted, and its producer still runs
// the qdisc (__dev_xmit_skb runs it after dev_qdisc_enqueue whatever that returned, in 3.18 and
// 6.9 alike): 5 sends, 5 runs, each ending at once on the stopped queue. Before the step, the
// lock-free queue and the simulation's two returned at the drop (4 runs).
TEST_P(PolicyRun, ADatagramDroppedAtAFullBandStillRunsTheQdisc) {
  Rig rig(GetParam(), "count:32", false, {}, true, false, false, std::nullopt,
          [](TxQueueConfig& c) {
            c.txqueuelen = 4;
            c.block_when_full = false;
          });
  rig.Queue(4);
  rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
  ASSERT_NE(m, nullptr);
  ASSERT_NE(rte_pktmbuf_append(m, kFrameBytes), nullptr);
  EXPECT_FALSE(rig.queue->Send(m, Rig::kProducerBandForTest)) << "the queue frees it";
  EXPECT_EQ(rig.queue->counters().dropped_qdisc_full.Get(), 1u);
  EXPECT_EQ(rig.queue->counters().runs.Get(), 5u);
  EXPECT_EQ(rig.queue->counters().waits.Get(), 0u);
  EXPECT_EQ(rig.queue->backlog(), 4u);
  rig.Irq(1, 512, 0);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({4}));  // count:32 takes what is queued
  EXPECT_EQ(rig.driver.ring().size(), 4u);
}

// A stream's producer that finds its band full waits (counted) until a run frees room, then
// its frame goes in behind the others — restamped, not dropped — and is sent: the txirq's run
// takes the 4 queued ({4}) and wakes it; its frame goes in the run it begins, in that run if it
// got in first, or (lock-free) in the txirq's next pass ({1} each way: the band held no room
// before the dequeue).
TEST_P(PolicyRun, AStreamProducerWaitsForRoomThenItsFrameGoesBehindTheOthers) {
  Rig rig(GetParam(), "count:32", false, {}, true, false, false, std::nullopt,
          [](TxQueueConfig& c) { c.txqueuelen = 4; });
  rig.Queue(4);
  rig.QueueBlocked();
  EXPECT_EQ(rig.queue->counters().waits.Get(), 1u);
  rig.Irq(1, 512, 0);
  EXPECT_TRUE(rig.queue->Unblock()) << "the run that freed room woke the producer";
  Sizes handovers = rig.driver.Handovers();
  // On the lock-free queue the producer's frame may land after the txirq run's last dequeue and
  // find its flag still taken: it leaves MISSED and the run's end kicks the txirq, whose next
  // pass (here, a reschedule) sends it. Elsewhere that pass finds nothing.
  rig.Irq(2, 512, 0, /*resched=*/true);
  for (uint16_t n : rig.driver.Handovers()) handovers.push_back(n);
  EXPECT_EQ(handovers, Sizes({4, 1}));
  EXPECT_EQ(rig.driver.ring().size(), 5u);
  EXPECT_EQ(rig.queue->counters().dropped_qdisc_full.Get(), 0u);
  EXPECT_EQ(rig.queue->backlog(), 0u);
}

// A MISSED note left after the run's last look (5.14's lock-free qdisc, QdiscNotes): the
// holder's last dequeue found nothing and no note, so pfifo_fast_dequeue takes no second look;
// then a producer's frame lands, and its qdisc_run_begin finds the flag taken, leaves MISSED
// and, its second try failing too, returns with its frame queued and no run of its own. The
// holder's qdisc_run_end lets the flag go and reads the note: __netif_schedule, and the txirq's
// run (net_tx_action: a reschedule, which runs even a qdisc that looks empty while a note is
// set) sends the frame. A note left before the last look is that look's instead: it clears the
// note, looks once more and finds the frame, and the end reschedules nothing. Played on the
// notes both lock-free queues keep (the real one's flag, the simulation's); the simulation takes
// a run's last look and its end in one step, so there no producer comes between them at all.
template <class Flag>
void PlayMissedNotes() {
  QdiscNotes<Flag> notes;
  Flag running{false};
  ASSERT_TRUE(notes.RunBegin(running));  // the holder
  EXPECT_FALSE(notes.ClearForAnotherLook()) << "its last look: nothing queued, no note";
  bool found_taken = false;
  EXPECT_FALSE(notes.RunBegin(running, &found_taken)) << "the producer runs nothing itself";
  EXPECT_TRUE(found_taken);
  EXPECT_TRUE(notes.missed.load());
  EXPECT_TRUE(notes.RunEnd(running)) << "qdisc_run_end reschedules the note's frame";
  EXPECT_FALSE(notes.NothingToRestart(/*empty=*/true, /*resched=*/false))
      << "the txirq runs the qdisc while the note is set";
  ASSERT_TRUE(notes.RunBegin(running));  // the txirq's run
  EXPECT_TRUE(notes.ClearForAnotherLook()) << "its dequeue after the frame clears the note";
  EXPECT_FALSE(notes.RunEnd(running));
  // Before the last look: the look takes the note and the frame, the end nothing.
  ASSERT_TRUE(notes.RunBegin(running));
  EXPECT_FALSE(notes.RunBegin(running));  // a producer, during the run
  EXPECT_TRUE(notes.ClearForAnotherLook()) << "the empty dequeue looks once more";
  EXPECT_FALSE(notes.RunEnd(running)) << "nothing left to reschedule";
}

TEST(QdiscNotes, AMissedNoteLeftAfterTheRunsLastLookReschedulesTheRun) {
  {
    SCOPED_TRACE("the real queue's notes");
    PlayMissedNotes<std::atomic<bool>>();
  }
  {
    SCOPED_TRACE("the simulation's notes");
    PlayMissedNotes<SimFlag>();
  }
}

using test::Gate;

// count:1 whose run-flag holder stops at a gate in its second dequeue (`first`) and in the one
// after it (`second`: pfifo_fast_dequeue's look again after clearing a note), which then takes
// nothing — that look was over before anything the test queues while it waits.
class LookGatedPolicy final : public FlushPolicy {
 public:
  LookGatedPolicy() : FlushPolicy({PolicyKind::kCount, 1}) {}
  DequeueBudget Budget(const DequeueContext&) const override {
    const int call = ++calls_;
    if (call == 2) first.Stop();
    if (call != 3) return {1};
    second.Stop();
    return {0};
  }
  mutable Gate first, second;

 private:
  mutable std::atomic<int> calls_{0};
};

// The same trace on the real lock-free queue, its window held open by the gates. The holder
// sends a frame; in its next (empty) dequeue the txirq's reschedule finds the flag taken and
// leaves a note, so the holder clears it and looks again; that look is over, and now a
// producer's frame lands, finds the flag taken and leaves its note. The holder's run ends
// without another look, its qdisc_run_end reads the note and kicks the txirq, whose thread
// (started only now) sends the frame as a reschedule. Without the kick the frame stays queued:
// an idle ring's txirq polls, but runs the qdisc only for a stopped queue or a kick.
TEST(NolockRun, AMissedNoteLeftAfterTheRunsLastLookKicksTheTxirq) {
  RunWindow window;
  ScriptedDriver driver(/*bql=*/false);
  driver.capacity = driver.next_capacity = 512;
  LookGatedPolicy policy;
  TxQueueConfig cfg;
  cfg.tsc_hz = 1e9;
  cfg.track_stages = false;
  cfg.shape.nolock = true;
  const auto queue = MakeTxQueue(driver, policy, cfg, window);
  const auto frame = [] {
    rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
    EXPECT_NE(m, nullptr);
    EXPECT_NE(rte_pktmbuf_append(m, kFrameBytes), nullptr);
    return m;
  };
  rte_mbuf* const first = frame();
  rte_mbuf* const second = frame();
  std::thread holder([&] { EXPECT_TRUE(queue->Send(first, Rig::kProducerBandForTest)); });
  const bool at_first = policy.first.WaitArrived();
  EXPECT_TRUE(at_first) << "the holder never reached its second dequeue";
  if (at_first) {
    queue->Completion(1, /*resched=*/true);  // the txirq, told to reschedule: the flag is taken
    EXPECT_EQ(queue->counters().missed.Get(), 1u);
  }
  policy.first.Release();
  const bool at_second = policy.second.WaitArrived();
  EXPECT_TRUE(at_second) << "the holder did not look again after the note";
  EXPECT_TRUE(queue->Send(second, Rig::kProducerBandForTest));
  EXPECT_EQ(queue->counters().missed.Get(), 2u);
  policy.second.Release();
  holder.join();
  EXPECT_EQ(queue->DriverCountsNow().accepted, 1u);
  EXPECT_EQ(queue->backlog(), 1u) << "the frame is left to the reschedule";
  EXPECT_EQ(queue->counters().reschedules.Get(), 0u);
  queue->StartIrq();
  const auto deadline = std::chrono::steady_clock::now() + Gate::kWait;
  while (queue->DriverCountsNow().accepted < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  queue->StopIrq();
  EXPECT_EQ(queue->DriverCountsNow().accepted, 2u) << "nobody was told to run the qdisc again";
  EXPECT_EQ(queue->counters().reschedules.Get(), 1u);
  EXPECT_EQ(queue->Purge() + driver.Purge(), 2u);
}

TEST_P(PolicyRun, RequeuedFramesComeBackAsTheirListIn2014AndAloneIn2025) {
  Rig r2014(GetParam(), "linux-2014", false, kDeepBql);
  r2014.PrimeBql();
  r2014.Queue(30);
  r2014.Irq(1, 10, 0);
  // 10 taken; the ring is then full, so the chain ends (the 10th rang) and 20 are requeued.
  EXPECT_EQ(r2014.driver.Handovers(), Sizes({10}));
  r2014.Irq(2, 10, 10);
  EXPECT_EQ(r2014.driver.Handovers(), Sizes({10}));  // the requeued 20 as one list again
  r2014.Irq(3, 10, 10);
  EXPECT_EQ(r2014.driver.Handovers(), Sizes({10}));

  Rig r2025(GetParam(), "linux-2025", false, kDeepBql);
  r2025.Queue(30);
  r2025.Irq(1, 10, 0);
  EXPECT_EQ(r2025.driver.Handovers(), Sizes({10}));
  r2025.Irq(2, 10, 10);
  EXPECT_EQ(r2025.driver.Handovers(), Sizes(10, 1));  // one at a time
  for (const auto& c : r2025.driver.calls) EXPECT_FALSE(c.more) << "alone: no xmit_more";
  // 2014: 20 requeued at the first run and the 10 the second could not send again, in two
  // requeues (each a list). 2025: the 20 once; the second run takes them one at a time and stops
  // with the ring full, before it dequeues an 11th, so none goes back.
  EXPECT_EQ(r2014.queue->counters().requeued_frames.Get(), 30u);
  EXPECT_EQ(r2014.queue->counters().requeues.Get(), 2u);
  EXPECT_EQ(r2025.queue->counters().requeued_frames.Get(), 20u);
  EXPECT_EQ(r2025.queue->counters().requeues.Get(), 1u);
}

// A BQL stop in the middle of an xmit_more chain (one longer than BQL's room: a 3.18 requeued
// list, handed back without a byte check), at NetdevQueue, below the qdisc. Until 4.20
// dev_hard_start_xmit broke on netif_xmit_stopped, BQL's STACK_XOFF included: the frame that
// stopped the queue goes without xmit_more (e1000 and ixgbe ring a stopped queue's doorbell) and
// the rest is left to requeue. Since 4.20 it breaks on netif_tx_queue_stopped, the driver's own
// stop: the chain goes on, and every frame after the stop is rung as a stopped queue's. A fixed
// 3000-byte limit and five 1000-byte frames: the 4th takes the bytes in flight over it. (The
// queue has sent and completed one frame first: 3.18's limit starts at 0, Rig::PrimeBql.)
TEST(NetdevQueueChain, ABqlStopEndsTheChainUntil420AndNotSince) {
  struct Case {
    const char* policy;
    uint16_t accepted;
    std::vector<bool> more;
    uint64_t doorbells;
  };
  for (const Case& k : {Case{"linux-2014", 4, {true, true, true, false}, 1},
                        Case{"linux-2025", 5, {true, true, true, false, false}, 2}}) {
    SCOPED_TRACE(k.policy);
    ScriptedDriver driver(/*bql=*/true);
    driver.capacity = 512;
    const auto policy = MakeFlushPolicy(*ParsePolicySpec(k.policy), 1e9);
    TxQueueCounters counters;
    NetdevQueue dev(driver, *policy, BqlBounds{3000, 3000, 1.0}, 1e9, counters);
    {
      rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
      ASSERT_NE(m, nullptr);
      ASSERT_NE(rte_pktmbuf_append(m, kFrameBytes), nullptr);
      ASSERT_EQ(dev.Xmit({&m, 1}, Handover::kXmitMore, /*from_qdisc=*/true, Now()).accepted, 1);
      driver.to_complete = 1;
      driver.next_capacity = driver.capacity;
      (void)dev.Complete(1);
      ASSERT_EQ(dev.bql_limit(), 3000u);
      driver.calls.clear();
    }
    const uint64_t doorbells = driver.counters().doorbells.Get();
    const uint64_t stops = counters.bql_stops.Get();
    std::array<rte_mbuf*, 5> frames;
    for (rte_mbuf*& m : frames) {
      m = rte_pktmbuf_alloc(test::Pool());
      ASSERT_NE(m, nullptr);
      ASSERT_NE(rte_pktmbuf_append(m, kFrameBytes), nullptr);
    }
    const XmitResult x = dev.Xmit(frames, Handover::kXmitMore, /*from_qdisc=*/true, Now());
    const uint16_t accepted = x.accepted;
    EXPECT_EQ(accepted, k.accepted);
    std::vector<bool> more;
    for (const auto& c : driver.calls) more.push_back(c.more);
    EXPECT_EQ(more, k.more);
    EXPECT_EQ(driver.counters().doorbells.Get() - doorbells, k.doorbells);
    EXPECT_TRUE(x.stopped_now);
    EXPECT_EQ(counters.bql_stops.Get() - stops, 1u);
    rte_pktmbuf_free_bulk(frames.data() + accepted, frames.size() - accepted);
    // And a stopped queue refuses a qdisc's bulk without calling the driver
    // (sch_direct_xmit's netif_xmit_frozen_or_stopped under HARD_TX_LOCK).
    driver.calls.clear();
    rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
    ASSERT_NE(m, nullptr);
    const XmitResult refused = dev.Xmit({&m, 1}, Handover::kXmitMore, /*from_qdisc=*/true, Now());
    EXPECT_EQ(refused.accepted, 0);
    EXPECT_FALSE(refused.offered);
    EXPECT_TRUE(driver.calls.empty());
    rte_pktmbuf_free(m);
  }
}

TEST_P(PolicyRun, CountNTakesRequeuedFramesFirstThenTheBandsInOneCall) {
  Rig rig(GetParam(), "count:8");
  rig.Queue(20);
  rig.Irq(1, 5, 0);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({8}));  // 5 accepted, 3 requeued
  rig.Irq(2, 5, 5);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({8}));  // 3 requeued + 5 from the band
  for (const auto& c : rig.driver.calls) EXPECT_FALSE(c.one);
}

TEST_P(PolicyRun, Blist2007OffersNoMoreThanTheFreeSlots) {
  Rig rig(GetParam(), "blist-2007");
  rig.Queue(30);
  rig.Irq(1, 10, 0);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({10}));
  rig.Irq(2, 10, 7);  // 7 slots free
  EXPECT_EQ(rig.driver.Handovers(), Sizes({7}));
  rig.Irq(3, 10, 10);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({10}));
  EXPECT_EQ(rig.queue->counters().requeues.Get(), 0u);
  for (const auto& c : rig.driver.calls) EXPECT_EQ(c.offered, c.accepted);
}

// The simulation's queue stepped by hand, with free locks: two producers and the txirq. The
// scripts enqueue and dequeue every frame unless `bypass` says a frame that finds the qdisc
// empty and idle goes straight to the driver.
struct SimRig {
  explicit SimRig(const char* policy_text, bool bypass = false)
      : policy(MakeFlushPolicy(*ParsePolicySpec(policy_text), 1e9)),
        cfg([bypass] {
          TxQueueConfig c;
          c.tsc_hz = 1e9;
          c.track_stages = false;
          c.bypass = bypass;
          return c;
        }()),
        cpu{cycles, window},
        q(driver, nullptr, *policy, cfg, cpu, clock) {
    for (SimActor* a : {&p1, &p2}) {
      a->step = a->home = SimStep::kBuild;
      a->q = &q;
      a->t = 1;
    }
    irq.role = SimRole::kIrq;
    irq.step = irq.home = SimStep::kIrq;
    irq.q = &q;
    irq.t = 1;
    q.Attach(&irq, nullptr);
  }
  ~SimRig() {
    q.Purge();
    driver.Purge();
  }
  static rte_mbuf* Frame() {
    rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
    EXPECT_NE(m, nullptr);
    EXPECT_NE(rte_pktmbuf_append(m, kFrameBytes), nullptr);
    return m;
  }
  // Steps the run `a` is in to its end.
  void Finish(SimActor& a) {
    for (int i = 0; a.step != a.home && i < 1000; ++i) q.StepRun(a);
    EXPECT_EQ(a.step, a.home);
  }
  ScriptedDriver driver{/*bql=*/false};
  std::unique_ptr<FlushPolicy> policy;
  TxQueueConfig cfg;
  RunWindow window;
  SimCycles cycles;
  VirtualClock clock;
  SimCpu cpu;
  SimQueue q;
  SimActor p1, p2, irq;
};

// The interleaving the real queues get from threads, stepped by hand on the simulation's queue:
// the txirq asks for a reschedule while a producer's run is in its driver call, and that call
// fills the ring. The run must see the stopped queue and end, as RootlockTxQueue::Run does (it
// reads the queue once more after clearing resched_pending), not offer the full ring a bulk
// (the simulation's own copy of the run did: it went on to dequeue whenever a restart was
// pending, stopped or not).
TEST(SimQueueRun, ARescheduleDuringARunDoesNotMakeItOfferAStoppedQueue) {
  SimRig rig("count:4");
  auto [driver, q, p1, p2, irq] = std::tie(rig.driver, rig.q, rig.p1, rig.p2, rig.irq);
  driver.next_capacity = 4;  // the ring opens with 4 slots
  q.Complete(irq, false);
  for (int i = 0; i < 3; ++i) {  // three frames go out, one slot is left
    ASSERT_EQ(q.Enqueue(p1, SimRig::Frame(), 1, false), SimQueue::Put::kDone);
    rig.Finish(p1);
  }
  ASSERT_EQ(driver.FreeSlots(), 1u);
  // p1's run dequeued its frame under the enqueue's hold of the root lock and is about to call
  // the driver.
  ASSERT_EQ(q.Enqueue(p1, SimRig::Frame(), 1, false), SimQueue::Put::kDone);
  ASSERT_EQ(p1.step, SimStep::kXmit);
  for (int i = 0; i < 3; ++i) {  // p2 enqueues meanwhile (p1 runs the qdisc)
    ASSERT_EQ(q.Enqueue(p2, SimRig::Frame(), 1, false), SimQueue::Put::kDone);
    ASSERT_EQ(p2.step, SimStep::kBuild) << "a producer that finds the qdisc running only enqueues";
  }
  // A run spent its quota: the txirq reschedules, and finds p1 running: a restart is pending.
  q.Complete(irq, /*resched=*/true);
  EXPECT_EQ(irq.step, SimStep::kIrq);
  driver.calls.clear();
  rig.Finish(p1);  // the driver call fills the ring; the run sees it stopped
  ASSERT_EQ(driver.calls.size(), 1u);
  EXPECT_EQ(driver.calls[0].accepted, 1);
  EXPECT_EQ(q.counters().requeues.Get(), 0u) << "a stopped queue was offered a bulk";
  EXPECT_EQ(q.qdisc().backlog(), 3u);
  driver.next_capacity = 4;
  driver.to_complete = 4;
  driver.calls.clear();
  q.Complete(irq, false);  // the ring empties: the txirq runs the qdisc, which sends the three
  rig.Finish(irq);
  EXPECT_EQ(driver.Handovers(), Sizes({3}));
  EXPECT_TRUE(q.qdisc().empty());
}

// A SimRig's queue with a dedicated runner on CPU 1, asleep in its poll since 0; p1 on CPU 0,
// p2 on CPU 1; the ring open.
struct DedicatedSimRig {
  explicit DedicatedSimRig(const char* policy_text, std::vector<int> flow_cpus = {})
      : rig(policy_text),
        q(rig.driver, nullptr, *rig.policy, Dedicated(rig.cfg), rig.cpu, rig.clock) {
    runner.role = SimRole::kRunner;
    runner.q = &q;
    runner.cpu = 1;
    runner.step = runner.home = SimStep::kPoll;
    runner.t = kNever;
    rig.p1.q = rig.p2.q = rig.irq.q = &q;
    rig.p1.cpu = 0;
    rig.p2.cpu = 1;
    rig.driver.next_capacity = 64;
    q.Complete(rig.irq, false);  // the ring opens (before the runner is there to be woken)
    q.Attach(&rig.irq, &runner, std::move(flow_cpus));
  }
  ~DedicatedSimRig() { q.Purge(); }
  static const TxQueueConfig& Dedicated(TxQueueConfig& c) {
    c.shape.dedicated = true;
    return c;
  }
  SimRig rig;
  SimQueue q;
  SimActor runner;
};

// A dedicated runner woken by one producer's notify is on its way until it runs: the next
// producer's notify (RootlockTxQueue::Send's, runner_idle_ still set) finds no one to wake but
// still takes the condition variable's internal lock, whose line the first notifier wrote on
// the other CPU (glibc's pthread_cond_signal goes on while __wrefs counts the waiter). It cost
// nothing before.
TEST(SimQueueRun, ANotifyToARunnerOnItsWayCostsTheConditionVariablesLock) {
  const auto second_enqueue = [](bool runner_asleep) {
    DedicatedSimRig d("count:32");
    auto [rig, q, runner] = std::tie(d.rig, d.q, d.runner);
    rig.cycles.lock = 100;
    rig.cycles.lock_contended = 1000;
    rig.cycles.futex = 5000;
    rig.cycles.wakeup = 100'000;  // the runner is on its way this long
    if (!runner_asleep) {
      runner.step = runner.home = SimStep::kDequeue;
      runner.t = 1'000'000;
    }
    rig.p1.t = rig.p1.ran_to = 10'000;  // the runner's wait began at 0: its futex call is over
    EXPECT_EQ(q.Enqueue(rig.p1, SimRig::Frame(), 1, false), SimQueue::Put::kDone);
    EXPECT_EQ(runner.signalled != kNever, runner_asleep);
    rig.p2.t = rig.p2.ran_to = rig.p1.t;
    const Tsc t0 = rig.p2.t;
    EXPECT_EQ(q.Enqueue(rig.p2, SimRig::Frame(), 1, false), SimQueue::Put::kDone);
    EXPECT_LT(rig.p2.t, runner.t) << "the runner had not run yet";
    return rig.p2.t - t0;
  };
  EXPECT_EQ(second_enqueue(true) - second_enqueue(false), Tsc{100 + 1000});
}

// A dedicated runner's bulk of frames another CPU built: its dequeue, under the root lock, pays
// the bulk's handover_bulk and half of each frame's handover (reading its length, the first
// line); the other half (MarkHandover's write of its TxMeta, the second line) is a step of its
// own before the TX lock. All of it under the root lock held that lock 4-5 thousand cycles a
// bulk of 20 and put the producer to sleep in it after most bulks.
TEST(SimQueueRun, AFramesHandoverIsHalfUnderTheRootLock) {
  DedicatedSimRig d("count:32", /*flow_cpus=*/{0});
  auto [rig, q, runner] = std::tie(d.rig, d.q, d.runner);
  rig.cycles.handover = 1000;
  rig.cycles.handover_bulk = 300;
  runner.t = runner.ran_to = 1'000'000;
  FrameBuilder flow0(Proto::kUdp, 0, /*track_stages=*/false);
  for (int i = 0; i < 4; ++i) {
    rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
    ASSERT_NE(m, nullptr);
    flow0.Build(m, 18, 0);
    ASSERT_EQ(q.Enqueue(rig.p1, m, 1, false), SimQueue::Put::kDone);
  }
  q.Poll(runner, false);
  ASSERT_EQ(runner.step, SimStep::kDequeue);
  const Tsc before_dequeue = runner.t;
  q.StepRun(runner);
  ASSERT_EQ(runner.step, SimStep::kXmit);
  const Tsc dequeue = runner.t - before_dequeue;
  const Tsc before_mark = runner.t;
  q.StepRun(runner);
  EXPECT_EQ(runner.t - before_mark, Tsc{4 * 500}) << "the TxMeta writes, before the TX lock";
  EXPECT_TRUE(rig.driver.calls.empty());
  EXPECT_EQ(dequeue, Tsc{300 + 4 * 500}) << "the bulk's and half the frames' (the rig's other "
                                            "costs are 0)";
  q.StepRun(runner);  // the driver call
  EXPECT_EQ(rig.driver.calls.size(), 1u);
  rig.Finish(runner);
}

// The runner's wait writes its condition variable's line before it sleeps: where that takes it
// past its buffer's deadline it does not sleep but looks again at once. (Its sleep was decided
// from the time before the line, and it woke before its own step had ended: that CPU time was
// counted twice and a timer paid that never ran, found by review.)
TEST(SimQueueRun, ARunnerWhoseWaitPassesItsDeadlineDoesNotSleep) {
  DedicatedSimRig d("buffer:8:10");  // 10 us: 10,000 cycles at the rig's 1 GHz
  auto [rig, q, runner] = std::tie(d.rig, d.q, d.runner);
  rig.cycles.lock_contended = 1000;
  rig.p1.t = rig.p1.ran_to = 100'000;
  ASSERT_EQ(q.Enqueue(rig.p1, SimRig::Frame(), 1, false), SimQueue::Put::kDone);  // wakes it
  ASSERT_NE(runner.t, kNever);
  // It polls 10 cycles before the frame's deadline (first enqueued at 100,000, 10,000 to wait):
  // one frame of 8, not yet due; its wait's line (the producer's notify wrote it) takes 1000.
  runner.t = runner.ran_to = 100'000 + 10'000 - 10;
  q.Poll(runner, false);
  EXPECT_EQ(runner.t, runner.ran_to) << "asleep past its deadline";
  EXPECT_EQ(runner.timer, kNever);
  EXPECT_EQ(runner.step, SimStep::kPoll);
  q.Poll(runner, false);  // at once: the buffer's timer
  EXPECT_EQ(runner.step, SimStep::kDequeue);
}

// buffer:N under a dedicated runner: every bulk is one the buffer lets go. With 11 frames queued
// the run sends 8 and ends; the 3 left wait for 5 more, then go as a bulk of 8. The run went on
// to the 3 (the frames producers enqueued during its driver call): posts of 1..16 between the
// 32s under buffer:32 in the VM lab's soft-RoCE cases.
TEST(SimQueueRun, ADedicatedRunnersBulksAreAllFullUnderBufferN) {
  DedicatedSimRig d("buffer:8");
  // References, not structured bindings: clang 14 (the ASan build) refuses to capture a binding
  // in the lambda below.
  SimRig& rig = d.rig;
  SimQueue& q = d.q;
  SimActor& runner = d.runner;
  runner.t = runner.ran_to = 1'000'000;
  const auto finish = [&] {  // the runner's run to its end (SimRig::Finish steps rig.q's)
    for (int i = 0; runner.step != runner.home && i < 1000; ++i) q.StepRun(runner);
    ASSERT_EQ(runner.step, runner.home);
  };
  for (int i = 0; i < 11; ++i)
    ASSERT_EQ(q.Enqueue(rig.p1, SimRig::Frame(), 1, false), SimQueue::Put::kDone);
  q.Poll(runner, false);
  ASSERT_EQ(runner.step, SimStep::kDequeue);
  finish();
  EXPECT_EQ(rig.driver.Handovers(), Sizes({8}));
  EXPECT_EQ(q.qdisc().backlog(), 3u);
  q.Poll(runner, false);
  EXPECT_EQ(runner.step, SimStep::kPoll) << "3 of 8: the buffer holds them";
  rig.p1.t = rig.p1.ran_to = runner.t + 1'000'000;  // after the run let the root lock go
  for (int i = 0; i < 5; ++i)
    ASSERT_EQ(q.Enqueue(rig.p1, SimRig::Frame(), 1, false), SimQueue::Put::kDone);
  runner.t = runner.ran_to = rig.p1.t;
  q.Poll(runner, false);
  ASSERT_EQ(runner.step, SimStep::kDequeue);
  finish();
  EXPECT_EQ(rig.driver.Handovers(), Sizes({8, 8}));
  EXPECT_TRUE(q.qdisc().empty());
}

// The txirq reads the driver's next completion under the TX lock, as IrqLoop does before each
// sleep: while a run's driver call holds the lock it sleeps in it, and reads once woken.
TEST(SimQueueRun, TheTxirqReadsItsNextCompletionUnderTheTxLock) {
  SimRig rig("count:4");
  rig.cycles.xmit_frame = 1000;  // the driver call holds the TX lock this long
  auto [driver, q, p1, irq] = std::tie(rig.driver, rig.q, rig.p1, rig.irq);
  p1.cpu = irq.cpu = 0;  // the txirq preempted the run: its holder not running, it sleeps
  driver.next_capacity = 64;
  q.Complete(irq, false);
  ASSERT_EQ(q.Enqueue(p1, SimRig::Frame(), 1, false), SimQueue::Put::kDone);
  ASSERT_EQ(p1.step, SimStep::kXmit);
  const Tsc call = p1.t;
  q.StepRun(p1);  // the driver call: the TX lock held from `call` to its end
  ASSERT_GE(p1.t, call + 1000);
  irq.t = irq.ran_to = call + 10;
  EXPECT_FALSE(q.NextCompletion(irq).has_value());
  EXPECT_TRUE(irq.lock_wait);
  EXPECT_GE(irq.t, p1.t) << "woken by the lock's release";
  irq.lock_wait = false;
  irq.ran_to = irq.t;
  EXPECT_TRUE(q.NextCompletion(irq).has_value());
  rig.Finish(p1);
}

// A txirq that finds the TX lock held sleeps in it and gives back the reschedule it took
// (Simulation::Irq): that kick of its own wakes nobody. It charged the sleeping txirq a futex
// call of nothing, which moved where its last step ended to its wake-up (or to kNever).
TEST(SimQueueRun, ATxirqAsleepInTheTxLockDoesNotWakeItself) {
  SimRig rig("count:4");
  rig.cycles.xmit_frame = 1000;
  auto [driver, q, p1, irq] = std::tie(rig.driver, rig.q, rig.p1, rig.irq);
  p1.cpu = irq.cpu = 0;  // the txirq preempted the run: it sleeps in the TX lock
  driver.next_capacity = 64;
  q.Complete(irq, false);
  ASSERT_EQ(q.Enqueue(p1, SimRig::Frame(), 1, false), SimQueue::Put::kDone);
  const Tsc call = p1.t;
  q.StepRun(p1);  // the driver call holds the TX lock
  irq.t = irq.ran_to = call + 10;
  ASSERT_FALSE(q.Complete(irq, /*resched=*/true));
  const Tsc slept_at = irq.ran_to, woken_at = irq.t;
  q.Kick(irq, /*resched=*/true);
  EXPECT_EQ(irq.ran_to, slept_at);
  EXPECT_EQ(irq.t, woken_at);
  EXPECT_TRUE(q.kicked());
  rig.Finish(p1);
}

// An abandoned simulation frees what its queue holds: between a driver call that took part of
// the bulk and the requeue of the rest, only the refused frames are the queue's (the accepted
// are in the driver's ring and go with its Purge). Freeing the whole bulk freed those twice.
TEST(SimQueueRun, PurgeBetweenTheDriverCallAndTheRequeueFreesEveryFrameOnce) {
  SimRig rig("count:8");
  auto [driver, q, p, irq] = std::tie(rig.driver, rig.q, rig.p1, rig.irq);
  const unsigned in_use = rte_mempool_in_use_count(test::Pool());
  for (int i = 0; i < 12; ++i) {  // the ring is closed: every run ends at once
    ASSERT_EQ(q.Enqueue(p, SimRig::Frame(), 1, false), SimQueue::Put::kDone);
    rig.Finish(p);
  }
  driver.next_capacity = 5;
  q.Complete(irq, false);  // 5 slots: the txirq's run dequeues 8
  ASSERT_EQ(irq.step, SimStep::kDequeue);
  q.StepRun(irq);
  q.StepRun(irq);  // the driver took 5 of the 8; 3 wait to be requeued
  ASSERT_EQ(irq.step, SimStep::kRequeue);
  ASSERT_EQ(driver.InFlight(), 5u);
  EXPECT_EQ(q.Purge(), 12u) << "5 in the ring, 3 refused in hand, 4 queued";
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), in_use);
}

INSTANTIATE_TEST_SUITE_P(Engines, PolicyRun,
                         ::testing::Values(Engine::kRootlock, Engine::kNolock, Engine::kSim,
                                           Engine::kSimNolock),
                         [](const auto& info) {
                           return kEngineNames[static_cast<size_t>(info.param)];
                         });

// The empty-qdisc bypass on the simulation's queue: a frame that finds the qdisc empty and idle
// is the run's first bulk (no enqueue, no dequeue); one that comes while that run is in its
// driver call is enqueued and goes in the same run's next bulk.
TEST(SimQueueRun, AFrameThatFindsTheQdiscEmptyAndIdleGoesStraightToTheDriver) {
  SimRig rig("count:4", /*bypass=*/true);
  auto [driver, q, p1, p2, irq] = std::tie(rig.driver, rig.q, rig.p1, rig.p2, rig.irq);
  driver.next_capacity = 64;  // the ring opens with 64 slots
  q.Complete(irq, false);
  ASSERT_EQ(q.Enqueue(p1, SimRig::Frame(), 1, false), SimQueue::Put::kDone);
  EXPECT_EQ(p1.step, SimStep::kXmit) << "the frame went into the qdisc";
  EXPECT_TRUE(q.qdisc().empty());
  EXPECT_EQ(q.counters().bypassed.Get(), 1u);
  ASSERT_EQ(q.Enqueue(p2, SimRig::Frame(), 1, false),
            SimQueue::Put::kDone);  // p1's run holds the qdisc: queued
  EXPECT_EQ(q.qdisc().backlog(), 1u);
  EXPECT_EQ(q.counters().bypassed.Get(), 1u);
  rig.Finish(p1);
  EXPECT_EQ(driver.Handovers(), Sizes({1, 1}));
  EXPECT_EQ(q.counters().runs.Get(), 1u);
  EXPECT_TRUE(q.qdisc().empty());
  // Without it, the same two frames are enqueued and dequeued: the run's first dequeue under the
  // enqueue's hold of the root lock (__dev_xmit_skb), so the same run and the same calls.
  SimRig off("count:4");
  off.driver.next_capacity = 64;
  off.q.Complete(off.irq, false);
  ASSERT_EQ(off.q.Enqueue(off.p1, SimRig::Frame(), 1, false), SimQueue::Put::kDone);
  EXPECT_EQ(off.p1.step, SimStep::kXmit);
  ASSERT_EQ(off.q.Enqueue(off.p2, SimRig::Frame(), 1, false), SimQueue::Put::kDone);
  EXPECT_EQ(off.q.qdisc().backlog(), 1u);
  off.Finish(off.p1);
  EXPECT_EQ(off.driver.Handovers(), Sizes({1, 1}));
  EXPECT_EQ(off.q.counters().bypassed.Get(), 0u);
}

}  // namespace
}  // namespace txbatch
