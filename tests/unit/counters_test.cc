// The counter structs' one field list (Fields): every field is in it — so a counter added to a
// struct but not to its list fails here, not silently in a total or a window — and totals,
// readings and window differences follow each field's Sum or Max.
#include <gtest/gtest.h>

#include "base/counters.h"
#include "dataplane/tx_driver.h"
#include "dataplane/tx_queue.h"

namespace txbatch {
namespace {

template <class Values>
size_t CellsListed() {
  Values v{};
  size_t n = 0;
  ForEachCell<Values>([&n](auto, uint64_t&) { ++n; }, v);
  return n;
}

TEST(Counters, EveryFieldIsInItsStructsList) {
  EXPECT_EQ(CellsListed<DriverCounts>() * sizeof(uint64_t), sizeof(DriverCounts));
  EXPECT_EQ(CellsListed<TxQueueCounts>() * sizeof(uint64_t), sizeof(TxQueueCounts));
}

TEST(Counters, TotalsAddCountsAndKeepTheLargestMaximum) {
  TxQueueCounters a, b, total;
  a.requeues.Add(3);
  b.requeues.Add(4);
  a.dropped_qdisc_full.Add(1);  // a SharedCounter
  b.batch_hist[7].Add(2);
  a.irq_max_late_tsc.Max(10);
  b.irq_max_late_tsc.Max(25);
  AddInto(total, a);
  AddInto(total, b);
  EXPECT_EQ(total.requeues.Get(), 7u);
  EXPECT_EQ(total.dropped_qdisc_full.Get(), 1u);
  EXPECT_EQ(total.batch_hist[7].Get(), 2u);
  EXPECT_EQ(total.irq_max_late_tsc.Get(), 25u);
}

TEST(Counters, AWindowIsTheLaterReadingLessTheEarlierForCountsAndTheLaterForMaxima) {
  DriverCounters live;
  live.accepted.Add(100);
  live.last_departure.Max(1000);
  DriverCounts before;
  ReadInto(before, live);
  live.accepted.Add(40);
  live.last_departure.Max(5000);
  DriverCounts after;
  ReadInto(after, live);
  const DriverCounts w = Difference(after, before);
  EXPECT_EQ(w.accepted, 40u);
  EXPECT_EQ(w.last_departure, 5000u);
  EXPECT_EQ(w.doorbells, 0u);
}

}  // namespace
}  // namespace txbatch
