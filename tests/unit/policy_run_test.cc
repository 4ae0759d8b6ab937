// The batching policies as the runner applies them, on a scripted driver and a virtual clock:
// the test decides when the ring has room and what completes (it plays the txirq through the
// queue's completion step; no thread runs), and reads back every driver call — how many frames
// each handover carried, which were marked xmit_more, how many doorbells rang.
//
// Every case runs on the three places a qdisc is run (QdiscRun, dataplane/qdisc_run.h): the
// root-locked queue, the lock-free queue (--sync nolock) and the simulation's queue
// (engine/sim_queue.h, stepped by its actors). A pfifo case runs root-locked on the nolock row
// too, as txbatch runs it (MakeTxQueue: tc's pfifo has no TCQ_F_NOLOCK here).
#include <gtest/gtest.h>

#include <array>
#include <deque>
#include <memory>
#include <tuple>
#include <vector>

#include "batching/flush_policy.h"
#include "dataplane/run_window.h"
#include "dataplane/tx_queue.h"
#include "engine/sim_queue.h"
#include "tests/unit/test_eal.h"

namespace txbatch {
namespace {

constexpr uint32_t kFrameBytes = 1000;

// A driver whose ring room and completions the test scripts. Counts a doorbell per Xmit call
// and per xmit_more chain (rung on the last frame, or when the ring fills), as a driver that
// honours xmit_more does.
class ScriptedDriver final : public TxDriver {
 public:
  struct Call {
    uint16_t offered;
    uint16_t accepted;
    bool one;   // XmitOne (else Xmit)
    bool more;  // XmitOne's xmit_more
  };

  explicit ScriptedDriver(bool bql) : bql_(bql) {}
  ~ScriptedDriver() override { Purge(); }

  uint16_t Xmit(std::span<rte_mbuf* const> frames) override {
    const auto n = static_cast<uint16_t>(std::min<size_t>(frames.size(), FreeSlots()));
    Take(frames.first(n));
    calls.push_back({static_cast<uint16_t>(frames.size()), n, false, false});
    if (n > 0) counters_.doorbells.Add();
    return n;
  }
  bool XmitOne(rte_mbuf* m, bool more) override {
    const bool ok = FreeSlots() > 0;
    if (ok) Take({&m, 1});
    calls.push_back({1, static_cast<uint16_t>(ok), true, more});
    if (ok) unrung_ = true;
    if (unrung_ && (!more || FreeSlots() == 0)) {
      counters_.doorbells.Add();
      unrung_ = false;
    }
    return ok;
  }
  unsigned FreeSlots() const override { return capacity - static_cast<unsigned>(ring_.size()); }
  bool has_bql() const override { return bql_; }
  bool Stopped() const override { return FreeSlots() == 0; }
  // The ring gets the room the test scripted, and the `to_complete` oldest frames complete.
  unsigned Complete(Tsc) override {
    capacity = next_capacity;
    unsigned n = 0;
    for (; to_complete > 0 && !ring_.empty(); --to_complete, ++n) {
      counters_.completed_bytes.Add(rte_pktmbuf_pkt_len(ring_.front()));
      rte_pktmbuf_free(ring_.front());
      ring_.pop_front();
    }
    return n;
  }
  Tsc NextCompletion() const override { return kNever; }
  unsigned InFlight() const override { return static_cast<unsigned>(ring_.size()); }
  unsigned Purge() override {
    const auto n = static_cast<unsigned>(ring_.size());
    for (rte_mbuf* m : ring_) rte_pktmbuf_free(m);
    ring_.clear();
    return n;
  }
  std::optional<WireSpec> Wire() const override { return std::nullopt; }
  CountedAt counted_at() const override { return CountedAt::kDriver; }
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
  std::vector<Call> calls;

