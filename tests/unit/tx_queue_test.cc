// The queue's protocol (inline runner, stopped ring, txirq reschedules, drops) with the real emu
// NIC on a small ring, so that the ring stops often and every path runs.
#include "dataplane/tx_queue.h"

#include <gtest/gtest.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "batching/flush_policy.h"
#include "dataplane/frame.h"
#include "dataplane/make_queue.h"
#include "dataplane/producer.h"
#include "dataplane/rx_sink.h"
#include "drivers/emu/emu.h"
#include "engine/cell.h"
#include "tests/unit/gate.h"
#include "tests/unit/holding_driver.h"
#include "tests/unit/test_eal.h"

namespace txbatch {
namespace {

// Each qdisc synchronisation with each runner style.
struct Shape {
  bool nolock;
  bool dedicated;
};

struct Rig {
  Rig(Shape shape, const char* spec, unsigned txqueuelen, bool block, uint16_t batch) {
    auto o = emu::ParseEmuSpec(spec);
    EXPECT_TRUE(o.ok());
    nic = emu::CreateEmuDriver(*o, sink, window, test::TscHz());
    policy = MakeFlushPolicy({PolicyKind::kCount, batch}, test::TscHz());
    TxQueueConfig cfg;
    cfg.txqueuelen = txqueuelen;
    cfg.block_when_full = block;
    cfg.tsc_hz = test::TscHz();
    cfg.shape.nolock = shape.nolock;
    cfg.shape.dedicated = shape.dedicated;
    queue = MakeTxQueue(*nic, *policy, cfg, window);
  }
  // Waits (bounded) for the queue to drain; the bound is far above what the wire needs.
  bool WaitIdle() {
    for (int i = 0; i < 20000 && !queue->Idle(); ++i) SleepNs(100e3);
    return queue->Idle();
  }
  RunWindow window;
  RxSink sink{window, test::TscHz(), 8};
  std::unique_ptr<TxDriver> nic;
  std::unique_ptr<FlushPolicy> policy;
  std::unique_ptr<TxQueue> queue;
};

// Sends `frames` frames of flow `flow` through `queue`; returns how many were queued.
unsigned Produce(TxQueue& queue, uint16_t flow, unsigned frames) {
  FrameBuilder b(Proto::kUdp, flow);
  unsigned queued = 0;
  for (unsigned i = 0; i < frames; ++i) {
    rte_mbuf* m = nullptr;
    while ((m = rte_pktmbuf_alloc(test::Pool())) == nullptr) SleepNs(10e3);
    b.Build(m, 1000, Now());
    if (queue.Send(m, kProducerBand)) {
      ++queued;
    } else {
      b.Unbuild(1000);
    }
  }
  return queued;
}

// Producer threads joined within a deadline. A stream producer blocks on a full band until a run
// frees room: where frames are left in the qdisc that nothing runs (a lost reschedule), it waits
// forever and so would the case. Past the deadline the case fails with a sentence and the queue
// is aborted, which releases every blocked producer (each returns short of what it was asked).
class Producers {
 public:
  ~Producers() {
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }
  void Start(std::function<void()> produce) {
    threads_.emplace_back([this, produce = std::move(produce)] {
      produce();
      finished_.fetch_add(1);
    });
  }
  // Whether every producer finished within `deadline_s` (joined either way).
  bool JoinWithin(double deadline_s, TxQueue& queue) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(deadline_s);
    while (finished_.load() < threads_.size() && std::chrono::steady_clock::now() < until)
      SleepNs(1e6);
    const bool in_time = finished_.load() == threads_.size();
    if (!in_time) {
      ADD_FAILURE() << threads_.size() - finished_.load() << " of " << threads_.size()
                    << " producers were still blocked after " << deadline_s
                    << " s (the qdisc holds " << queue.backlog()
                    << " frames that no run sends): aborting the queue to release them";
      queue.Abort();
    }
    for (auto& t : threads_) t.join();
    return in_time;
  }

