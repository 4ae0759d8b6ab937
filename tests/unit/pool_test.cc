#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "dataplane/histogram.h"
#include "dataplane/mempool.h"
#include "tests/unit/test_eal.h"

namespace txbatch {
namespace {

// The no-hugepage trap (ENV-NOTES): the unit suite runs under --no-huge, where DPDK's default
// layout puts every mbuf header in the same L1 set. txbatch's pools must not.
TEST(PacketPool, ConsecutiveMbufsSpreadOverL1SetsWithoutHugepages) {
  EXPECT_GE(DistinctL1Sets(test::Pool(), 64), 32u);
}

// A NIC DMAs each frame from its mbuf's buf_iova: every object of a pool has a real one, the one
// EAL's memory map gives its address (was RTE_BAD_IOVA for the whole spread pool: an e1000 in a
// QEMU guest sent the bytes near address 0).
int CheckIova(rte_mempool* mp, unsigned* checked) {
  struct Count {
    unsigned objects = 0, bad = 0, wrong = 0;
  } count;
  rte_mempool_obj_iter(
      mp,
      [](rte_mempool*, void* opaque, void* obj, unsigned) {
        auto* c = static_cast<Count*>(opaque);
        const auto* m = static_cast<const rte_mbuf*>(obj);
        ++c->objects;
        if (m->buf_iova == RTE_BAD_IOVA || rte_mempool_virt2iova(obj) == RTE_BAD_IOVA) ++c->bad;
        if (m->buf_iova != rte_mem_virt2iova(m->buf_addr)) ++c->wrong;
        // The last byte of the data room is where the device expects it too.
        const char* last = static_cast<const char*>(m->buf_addr) + m->buf_len - 1;
        if (m->buf_iova + m->buf_len - 1 != rte_mem_virt2iova(last)) ++c->wrong;
      },
      &count);
  *checked = count.objects;
  return static_cast<int>(count.bad + count.wrong);
}

TEST(PacketPool, EveryMbufHasTheIovaADeviceCanDmaFrom) {
  unsigned checked = 0;
  EXPECT_EQ(CheckIova(test::Pool(), &checked), 0);
  EXPECT_EQ(checked, test::Pool()->size);
  // And it says so: a pool marked NON_IO is one mlx5 and sfc refuse to register for DMA.
  EXPECT_EQ(test::Pool()->flags & RTE_MEMPOOL_F_NON_IO, 0u);
  // Larger than one memzone chunk's page: a jumbo pool too.
  auto jumbo = CreatePacketPool("iova_jumbo_pool", 127, 9000);
  ASSERT_TRUE(jumbo.ok()) << jumbo.error().message;
  EXPECT_EQ(CheckIova(jumbo->get(), &checked), 0);
  EXPECT_EQ(checked, 127u);
}

TEST(PacketPool, DpdkDefaultLayoutShowsTheTrapThisTestGuardsAgainst) {
  auto pool = CreatePacketPool("trap_pool", 511, 1500, PoolLayout::kDpdkDefault);
  ASSERT_TRUE(pool.ok()) << pool.error().message;
  EXPECT_LT(DistinctL1Sets(pool->get(), 64), 32u);
}

TEST(PacketPool, JumboMtuFitsOneFramePerMbuf) {
  auto pool = CreatePacketPool("jumbo_pool", 63, 9000);
  ASSERT_TRUE(pool.ok()) << pool.error().message;
  rte_mbuf* m = rte_pktmbuf_alloc(pool->get());
  ASSERT_NE(m, nullptr);
  EXPECT_GE(rte_pktmbuf_tailroom(m), 9000u + 14u);
  rte_pktmbuf_free(m);
}

TEST(LatencyHistogram, QuantilesWithinOnePercent) {
  LatencyHistogram h;
  for (int i = 1; i <= 100000; ++i) h.Record(1000.0 * i);  // 1 us .. 100 ms, uniform
  const auto s = h.Summary();
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->min, 1000.0);
  EXPECT_EQ(s->max, 1e8);
  EXPECT_NEAR(s->p50, 5e7, 5e7 * 0.01);
  EXPECT_NEAR(s->p90, 9e7, 9e7 * 0.01);
  EXPECT_NEAR(s->p99, 9.9e7, 9.9e7 * 0.01);
  EXPECT_NEAR(s->avg, 50000.5 * 1000, 1);
}

TEST(LatencyHistogram, QuantilesWithinOnePercentFromTenNanosecondsToTenSeconds) {
  // Log-uniform over 9 decades: the q-quantile is 10 ns * 1e9^q.
  LatencyHistogram h;
  const int n = 200000;
  for (int i = 0; i < n; ++i) h.Record(10.0 * std::pow(1e9, (i + 0.5) / n));
  for (double q : {0.001, 0.1, 0.5, 0.9, 0.99, 0.999}) {
    const double truth = 10.0 * std::pow(1e9, q);
    EXPECT_NEAR(h.Quantile(q), truth, truth * 0.01) << q;
  }
  // One value: every percentile is that value exactly (clamped to the exact min and max).
  LatencyHistogram one;
  for (int i = 0; i < 10; ++i) one.Record(12345.0);
  EXPECT_EQ(one.Summary()->p50, 12345.0);
  EXPECT_EQ(one.Summary()->p99, 12345.0);
}

TEST(LatencyHistogram, QuantilesRiseWithQAndFallWellInsideTheirBin) {
  // Log-uniform over 9 decades, ~40-80 samples a bin: a quantile interpolated within its bin
  // lands well within a tenth of the bin width of the true 10 ns * 1e9^q (a bin under 0.78 %
  // wide is nearly uniform inside); interpolated the wrong way round it is off by up to a bin
  // except mid-bin, and falls while q rises.
  LatencyHistogram h;
  const int n = 200000;
  for (int i = 0; i < n; ++i) h.Record(10.0 * std::pow(1e9, (i + 0.5) / n));
  double last = 0;
  for (int k = 2; k <= 19998; ++k) {  // ~10 steps a bin
    const double q = k / 20000.0;
    const double v = h.Quantile(q);
    ASSERT_GE(v, last) << "q " << q;
    last = v;
    if (k % 7 == 0) {
      const double truth = 10.0 * std::pow(1e9, q);
      EXPECT_NEAR(v, truth, truth * 0.001) << "q " << q;
    }
  }
}

TEST(LatencyHistogram, AWeightedRecordIsThatManyRecords) {
  LatencyHistogram weighted, single;
  const std::pair<double, uint64_t> samples[] = {{500.0, 32}, {2e4, 1}, {7e5, 7}, {3e3, 0}};
  for (auto [ns, n] : samples) {
    weighted.Record(ns, n);
    for (uint64_t i = 0; i < n; ++i) single.Record(ns);
  }
  const auto w = weighted.Summary(), s = single.Summary();
  ASSERT_TRUE(w && s);
  EXPECT_EQ(w->count, 40u);
  EXPECT_EQ(w->count, s->count);
  EXPECT_EQ(w->min, s->min);
  EXPECT_EQ(w->max, s->max);
  EXPECT_DOUBLE_EQ(w->avg, s->avg);
  for (double q : {0.1, 0.5, 0.8, 0.9, 0.99}) EXPECT_EQ(weighted.Quantile(q), single.Quantile(q));
}

TEST(LatencyHistogram, EveryValueFallsInABinAtMostOneHundredTwentyEighthWide) {
  // The bin is read from the double's bits: check it against its edges from 1 ns to 17 s,
  // including the edges themselves (a power of two is its bin's lower edge).
  using H = LatencyHistogram;
  for (double v = 1.0; v < 1.7e10; v *= 1.0037) {
    for (double x : {v, std::nextafter(v, 0.0), std::ldexp(1.0, std::ilogb(v))}) {
      const int b = H::BinOf(x);
      if (x < 1.0) {
        EXPECT_EQ(b, -1) << x;
        continue;
      }
      ASSERT_GE(b, 0) << x;
      ASSERT_LT(b, H::kBins) << x;
      const double lo = H::LowerEdge(b), hi = H::LowerEdge(b + 1);
      EXPECT_LE(lo, x) << x;
      EXPECT_LT(x, hi) << x;
      EXPECT_LE((hi - lo) / lo, 1.0 / 128 + 1e-12) << x;
    }
  }
  EXPECT_EQ(H::BinOf(0.999), -1);
  EXPECT_EQ(H::BinOf(-5.0), -1);
  EXPECT_EQ(H::BinOf(std::nan("")), -1);
  EXPECT_EQ(H::BinOf(std::ldexp(1.0, H::kOctaves)), H::kBins);
  EXPECT_EQ(H::BinOf(HUGE_VAL), H::kBins);
  EXPECT_EQ(H::LowerEdge(H::kBins), std::ldexp(1.0, H::kOctaves));
}

TEST(LatencyHistogram, OutOfRangeValuesKeepTheirExactMinAndMax) {
  LatencyHistogram h;
  h.Record(0.25);
  h.Record(100.0);
  h.Record(3e10);
  const auto s = h.Summary();
  ASSERT_TRUE(s);
  EXPECT_EQ(s->count, 3u);
  EXPECT_EQ(s->min, 0.25);
  EXPECT_EQ(s->max, 3e10);
  EXPECT_EQ(h.Quantile(0.1), 0.25);
  EXPECT_EQ(h.Quantile(1.0), 3e10);
  EXPECT_NEAR(h.Quantile(0.5), 100.0, 1.0);
}

TEST(LatencyHistogram, EmptyHasNoSummary) {
  LatencyHistogram h;
  EXPECT_FALSE(h.Summary().has_value());
  EXPECT_TRUE(h.Bins().empty());
}

// The export holds every sample once, in bins that do not overlap, each holding its values;
// a quantile read back from the bins alone is within a bin of the histogram's.
TEST(LatencyHistogram, ItsBinsHoldEverySampleInOrderAndGiveTheSameQuantiles) {
  LatencyHistogram h;
  h.Record(0.5);  // under 1 ns
  for (int i = 0; i < 1000; ++i) h.Record(1000.0 + 37.0 * i, 1 + i % 3);
  h.Record(4e10);  // past 2^34 ns
  const std::vector<HistBin> bins = h.Bins();
  ASSERT_GE(bins.size(), 3u);
  uint64_t total = 0;
  for (size_t i = 0; i < bins.size(); ++i) {
    EXPECT_GT(bins[i].count, 0u);
    EXPECT_LT(bins[i].lo_ns, bins[i].hi_ns);
    if (i > 0) {
      EXPECT_LE(bins[i - 1].hi_ns, bins[i].lo_ns);
    }
    total += bins[i].count;
  }
  EXPECT_EQ(total, h.count());
  EXPECT_EQ(bins.front().lo_ns, 0);
  EXPECT_EQ(bins.front().hi_ns, 1);
  EXPECT_EQ(bins.back().lo_ns, std::ldexp(1.0, LatencyHistogram::kOctaves));
  EXPECT_GT(bins.back().hi_ns, 4e10);  // [2^34, just above max): max is in it
  EXPECT_EQ(bins.back().hi_ns, std::nextafter(4e10, HUGE_VAL));
  // 1000 + 37 i lands in the bin that holds it.
  const auto holder = [&](double v) {
    return std::find_if(bins.begin(), bins.end(),
                        [v](const HistBin& b) { return b.lo_ns <= v && v < b.hi_ns; });
  };
  for (int i = 0; i < 1000; i += 111) EXPECT_NE(holder(1000.0 + 37.0 * i), bins.end()) << i;
  for (double q : {0.5, 0.9, 0.99}) {
    uint64_t seen = 0;
    const HistBin* at = nullptr;
    for (const HistBin& b : bins)
      if ((seen += b.count) >= q * static_cast<double>(total)) {
        at = &b;
        break;
      }
    ASSERT_NE(at, nullptr);
    EXPECT_GE(h.Quantile(q), at->lo_ns) << q;
    EXPECT_LE(h.Quantile(q), at->hi_ns) << q;
  }
}

}  // namespace
}  // namespace txbatch
