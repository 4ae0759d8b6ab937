// Google Benchmark microbenchmarks of the TX path's pieces, per frame, by batch size: the qdisc's
// bulk dequeue, and a whole alloc -> build -> Xmit -> sink -> free pass through the emu NIC with
// no wire and no injected cost (emu:null), i.e. what batching amortises in software; and the
// stages txbatch adds to a testpmd-style generator (BM_Stage_*), per frame, for doc/perf.md's
// side-by-side with dpdk-testpmd.
//
// Run: meson test -C build --benchmark --suite bench  (or build/tests/bench/tx_path_bench)
// Starts its own EAL without hugepages; numbers go to doc/perf.md with the command.

#include <benchmark/benchmark.h>

#include <memory>
#include <mutex>
#include <vector>

#include "base/pi_mutex.h"
#include "batching/batch.h"
#include "dataplane/eal.h"
#include "dataplane/frame.h"
#include "dataplane/histogram.h"
#include "dataplane/link_model.h"
#include "dataplane/lockfree_pfifo.h"
#include "dataplane/mempool.h"
#include "dataplane/qdisc.h"
#include "dataplane/queue_config.h"
#include "dataplane/run_window.h"
#include "dataplane/rx_sink.h"
#include "drivers/emu/emu.h"
#include "drivers/ethdev/ethdev.h"