 private:
  std::vector<std::thread> threads_;
  std::atomic<size_t> finished_{0};
};

// `n` frames of flow 0 built by `b` into one batch (--qdisc none's own batches).
Batch BuiltBatch(FrameBuilder& b, unsigned n) {
  Batch batch;
  for (unsigned i = 0; i < n; ++i) {
    rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
    EXPECT_NE(m, nullptr);
    if (m == nullptr) break;
    b.Build(m, 100, Now());
    batch.Push(m);
  }
  return batch;
}

class TxQueueShape : public ::testing::TestWithParam<Shape> {};

INSTANTIATE_TEST_SUITE_P(SyncAndRunner, TxQueueShape,
                         ::testing::Values(Shape{false, false}, Shape{false, true},
                                           Shape{true, false}, Shape{true, true}),
                         [](const auto& info) {
                           return std::string(info.param.nolock ? "Nolock" : "Rootlock") +
                                  (info.param.dedicated ? "Dedicated" : "Inline");
                         });

TEST_P(TxQueueShape, StreamProducersDeliverEverythingInOrderThroughAStoppingRing) {
  Rig rig(GetParam(), "emu:e1000,ring=16,free_thresh=4,doorbell_ns=0,desc_ns=0", 32, true, 8);
  rig.queue->StartIrq();
  // Whose CPU time is the TX path's besides the producers (a run's cpu_ns_per_pkt): the txirq,
  // and a dedicated runner where there is one.
  EXPECT_EQ(rig.queue->service_threads().size(), GetParam().dedicated ? 2u : 1u);
  // Named for ps -L, top -H and perf, by themselves as they start: waited for (bounded).
  std::vector<std::string> names;
  for (int i = 0; i < 2000; ++i) {
    names.clear();
    for (const auto t : rig.queue->service_threads()) {
      char name[16] = {};
      pthread_getname_np(t, name, sizeof name);
      names.emplace_back(name);
    }
    if (std::all_of(names.begin(), names.end(),
                    [](const std::string& n) { return n.rfind("txb-", 0) == 0; }))
      break;
    SleepNs(1e6);
  }
  EXPECT_EQ(names.front(), "txb-txirq0");
  if (GetParam().dedicated) {
    EXPECT_EQ(names.back(), "txb-runner0");
  }
  Producers producers;
  for (uint16_t f = 0; f < 4; ++f)
    producers.Start([&, f] { EXPECT_EQ(Produce(*rig.queue, f, 500), 500u); });
  // 2000 frames of 1000 bytes at 1 Gb/s take 16 ms of wire: 20 s is scheduling's margin.
  if (!producers.JoinWithin(20, *rig.queue)) {
    rig.queue->StopIrq();
    rig.queue->Purge();
    rig.nic->Purge();
    return;
  }
  ASSERT_TRUE(rig.WaitIdle());
  rig.queue->StopIrq();
  EXPECT_TRUE(rig.queue->service_threads().empty());
  const SinkCounts c = rig.sink.counts();
  EXPECT_EQ(c.received, 2000u);
  EXPECT_EQ(c.lost, 0u);  // per-flow order kept through requeues
  EXPECT_EQ(c.duplicated, 0u);
  EXPECT_GT(rig.nic->counters().stops.Get(), 0u);  // the ring did stop ...
  if (!GetParam().dedicated) {  // ... and the txirq restarted it (or woke the dedicated runner)
    EXPECT_GT(rig.queue->counters().reschedules.Get(), 0u);
  }
  EXPECT_GT(rig.queue->counters().waits.Get(), 0u);  // producers blocked on the full band
  EXPECT_EQ(rig.queue->counters().dropped_qdisc_full.Get(), 0u);
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

TEST_P(TxQueueShape, DatagramProducersDropAndCountWhatDoesNotFit) {
  Rig rig(GetParam(), "emu:e1000,ring=16,free_thresh=4", 8, false, 32);
  rig.queue->StartIrq();
  unsigned queued = 0;
  std::thread other([&] { queued += Produce(*rig.queue, 1, 2000); });
  const unsigned mine = Produce(*rig.queue, 0, 2000);
  other.join();
  ASSERT_TRUE(rig.WaitIdle());
  rig.queue->StopIrq();
  const uint64_t dropped = rig.queue->counters().dropped_qdisc_full.Get();
  EXPECT_GT(dropped, 0u);
  EXPECT_EQ(mine + queued + dropped, 4000u);
  EXPECT_EQ(rig.sink.counts().received, mine + queued);
  EXPECT_EQ(rig.sink.counts().lost, 0u);  // dropped datagrams gave their sequence back
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

TEST_P(TxQueueShape, AbortReleasesBlockedProducersAndCountsWhatTheyHeld) {
  // No txirq: a stopped ring is never restarted, so the producer blocks on the full band.
  Rig rig(GetParam(), "emu:e1000,ring=8,free_thresh=8", 4, true, 1);
  unsigned queued = 0;
  std::thread producer([&] { queued = Produce(*rig.queue, 0, 100); });
  while (rig.queue->counters().waits.Get() == 0) SleepNs(100e3);
  rig.queue->Abort();
  producer.join();
  const uint64_t aborted = rig.queue->counters().dropped_aborted.Get();
  EXPECT_GT(aborted, 0u);
  EXPECT_EQ(queued + aborted, 100u);
  EXPECT_EQ(rig.queue->Purge() + rig.nic->Purge(), queued);
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

TEST(Books, BalanceOnlyWhenEveryFrameAndMbufIsAccountedFor) {
  Books k{.generated = 10,
          .sent = 7,
          .dropped = 2,
          .queued = 1,
          .received = 6,
          .lost = 0,
          .duplicated = 0,
          .in_flight = 1,
          .mbufs_in_use = 0,
          .link_lost = std::nullopt};
  EXPECT_TRUE(Balanced(k));
  Books lost_one = k;
  lost_one.received = 5;
  EXPECT_FALSE(Balanced(lost_one));
  Books leak = k;
  leak.mbufs_in_use = 1;
  EXPECT_FALSE(Balanced(leak));
  Books uncounted = k;
  uncounted.dropped = 1;
  EXPECT_FALSE(Balanced(uncounted));
}

using test::Gate;

// A driver that takes every frame and keeps it (never stops, never completes). Given a gate, it
// owns a doorbell and rings it, then stops at the gate inside Xmit before it counts the frames
// accepted: a verbs post between ibv_post_send and its books.
class KeepingDriver final : public test::HoldingDriver {
 public:
  explicit KeepingDriver(Gate* after_doorbell = nullptr) : after_doorbell_(after_doorbell) {}
  uint16_t XmitAt(std::span<rte_mbuf* const> frames, Tsc /*now*/) override {
    if (after_doorbell_ != nullptr) {
      counters_.doorbells.Add();
      after_doorbell_->Stop();
    }
    for (rte_mbuf* m : frames) held_.push_back(m);
    return static_cast<uint16_t>(frames.size());
  }
  bool Stopped() const override { return false; }
  unsigned Complete(Tsc) override { return 0; }
  bool owns_doorbell() const override { return after_doorbell_ != nullptr; }
  std::string Describe() const override { return "keeping"; }

 private:
  Gate* const after_doorbell_;
};

// count:1, except that the run-flag holder's second dequeue stops in Budget at the gate until
// the test releases it and then takes nothing: it stands in for the race the MISSED note is
// for, a holder whose last look found the qdisc empty while a producer's frame landed before it
// dropped the flag.
class GatedPolicy final : public FlushPolicy {
 public:
  GatedPolicy() : FlushPolicy({PolicyKind::kCount, 1}) {}
  DequeueBudget Budget(const DequeueContext&) const override {
    if (calls_.fetch_add(1) + 1 != 2) return {1};
    gate.Stop();
    return {0};
  }
  mutable Gate gate;

 private:
  mutable std::atomic<int> calls_{0};
};

rte_mbuf* SmallFrame() {
  rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
  if (m != nullptr && rte_pktmbuf_append(m, 100) == nullptr) {
    rte_pktmbuf_free(m);
    return nullptr;
  }
  return m;
}

TEST(NolockTxQueue, AFrameQueuedWhileTheHolderRunsGoesOutInThatRunWithoutAnotherRun) {
  RunWindow window;
  KeepingDriver driver;
  GatedPolicy policy;
  TxQueueConfig cfg;
  cfg.shape.nolock = true;
  cfg.tsc_hz = test::TscHz();
  cfg.track_stages = false;
  const auto queue = MakeTxQueue(driver, policy, cfg, window);
  rte_mbuf* first = SmallFrame();
  rte_mbuf* second = SmallFrame();
  ASSERT_TRUE(first != nullptr && second != nullptr);
  // The holder sends the first frame and stops in its next dequeue, holding the run flag.
  std::thread holder([&] { EXPECT_TRUE(queue->Send(first, kProducerBand)); });
  const bool in_gate = policy.gate.WaitArrived();
  EXPECT_TRUE(in_gate) << "the holder never reached its second dequeue";
  if (in_gate) {
    // This producer finds the flag taken: it only enqueues and leaves the note.
    EXPECT_TRUE(queue->Send(second, kProducerBand));
    EXPECT_EQ(queue->counters().missed.Get(), 1u);
    EXPECT_EQ(driver.counters().accepted.Get(), 1u);
  }
  policy.gate.Release();
  holder.join();
  // The holder saw the note on leaving and ran again: the frame went out, in its run.
  EXPECT_EQ(driver.counters().accepted.Get(), 2u);
  EXPECT_EQ(queue->backlog(), 0u) << "the frame was left behind without a run to send it";
  EXPECT_EQ(queue->counters().runs.Get(), 1u);
  EXPECT_EQ(queue->counters().reschedules.Get(), 0u);
  if (!in_gate) rte_pktmbuf_free(second);
  EXPECT_EQ(queue->Purge() + driver.Purge(), in_gate ? 2u : 1u);
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

// The empty-qdisc bypass on the real queues: one producer's frames, sent one after another,
// each find the qdisc empty and idle and go straight to the driver; without it, each is
// enqueued and dequeued. Either way every frame reaches the driver, in its own run.
TEST(TxQueue, AFrameThatFindsTheQdiscEmptyAndIdleBypassesItOnBothSyncs) {
  for (const bool nolock : {false, true})
    for (const bool bypass : {true, false}) {
      SCOPED_TRACE(std::string(nolock ? "nolock" : "rootlock") + (bypass ? "" : " --no-bypass"));
      RunWindow window;
      KeepingDriver driver;
      auto policy = MakeFlushPolicy({PolicyKind::kCount, 32}, test::TscHz());
      TxQueueConfig cfg;
      cfg.shape.nolock = nolock;
      cfg.tsc_hz = test::TscHz();
      cfg.track_stages = false;
      cfg.bypass = bypass;
      const auto queue = MakeTxQueue(driver, *policy, cfg, window);
      for (int i = 0; i < 5; ++i) {
        rte_mbuf* m = SmallFrame();
        ASSERT_NE(m, nullptr);
        EXPECT_TRUE(queue->Send(m, kProducerBand));
      }
      EXPECT_EQ(driver.counters().accepted.Get(), 5u);
      EXPECT_EQ(queue->counters().batch_hist[1].Get(), 5u);  // five driver calls of one
      EXPECT_EQ(queue->counters().bypassed.Get(), bypass ? 5u : 0u);
      EXPECT_EQ(queue->counters().runs.Get(), 5u);
      EXPECT_EQ(queue->backlog(), 0u);
      EXPECT_EQ(queue->Purge() + driver.Purge(), 5u);
    }
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

TEST(TxQueue, NoqueueHandsBatchesOverAndLeavesTheRefusedToTheCaller) {
  RunWindow window;
  RxSink sink(window, test::TscHz(), 1);
  auto nic = emu::CreateEmuDriver(*emu::ParseEmuSpec("emu:e1000,ring=8,free_thresh=4"), sink,
                                  window, test::TscHz());
  auto policy = MakeFlushPolicy(*ParsePolicySpec("buffer:16"), test::TscHz());
  TxQueueConfig cfg;
  cfg.shape.noqueue = true;
  cfg.tsc_hz = test::TscHz();
  const auto q = MakeTxQueue(*nic, *policy, cfg, window);
  TxQueue& queue = *q;
  FrameBuilder b(Proto::kUdp, 0);
  Batch batch = BuiltBatch(b, 12);
  ASSERT_EQ(batch.size(), 12);
  EXPECT_EQ(queue.SendBatch(batch), 8);  // the ring takes 8
  EXPECT_EQ(batch.size(), 4);            // the caller still holds the refused 4
  EXPECT_EQ(queue.counters().dropped_noqueue.Get(), 4u);
  rte_pktmbuf_free_bulk(batch.frames().data(), batch.size());
  EXPECT_EQ(nic->Purge(), 8u);
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

// Whether thread `tid` of this process is waiting for a priority-inheriting mutex now: in
// futex(2) with FUTEX_LOCK_PI or FUTEX_LOCK_PI2 (glibc 2.36 takes a contended PI mutex with the
// latter where the kernel has it), as /proc/self/task/TID/syscall shows ("NR UADDR OP ...").
bool WaitingForAPiMutex(pid_t tid) {
  std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/syscall");
  long nr = -1;
  std::string uaddr, op;
  if (!(in >> nr >> uaddr >> op) || nr != SYS_futex) return false;
  constexpr unsigned long kLockPi2 = 13;  // FUTEX_LOCK_PI2 (Linux 5.14), newer than some headers
  const unsigned long cmd = std::stoul(op, nullptr, 16) & FUTEX_CMD_MASK;
  return cmd == FUTEX_LOCK_PI || cmd == kLockPi2;
}

// CI saw doorbells_per_pkt 1.001 at count:1 on soft RoCE: the window's end was read between a
// post's doorbell and its accepted frames. The queue reads its driver's counters under the TX
// lock the driver keeps them under, so a reading made while a handover is in the driver waits
// for it and sees both or neither. No sleep decides it: the reading either finishes while the
// handover is held at the gate (it did not wait, and saw the doorbell alone) or is seen waiting
// for the TX lock (the one PI mutex it takes) before the gate opens.
TEST(TxQueue, TheDriversCountersAreReadAsOneCutWhileAHandoverIsInTheDriver) {
  if (!std::ifstream("/proc/self/syscall"))
    GTEST_SKIP() << "/proc/PID/syscall is not there (a kernel without CONFIG_HAVE_ARCH_TRACEHOOK): "
                    "nothing shows whether the reading waits for the TX lock";
  RunWindow window;
  Gate after_doorbell;
  KeepingDriver driver(&after_doorbell);
  auto policy = MakeFlushPolicy({PolicyKind::kCount, 1}, test::TscHz());
  TxQueueConfig cfg;
  cfg.tsc_hz = test::TscHz();
  cfg.track_stages = false;
  const auto queue = MakeTxQueue(driver, *policy, cfg, window);
  rte_mbuf* m = SmallFrame();
  ASSERT_NE(m, nullptr);
  std::thread sender([&] { EXPECT_TRUE(queue->Send(m, kProducerBand)); });
  const bool in_xmit = after_doorbell.WaitArrived();
  EXPECT_TRUE(in_xmit) << "the frame never reached the driver";
  std::atomic<pid_t> reader{0};
  auto reading = std::async(std::launch::async, [&] {
    reader.store(::gettid());
    return queue->DriverCountsNow();
  });
  bool waited = false;
  const auto until = std::chrono::steady_clock::now() + Gate::kWait;
  while (!waited && std::chrono::steady_clock::now() < until &&
         reading.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready)
    waited = reader.load() != 0 && WaitingForAPiMutex(reader.load());
  EXPECT_TRUE(waited) << "the reading did not wait for the TX lock the handover in the driver "
                         "holds";
  after_doorbell.Release();
  const DriverCounts c = reading.get();
  sender.join();
  EXPECT_EQ(c.doorbells, c.accepted);
  EXPECT_EQ(c.accepted, in_xmit ? 1u : 0u);
  EXPECT_EQ(queue->Purge() + driver.Purge(), 1u);
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

// A receiver that spins `spin` of TSC a frame, and counts the calls during which
// `tx_lock_probe` said the TX lock was held.
class SlowReceiver final : public FrameReceiver {
 public:
  SlowReceiver(FrameReceiver& inner, Tsc spin) : inner_(inner), spin_(spin) {}
  void Receive(std::span<rte_mbuf* const> frames, std::span<const Tsc> arrival) override {
    const Tsc until = Now() + spin_ * frames.size();
    while (Now() < until) {
    }
    if (tx_lock_probe && !tx_lock_probe()) ++tx_lock_held;
    inner_.Receive(frames, arrival);
    ++calls;
  }
  uint64_t calls = 0, tx_lock_held = 0;
  std::function<bool()> tx_lock_probe;  // true if another thread could take the TX lock now

 private:
  FrameReceiver& inner_;
  const Tsc spin_;
};

// A receiver behind the TX path, and what one run through it books.
struct SlowReceiverCase {
  const char* nic;
  bool noqueue;
};
struct SlowReceiverRun {
  bool finished = false;  // every frame sent and the queue idle (else a failure says why)
  uint64_t received = 0, rx_frames = 0, calls = 0, tx_lock_held = 0;
  uint64_t rx_cycles = 0, tx_cycles = 0, completion_cycles = 0;
  int pool_in_use = 0;
};
inline constexpr unsigned kSlowReceiverFrames = 320;
// 64 ms over the run: the windows hold what preempts them, up to 10 million cycles under ASan
// beside the suite's other binaries (CI, 2026-12-05, against 20 us spins' 6.4 ms).
inline constexpr double kSlowReceiverSpinS = 200e-6;

// Sends kSlowReceiverFrames through `k`'s NIC to a receiver that spins kSlowReceiverSpinS a
// frame, on the paths that call the driver: a --qdisc none batch (SendBatch), a qdisc run
// (Transmit) and a reclaim (Completion). Fills `out` (out->finished: it all got there).
void RunThroughASlowReceiver(const SlowReceiverCase& k, SlowReceiverRun* out) {
  RunWindow window;
  RxSink sink(window, test::TscHz(), 1);
  const Tsc spin = static_cast<Tsc>(kSlowReceiverSpinS * test::TscHz());
  SlowReceiver slow(sink, spin);
  DeferredReceiver handoff(slow, /*inherit=*/true);
  auto nic = emu::CreateEmuDriver(*emu::ParseEmuSpec(k.nic), handoff, window, test::TscHz());
  auto policy =
      MakeFlushPolicy(*ParsePolicySpec(k.noqueue ? "buffer:16" : "count:16"), test::TscHz());
  TxQueueConfig cfg;
  cfg.shape.noqueue = k.noqueue;
  cfg.tsc_hz = test::TscHz();
  cfg.receiver = &handoff;
  // The txirq away from this thread's CPU (EAL pinned it to the main lcore), so the two
  // deliver at once (emu:ixgbe: its reclaim and the producer's inline one): one waited for the
  // other's hand-off holding the TX lock, in most runs here. Beside it, the SCHED_FIFO txirq
  // preempted the producer inside its window and ran the receiver there (1 run in 25).
  const int here = sched_getcpu();
  for (int c = 0; c < static_cast<int>(std::thread::hardware_concurrency()); ++c)
    if (c != here) cfg.irq_cpus.push_back(c);
  const auto q = MakeTxQueue(*nic, *policy, cfg, window);
  // Another thread takes the TX lock (bql_limit) while the receiver runs: within 200 ms, or
  // the lock is held across the receiver's work (it finishes later; joined at the end).
  std::vector<std::future<void>> probes;
  slow.tx_lock_probe = [&] {
    probes.push_back(std::async(std::launch::async, [&] { (void)q->bql_limit(); }));
    return probes.back().wait_for(std::chrono::milliseconds(200)) == std::future_status::ready;
  };
  q->StartIrq();
  if (k.noqueue) {
    FrameBuilder b(Proto::kUdp, 0);
    for (unsigned sent = 0; sent < kSlowReceiverFrames; sent += 16) {
      Batch batch = BuiltBatch(b, 16);
      ASSERT_EQ(q->SendBatch(batch), 16);
    }
  } else {
    ASSERT_EQ(Produce(*q, 0, kSlowReceiverFrames), kSlowReceiverFrames);
  }
  for (int i = 0; i < 20000 && !q->Idle(); ++i) SleepNs(100e3);
  ASSERT_TRUE(q->Idle());
  q->StopIrq();
  const TxQueueCounters& c = q->counters();
  out->received = sink.counts().received;
  out->rx_frames = c.rx_frames.Get();
  out->calls = slow.calls;
  out->tx_lock_held = slow.tx_lock_held;
  out->rx_cycles = c.rx_cycles.Get();
  out->tx_cycles = c.tx_cycles.Get();
  out->completion_cycles = c.completion_cycles.Get();
  out->pool_in_use = rte_mempool_in_use_count(test::Pool());
  out->finished = true;
}

constexpr SlowReceiverCase kSlowReceiverCases[] = {
    {"emu:null", true}, {"emu:null", false}, {"emu:ixgbe", false}};

std::string CaseName(const SlowReceiverCase& k) {
  return std::string(k.nic) + (k.noqueue ? " --qdisc none" : " pfifo_fast");
}

// `check` on each case's run that finished (the case named in the trace); the first fatal
// failure ends them all.
void CheckEachSlowReceiverRun(const std::function<void(const SlowReceiverRun&)>& check) {
  for (const SlowReceiverCase& k : kSlowReceiverCases) {
    SCOPED_TRACE(CaseName(k));
    SlowReceiverRun r;
    RunThroughASlowReceiver(k, &r);
    ASSERT_TRUE(r.finished);
    check(r);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// The receiver's work (emu hands frames to the sink inside the driver's call or the txirq's
// reclaim, under the TX lock) is handed on after the TX lock and booked apart: rx_cycles holds
// at least every spin, and the TX lock is free while it runs. On each path that calls the
// driver: a --qdisc none batch (SendBatch), a qdisc run (Transmit) and a reclaim (Completion).
TEST(TxQueue, TheReceiversTimeIsBookedApartFromTheTxPathAndTheReclaim) {
  CheckEachSlowReceiverRun([](const SlowReceiverRun& r) {
    EXPECT_EQ(r.received, kSlowReceiverFrames);
    EXPECT_EQ(r.rx_frames, kSlowReceiverFrames);  // every delivery handed on and booked
    ASSERT_GT(r.calls, 0u);
    EXPECT_GE(r.rx_cycles,
              kSlowReceiverFrames * static_cast<Tsc>(kSlowReceiverSpinS * test::TscHz()));
    EXPECT_EQ(r.tx_lock_held, 0u);
    EXPECT_EQ(r.pool_in_use, 0);
  });
}

// Runs of the same kind: the TX path's and the completion role's windows leave the receiver's
// spins out. With the spins inside, the windows would hold all of them (>= rx_cycles, at least
// 320 x 200 us = 64 ms of TSC); without, they hold the TX path's own work for 320 frames, up to
// 10 million cycles (~3 ms) under ASan beside the suite's other binaries: under a quarter of
// the spins (16 ms) leaves that room five times over and still tells the two apart. A test of
// its own (issue 44, item 7: it was an `if` ThreadSanitizer's build skipped silently): under
// TSan the TX path runs 6-50x slower and each probe's thread start stalls the others, so the
// windows' own work, measured 2.5-15 million cycles against the spins' 17 million (CI,
// 2026-12-03, 1 run in 6; no race reported), is no longer a small part of the spins.
// scripts/tsan.sh, which names the cases it runs, leaves this one out; the ASan build and the
// normal one run it.
TEST(TxQueue, TheTxPathsWindowsAreASmallPartOfTheReceiversSpins) {
  CheckEachSlowReceiverRun([](const SlowReceiverRun& r) {
    EXPECT_LT(r.tx_cycles + r.completion_cycles, r.rx_cycles / 4);
  });
}

}  // namespace
}  // namespace txbatch
