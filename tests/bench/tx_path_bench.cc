// Google Benchmark microbenchmarks of the TX path's pieces, per frame, by batch size: the qdisc's
// bulk dequeue, and a whole alloc -> build -> Xmit -> sink -> free pass through the emu NIC with
// no wire and no injected cost (emu:null), i.e. what batching amortises in software.
//
// Run: meson test -C build --benchmark --suite bench  (or build/tests/bench/tx_path_bench)
// Starts its own EAL without hugepages; numbers go to doc/perf.md with the command.

#include <benchmark/benchmark.h>

#include <memory>
#include <vector>

#include "batching/batch.h"
#include "dataplane/eal.h"
#include "dataplane/frame.h"
#include "dataplane/mempool.h"
#include "dataplane/qdisc.h"
#include "dataplane/run_window.h"
#include "dataplane/rx_sink.h"
#include "drivers/emu/emu.h"

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
