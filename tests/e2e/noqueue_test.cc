// --qdisc none (Linux noqueue): producers hand their own batches to the driver; what it refuses
// is dropped and counted, and the books still balance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/e2e/run_helper.h"

namespace txbatch::test {
namespace {

using nlohmann::json;

TEST(Noqueue, FullRingDropsAreCountedAndTheBooksBalance) {
  // e1000's wire takes ~81 kpps of these; unpaced producers offer far more.
  const auto run = RunTxbatch(
      "run --driver emu:e1000 --qdisc none --policy count:32,buffer:32:100 "
      "--proto udp --size 1400 --procs 1,8 --duration 0.3 --warmup 0.1");
  ASSERT_TRUE(WroteCells(run, 4));
  for (const auto& [rec, r, a, cell] : Cells(run)) {
    EXPECT_EQ(rec["config"]["qdisc"], "none");
    ExpectBooksClosed(rec);
    // Offered far above the wire into a ring with no queue before it: refused, dropped.
    EXPECT_GT(r["drops"]["noqueue"].get<uint64_t>(), 0u) << cell;
    EXPECT_EQ(a["dropped"], r["drops_total"]) << cell;
    EXPECT_EQ(a["lost"], 0) << cell;  // refused frames gave their sequence numbers back
  }
}

TEST(Noqueue, BufferPolicyFormsFullBatchesOfSmallDatagrams) {
  const auto run = RunTxbatch(
      "run --driver ethdev:net_null0 --qdisc none --policy buffer:1,buffer:32 "
      "--proto udp --size 18 --procs 1 --duration 0.2 --warmup 0.05");
  ASSERT_EQ(run.status, 0) << run.err;
  const json& off = Results(run, 0);
  const json& on = Results(run, 1);
  EXPECT_DOUBLE_EQ(off["avg_batch"].get<double>(), 1.0);
  EXPECT_GE(on["avg_batch"].get<double>(), 31.0);  // every call but a final partial one
  // Unpaced, buffer:32 fills before any timer could fire (it has none): full, then one end.
  EXPECT_GT(on["flush_triggers"]["full"].get<uint64_t>(), 0u);
  EXPECT_EQ(on["flush_triggers"]["timer"], 0);
  EXPECT_LE(on["flush_triggers"]["end"].get<uint64_t>(), 1u);
  for (const json* r : {&off, &on}) {
    EXPECT_TRUE((*r)["accounting"]["balanced"].get<bool>());
    EXPECT_EQ((*r)["drops_total"], 0);
  }
}

// A producer that builds its own batch whole (buffer:N, no timer, flat out, datagrams: the
// producer's burst loop) still writes to its flows in turn — each flow's frames within one of
// the others' over the cell (the pool is sized so no allocation fails, asserted: a failure
// would skip a flow's turn, as the per-write path does) — keeps every sequence (none lost past
// the driver: refused frames give theirs back) and sends what it built before the stop as the
// end's batch (at most one a producer).
TEST(Noqueue, ABatchBuiltWholeKeepsTheFlowsTurnTheSequencesAndTheEnd) {
  const auto run = RunTxbatch(
      "run --driver emu:ixgbe --qdisc none --policy buffer:32 --proto udp --size 100 "
      "--procs 2 --flows 3 --per-flow --duration 0.3 --warmup 0.05 --rounds 1");
  ASSERT_TRUE(WroteCells(run, 1));
  const std::vector<Cell> cells = Cells(run);
  const auto& [rec, r, a, cell] = cells.front();
  ExpectBooksClosed(rec);
  EXPECT_EQ(a["lost"], 0) << cell;
  ASSERT_EQ(r["alloc_failures"], 0) << cell;
  EXPECT_GT(r["flush_triggers"]["full"].get<uint64_t>(), 0u);
  EXPECT_LE(r["flush_triggers"]["end"].get<uint64_t>(), 2u);
  ASSERT_EQ(r["per_flow"].size(), 6u) << r.dump();
  for (unsigned p = 0; p < 2; ++p) {  // producer p's flows: 3p .. 3p + 2
    uint64_t lo = UINT64_MAX, hi = 0;
    for (unsigned f = 3 * p; f < 3 * p + 3; ++f) {
      const uint64_t g = r["per_flow"][f]["generated"].get<uint64_t>();
      lo = std::min(lo, g), hi = std::max(hi, g);
    }
    EXPECT_GT(lo, 0u) << r["per_flow"].dump();
    EXPECT_LE(hi - lo, 1u) << r["per_flow"].dump();
  }
}

}  // namespace
}  // namespace txbatch::test