 private:
  void Take(std::span<rte_mbuf* const> frames) {
    for (rte_mbuf* m : frames) ring_.push_back(m);
    counters_.accepted.Add(frames.size());
  }
  bool bql_;
  bool unrung_ = false;
  std::deque<rte_mbuf*> ring_;
};

enum class Engine { kRootlock, kNolock, kSim };

// A queue as a case plays it: a producer's send, and the txirq's work at a virtual time.
class PlayedQueue {
 public:
  virtual ~PlayedQueue() = default;
  virtual bool Send(rte_mbuf* m, int band) = 0;
  virtual void Completion(Tsc now, bool resched) = 0;
  virtual const TxQueueCounters& counters() const = 0;
  virtual std::optional<uint32_t> bql_limit() = 0;
  virtual unsigned Purge() = 0;
};

class RealQueue final : public PlayedQueue {
 public:
  RealQueue(TxDriver& driver, const FlushPolicy& policy, const TxQueueConfig& cfg,
            const RunWindow& window)
      : q_(MakeTxQueue(driver, policy, cfg, window)) {}
  bool Send(rte_mbuf* m, int band) override { return q_->Send(m, band); }
  void Completion(Tsc now, bool resched) override { q_->Completion(now, resched); }
  const TxQueueCounters& counters() const override { return q_->counters(); }
  std::optional<uint32_t> bql_limit() override { return q_->bql_limit(); }
  unsigned Purge() override { return q_->Purge(); }