namespace txbatch {
namespace {

rte_mempool* g_pool = nullptr;
double g_tsc_hz = 0;

void BM_QdiscBulkDequeue(benchmark::State& state) {
  const auto batch = static_cast<uint16_t>(state.range(0));
  PfifoFast q(1024);
  std::vector<rte_mbuf*> frames(512);
  if (rte_pktmbuf_alloc_bulk(g_pool, frames.data(), 512) != 0) {
    state.SkipWithError("pool empty");
    return;
  }
  Batch b;
  for (auto _ : state) {
    for (rte_mbuf* m : frames) (void)q.Enqueue(m, 1);
    while (!q.empty()) {
      b.Clear();
      q.DequeueBulk(b, batch);
      benchmark::DoNotOptimize(b.size());
    }
  }
  state.SetItemsProcessed(state.iterations() * 512);
  rte_pktmbuf_free_bulk(frames.data(), 512);
}
BENCHMARK(BM_QdiscBulkDequeue)->RangeMultiplier(2)->Range(1, 256);

void BM_EmuNullPath(benchmark::State& state) {
  const auto batch = static_cast<unsigned>(state.range(0));
  RunWindow window;
  RxSink sink(window, g_tsc_hz, 1);
  auto nic = emu::CreateEmuDriver(*emu::ParseEmuSpec("emu:null"), sink, window, g_tsc_hz);
  FrameBuilder builder(Proto::kUdp, 0);
  std::vector<rte_mbuf*> frames(batch);
  for (auto _ : state) {
    if (rte_pktmbuf_alloc_bulk(g_pool, frames.data(), batch) != 0) {
      state.SkipWithError("pool empty");
      break;
    }
    for (rte_mbuf* m : frames) builder.Build(m, 18, Now());
    benchmark::DoNotOptimize(nic->Xmit(frames));  // null completes at once: sink frees
  }
  state.SetItemsProcessed(state.iterations() * batch);
}
BENCHMARK(BM_EmuNullPath)->RangeMultiplier(2)->Range(1, 256);

// --- Stages, per frame -----------------------------------------------------------------------

// Fills `frames` from the pool, or marks the benchmark skipped.
bool AllocOrSkip(benchmark::State& state, std::vector<rte_mbuf*>& frames) {
  if (rte_pktmbuf_alloc_bulk(g_pool, frames.data(), static_cast<unsigned>(frames.size())) == 0)
    return true;
  state.SkipWithError("pool empty");
  return false;
}

// The TSC read every frame needs for its stamp.
void BM_Stage_Tsc(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(Now());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Stage_Tsc);

// One latency recorded in the sink's histogram: values that change every frame (as whole
// latencies do), so no bin lookup is shared.
void BM_Stage_HistogramRecord(benchmark::State& state) {
  LatencyHistogram h;
  double ns = 400;
  for (auto _ : state) {
    h.Record(ns);
    ns = ns < 5e5 ? ns * 1.0007 : 400;
  }
  benchmark::DoNotOptimize(h.count());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Stage_HistogramRecord);

// Fresh mbufs 32 at a time and back (a producer's stash and a PMD's bulk free); testpmd pays it.
void BM_Stage_AllocFreeBulk32(benchmark::State& state) {
  std::vector<rte_mbuf*> frames(32);
  for (auto _ : state) {
    if (rte_pktmbuf_alloc_bulk(g_pool, frames.data(), 32) != 0) {
      state.SkipWithError("pool empty");
      break;
    }
    rte_pktmbuf_free_bulk(frames.data(), 32);
  }
  state.SetItemsProcessed(state.iterations() * 32);
}
BENCHMARK(BM_Stage_AllocFreeBulk32);

// Headers from the template, IP id and checksum, txbatch header (sequence + stamp), on hot mbufs.
void BM_Stage_Build(benchmark::State& state) {
  std::vector<rte_mbuf*> frames(32);
  if (!AllocOrSkip(state, frames)) return;
  FrameBuilder builder(Proto::kUdp, 0);
  Tsc t = 0;
  for (auto _ : state)
    for (rte_mbuf* m : frames) builder.Build(m, 18, ++t);
  state.SetItemsProcessed(state.iterations() * 32);
  rte_pktmbuf_free_bulk(frames.data(), 32);
}
BENCHMARK(BM_Stage_Build);

// The TX lock (HARD_TX_LOCK) taken once per batch of `range(0)`, uncontended.
void BM_Stage_TxLock(benchmark::State& state) {
  PiMutex lock(/*inherit=*/false);
  for (auto _ : state) {
    std::lock_guard g(lock);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_Stage_TxLock)->Arg(1)->Arg(32);

// pfifo_fast under the root lock: one lock + enqueue per frame, one lock + bulk dequeue per 32.
void BM_Stage_RootlockQdisc(benchmark::State& state) {
  PfifoFast q(1024);
  std::mutex root;
  std::vector<rte_mbuf*> frames(32);
  if (!AllocOrSkip(state, frames)) return;
  Batch b;
  for (auto _ : state) {
    for (rte_mbuf* m : frames) {
      std::lock_guard g(root);
      (void)q.Enqueue(m, 1);
    }
    std::lock_guard g(root);
    b.Clear();
    q.DequeueBulk(b, 32);
    benchmark::DoNotOptimize(b.size());
  }
  state.SetItemsProcessed(state.iterations() * 32);
  rte_pktmbuf_free_bulk(frames.data(), 32);
}
BENCHMARK(BM_Stage_RootlockQdisc);

// The root-locked qdiscs through the interface the queues use (MakeQdisc), range(0) 0 pfifo_fast
// or 1 fq_codel (its defaults): one lock + enqueue per frame — fq_codel hashes the frame's
// 5-tuple into its flow's queue and stamps it for CoDel — and one lock + bulk dequeue of 32
// (fq_codel's deficit round robin over the flows with frames, CoDel's sojourn test), the 32
// frames spread over range(1) UDP flows. pfifo_fast beside it in the same run: compare the two
// rows of one run, not across runs.
void BM_Stage_QdiscKind(benchmark::State& state) {
  TxQueueConfig cfg;
  cfg.txqueuelen = 1024;
  if (state.range(0) == 1) cfg.shape.fq_codel = FqCodelParams{};
  TxQueueCounters counters;
  const std::unique_ptr<Qdisc> q = MakeQdisc(cfg, counters.qdisc);
  std::mutex root;
  std::vector<rte_mbuf*> frames(32);
  if (!AllocOrSkip(state, frames)) return;
  const auto flows = static_cast<unsigned>(state.range(1));
  for (unsigned i = 0; i < frames.size(); ++i) {
    FrameBuilder b(Proto::kUdp, static_cast<uint16_t>(i % flows), /*track_stages=*/false);
    b.Build(frames[i], 18, 1);
  }
  DequeueBudget budget;
  budget.frames = 32;
  Batch b;
  for (auto _ : state) {
    const Tsc now = Now();
    for (rte_mbuf* m : frames) {
      std::lock_guard g(root);
      (void)q->Enqueue(m, 1, now);
    }
    std::lock_guard g(root);
    b.Clear();
    // All 32 come out (the same mbufs go in again next): a qdisc that kept or dropped one
    // would be measuring something else.
    if (q->DequeueBulk(b, budget, now) != frames.size()) {
      state.SkipWithError("the bulk dequeue did not take all 32 frames");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * 32);
  rte_pktmbuf_free_bulk(frames.data(), 32);
}
BENCHMARK(BM_Stage_QdiscKind)->ArgsProduct({{0, 1}, {1, 8, 32}});

// pfifo_fast with lock-free bands: one enqueue per frame, one run flag + bulk dequeue per 32.
void BM_Stage_NolockQdisc(benchmark::State& state) {
  LockfreePfifo q(1024);
  std::atomic<bool> running{false};
  std::vector<rte_mbuf*> frames(32);
  if (!AllocOrSkip(state, frames)) return;
  Batch b;
  for (auto _ : state) {
    for (rte_mbuf* m : frames) (void)q.Enqueue(m, 1);
    if (!running.exchange(true)) {
      b.Clear();
      q.DequeueBulk(b, 32);
      running.store(false);
    }
    benchmark::DoNotOptimize(b.size());
  }
  state.SetItemsProcessed(state.iterations() * 32);
  rte_pktmbuf_free_bulk(frames.data(), 32);
}
BENCHMARK(BM_Stage_NolockQdisc);

// The ethdev driver's Xmit into net_null (rte_eth_tx_burst; the PMD frees what it takes), with
// the bulk alloc that feeds it, by burst.
void BM_Stage_NetNullXmit(benchmark::State& state) {
  const auto burst = static_cast<unsigned>(state.range(0));
  RunWindow window;
  RxSink sink(window, g_tsc_hz, 1);
  auto spec = ethdev::ParseEthdevSpec("ethdev:net_null0");
  auto port = ethdev::CreateEthdevDriver(*spec, g_pool, 1500, sink, window, g_tsc_hz);
  if (!port) {
    state.SkipWithError(port.error().message.c_str());
    return;
  }
  std::vector<rte_mbuf*> frames(burst);
  FrameBuilder builder(Proto::kUdp, 0);
  for (auto _ : state) {
    if (rte_pktmbuf_alloc_bulk(g_pool, frames.data(), burst) != 0) {
      state.SkipWithError("pool empty");
      break;
    }
    for (rte_mbuf* m : frames) builder.Build(m, 18, 1);
    const uint16_t n = (*port)->Xmit(frames);
    if (n < burst) rte_pktmbuf_free_bulk(frames.data() + n, burst - n);
  }
  state.SetItemsProcessed(state.iterations() * burst);
}
BENCHMARK(BM_Stage_NetNullXmit)->Arg(1)->Arg(8)->Arg(32)->Arg(64);

// The link model (bridge --link, emu's wire with --link): 32 frames offered 83 ns apart (a
// 12 Mpps forwarding loop, on a virtual clock), then what has arrived delivered, with the bulk
// alloc and free around it. Arg 0: a rate that never binds (every frame arrives in order, as
// with any link without jitter or reorder); 1: 20 µs of delay on top (~240 frames held);
// 2: with 10 µs of uniform jitter (arrivals out of order).
void BM_Stage_Link(benchmark::State& state) {
  static const char* kSpecs[] = {"rate 100gbit", "delay 20us rate 100gbit",
                                 "delay 20us 10us distribution uniform"};
  auto spec = ParseLinkSpec(kSpecs[state.range(0)]);
  if (!spec) {
    state.SkipWithError(spec.error().message.c_str());
    return;
  }
  state.SetLabel(kSpecs[state.range(0)]);
  LinkModel link(*spec, g_tsc_hz);
  const auto gap = static_cast<Tsc>(83 * g_tsc_hz / 1e9);
  std::vector<rte_mbuf*> frames(32), out(64);
  std::vector<Tsc> at(64);
  FrameBuilder builder(Proto::kUdp, 0);
  Tsc now = 0;
  for (auto _ : state) {
    if (rte_pktmbuf_alloc_bulk(g_pool, frames.data(), 32) != 0) {
      state.SkipWithError("pool empty");
      break;
    }
    for (rte_mbuf* m : frames) {
      builder.Build(m, 18, 1);
      link.Offer(m, now += gap);
    }
    for (unsigned n; (n = link.Deliver(now, out, at)) > 0;) rte_pktmbuf_free_bulk(out.data(), n);
  }
  state.SetItemsProcessed(state.iterations() * 32);
  link.Purge();
}
BENCHMARK(BM_Stage_Link)->DenseRange(0, 2);

}  // namespace
}  // namespace txbatch

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  auto plan = txbatch::PlanEal(txbatch::PoolBytes(4095, 1500), {}, txbatch::EalMemory::kNoHuge);
  if (!plan) return 2;
  auto eal = txbatch::Eal::Start(*plan);
  if (!eal) {
    std::fprintf(stderr, "tx_path_bench: %s\n", eal.error().message.c_str());
    return 2;
  }
  auto pool = txbatch::CreatePacketPool("bench_pool", 4095, 1500);
  if (!pool) return 2;
  txbatch::g_pool = pool->get();
  txbatch::g_tsc_hz = (*eal)->tsc_hz();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return rte_mempool_in_use_count(txbatch::g_pool) == 0 ? 0 : 1;
}