 private:
  std::unique_ptr<TxQueue> q_;
};

// The simulation's queue with free locks (no costs): a producer actor and the txirq actor, each
// stepped through the run it begins until it is back home.
class SimulatedQueue final : public PlayedQueue {
 public:
  SimulatedQueue(TxDriver& driver, const FlushPolicy& policy, const TxQueueConfig& cfg,
                 const RunWindow& window)
      : cpu_{cycles_, window}, q_(driver, nullptr, policy, cfg, cpu_, clock_) {
    producer_.role = SimRole::kProducer;
    producer_.step = producer_.home = SimStep::kBuild;
    producer_.q = &q_;
    irq_.role = SimRole::kIrq;
    irq_.step = irq_.home = SimStep::kIrq;
    irq_.q = &q_;
    q_.Attach(&irq_, nullptr);
  }
  bool Send(rte_mbuf* m, int band) override {
    producer_.t = clock_.now;
    if (!q_.Enqueue(producer_, m, band, false)) {
      rte_pktmbuf_free(m);
      return false;
    }
    Finish(producer_);
    return true;
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
  unsigned Purge() override { return q_.Purge(); }

 private:
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
  SimActor producer_, irq_;
};

constexpr std::array<const char*, 3> kEngineNames = {"rootlock", "nolock", "sim"};

struct Rig {
  Rig(Engine engine, const char* policy_text, bool pfifo = false, BqlBounds bql = {},
      bool driver_bql = true)
      : driver(driver_bql) {
    auto spec = ParsePolicySpec(policy_text);
    EXPECT_TRUE(spec.ok()) << policy_text;
    policy = MakeFlushPolicy(*spec, 1e9);
    TxQueueConfig cfg;
    cfg.tsc_hz = 1e9;  // the virtual clock ticks in ns
    cfg.track_stages = false;
    cfg.shape.pfifo = pfifo;
    cfg.shape.nolock = engine == Engine::kNolock;
    cfg.bql = bql;
    if (engine == Engine::kSim)
      queue = std::make_unique<SimulatedQueue>(driver, *policy, cfg, window);
    else
      queue = std::make_unique<RealQueue>(driver, *policy, cfg, window);
  }
  ~Rig() {
    driver.Purge();
    queue->Purge();
  }
  // Queues `n` frames of kFrameBytes while the ring is closed (nothing is sent: the queue is
  // stopped).
  void Queue(unsigned n) {
    for (unsigned i = 0; i < n; ++i) {
      rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
      ASSERT_NE(m, nullptr);
      ASSERT_NE(rte_pktmbuf_append(m, kFrameBytes), nullptr);
      ASSERT_TRUE(queue->Send(m, kProducerBandForTest));
    }
  }
  // The txirq's work at `now`: `complete` frames complete and the ring has `capacity` slots.
  void Irq(Tsc now, unsigned capacity, unsigned complete, bool resched = false) {
    driver.next_capacity = capacity;
    driver.to_complete = complete;
    driver.calls.clear();
    queue->Completion(now, resched);
  }
  static constexpr int kProducerBandForTest = 1;
  RunWindow window;
  ScriptedDriver driver;
  std::unique_ptr<FlushPolicy> policy;
  std::unique_ptr<PlayedQueue> queue;
};

class PolicyRun : public ::testing::TestWithParam<Engine> {};

using Sizes = std::vector<uint16_t>;

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
  // Past the hold time the lowest slack seen is given back, and the bulks shrink with it.
  rig.Irq(t + 200, 512, 1);
  const uint32_t shrunk = *rig.queue->bql_limit();
  EXPECT_LT(shrunk, grown);
  rig.Irq(t + 201, 512, 512);  // everything out: the next bulks are bounded by the new limit
  for (uint16_t n : rig.driver.Handovers())
    EXPECT_LE(n, shrunk / kFrameBytes + 1) << "limit " << shrunk;
}

TEST_P(PolicyRun, Linux2014SlowPathTakesTheFirstFrameAndEightMoreWithOneDoorbellEach) {
  Rig rig(GetParam(), "linux-2014", /*pfifo=*/true, BqlBounds{}, /*driver_bql=*/false);
  rig.Queue(30);
  rig.Irq(1, 512, 0);
  EXPECT_EQ(rig.driver.Handovers(), Sizes({9, 9, 9, 3}));
  int doorbells = 0, unmarked = 0;
  for (const auto& c : rig.driver.calls) {
    EXPECT_TRUE(c.one) << "one driver call per frame";
    unmarked += !c.more;
  }
  doorbells = static_cast<int>(rig.driver.counters().doorbells.Get());
  EXPECT_EQ(unmarked, 4) << "xmit_more on all but the last frame of each bulk";
  EXPECT_EQ(doorbells, 4);  // one per bulk
}

TEST_P(PolicyRun, WithoutBqlTheFastPathDoesNotBulk) {
  Rig rig(GetParam(), "linux-2014", false, BqlBounds{}, /*driver_bql=*/false);
  rig.Queue(10);
  rig.Irq(1, 512, 0);
  EXPECT_EQ(rig.driver.Handovers(), Sizes(10, 1));  // bytelimit 0 - len: the first frame alone
}

// Deep BQL: a fixed 1 MB limit never bounds a bulk here.
constexpr BqlBounds kDeepBql{1'000'000, 1'000'000, 1.0};

TEST_P(PolicyRun, TheQuotaEndsARunThatTheTxirqReschedules) {
  Rig r2014(GetParam(), "linux-2014", false, kDeepBql);
  r2014.Queue(100);
  r2014.Irq(1, 512, 0);
  EXPECT_EQ(r2014.driver.Handovers(), Sizes({100}));  // only BQL bounds a 2014 bulk: quota overshot
  Rig r2025(GetParam(), "linux-2025", false, kDeepBql);
  r2025.Queue(100);
  r2025.Irq(1, 512, 0);
  EXPECT_EQ(r2025.driver.Handovers(), Sizes({64}));  // capped by the quota; the run yields
  const uint64_t before = r2025.queue->counters().reschedules.Get();
  r2025.Irq(2, 512, 0, /*resched=*/true);  // __netif_schedule: the softirq runs it again
  EXPECT_EQ(r2025.driver.Handovers(), Sizes({36}));
  EXPECT_EQ(r2025.queue->counters().reschedules.Get(), before + 1);
}

TEST(PolicyBudget, Linux2025CapsEachBulkByTheQuotaLeft) {
  const auto policy = MakeFlushPolicy(*ParsePolicySpec("linux-2025"), 1e9);
  DequeueContext ctx;
  ctx.has_bql = true;
  ctx.bql_avail = 1'000'000;
  ctx.quota_left = 64 - 40;  // after a 40-frame bulk
  EXPECT_EQ(policy->Budget(ctx).frames, 24);
  const auto old = MakeFlushPolicy(*ParsePolicySpec("linux-2014"), 1e9);
  EXPECT_EQ(old->Budget(ctx).frames, kMaxBatch);
  EXPECT_EQ(old->Budget(ctx).bytes, 1'000'000);
  EXPECT_EQ(old->Budget(ctx).handover, Handover::kXmitMore);
}

TEST_P(PolicyRun, RequeuedFramesComeBackAsTheirListIn2014AndAloneIn2025) {
  Rig r2014(GetParam(), "linux-2014", false, kDeepBql);
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
  EXPECT_LT(r2025.queue->counters().requeued_frames.Get(),
            r2014.queue->counters().requeued_frames.Get());
}

TEST_P(PolicyRun, AFrameThatStopsTheQueueThroughBqlRingsTheDoorbell) {
  // Slow path (no byte bound) into a fixed 3000-byte limit: the 4th frame takes the queue over
  // it, so it goes without xmit_more and the chain ends; nothing is left unrung.
  Rig rig(GetParam(), "linux-2014", true, BqlBounds{3000, 3000, 1.0});
  rig.Queue(20);
  rig.Irq(1, 512, 0);
  ASSERT_GE(rig.driver.calls.size(), 4u);
  std::vector<bool> more;
  for (size_t i = 0; i < 4; ++i) more.push_back(rig.driver.calls[i].more);
  EXPECT_EQ(more, std::vector<bool>({true, true, true, false}));
  EXPECT_EQ(rig.driver.calls.size(), 4u);
  EXPECT_EQ(rig.queue->counters().requeued_frames.Get(), 5u);  // the rest of the 9
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
    ASSERT_TRUE(q.Enqueue(p1, SimRig::Frame(), 1, false));
    rig.Finish(p1);
  }
  ASSERT_EQ(driver.FreeSlots(), 1u);
  ASSERT_TRUE(q.Enqueue(p1, SimRig::Frame(), 1, false));
  q.StepRun(p1);  // p1's run dequeued its frame and is about to call the driver
  ASSERT_EQ(p1.step, SimStep::kXmit);
  for (int i = 0; i < 3; ++i) {  // p2 enqueues meanwhile (p1 runs the qdisc)
    ASSERT_TRUE(q.Enqueue(p2, SimRig::Frame(), 1, false));
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

// An abandoned simulation frees what its queue holds: between a driver call that took part of
// the bulk and the requeue of the rest, only the refused frames are the queue's (the accepted
// are in the driver's ring and go with its Purge). Freeing the whole bulk freed those twice.
TEST(SimQueueRun, PurgeBetweenTheDriverCallAndTheRequeueFreesEveryFrameOnce) {
  SimRig rig("count:8");
  auto [driver, q, p, irq] = std::tie(rig.driver, rig.q, rig.p1, rig.irq);
  const unsigned in_use = rte_mempool_in_use_count(test::Pool());
  for (int i = 0; i < 12; ++i) {  // the ring is closed: every run ends at once
    ASSERT_TRUE(q.Enqueue(p, SimRig::Frame(), 1, false));
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
                         ::testing::Values(Engine::kRootlock, Engine::kNolock, Engine::kSim),
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
  ASSERT_TRUE(q.Enqueue(p1, SimRig::Frame(), 1, false));
  EXPECT_EQ(p1.step, SimStep::kXmit) << "the frame went into the qdisc";
  EXPECT_TRUE(q.qdisc().empty());
  EXPECT_EQ(q.counters().bypassed.Get(), 1u);
  ASSERT_TRUE(q.Enqueue(p2, SimRig::Frame(), 1, false));  // p1's run holds the qdisc: queued
  EXPECT_EQ(q.qdisc().backlog(), 1u);
  EXPECT_EQ(q.counters().bypassed.Get(), 1u);
  rig.Finish(p1);
  EXPECT_EQ(driver.Handovers(), Sizes({1, 1}));
  EXPECT_EQ(q.counters().runs.Get(), 1u);
  EXPECT_TRUE(q.qdisc().empty());
  // Without it, the same two frames are enqueued and dequeued: the same run, the same calls.
  SimRig off("count:4");
  off.driver.next_capacity = 64;
  off.q.Complete(off.irq, false);
  ASSERT_TRUE(off.q.Enqueue(off.p1, SimRig::Frame(), 1, false));
  EXPECT_EQ(off.p1.step, SimStep::kDequeue);
  ASSERT_TRUE(off.q.Enqueue(off.p2, SimRig::Frame(), 1, false));
  off.Finish(off.p1);
  EXPECT_EQ(off.driver.Handovers(), Sizes({2}));
  EXPECT_EQ(off.q.counters().bypassed.Get(), 0u);
}

}  // namespace
}  // namespace txbatch
