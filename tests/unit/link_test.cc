// The link model (netem's impairments) with fixed seeds, on real mbufs, against the statistics
// each impairment must produce; and its netem-words parser.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "dataplane/frame.h"
#include "dataplane/link_model.h"
#include "dataplane/link_spec.h"
#include "tests/unit/test_eal.h"

namespace txbatch {
namespace {

constexpr double kHz = 1e9;  // 1 TSC = 1 ns

LinkSpec Spec(const char* words) {
  auto s = ParseLinkSpec(words);
  EXPECT_TRUE(s.ok()) << words << ": " << (s.ok() ? "" : s.error().message);
  return s.ok() ? *s : LinkSpec{};
}

struct Arrival {
  uint64_t id;
  Tsc at;
};

// Offers `n` frames of `len` bytes leaving the wire every `spacing` ns (tagged 0..n-1 in
// tx_offload), delivering as it goes; returns what arrived, in arrival order.
std::vector<Arrival> Pass(LinkModel& link, unsigned n, Tsc spacing, unsigned len = 100) {
  std::vector<Arrival> out;
  std::vector<rte_mbuf*> got(64);
  std::vector<Tsc> at(64);
  FrameBuilder b(Proto::kUdp, 0, /*track_stages=*/false);
  const auto drain = [&](Tsc now) {
    while (unsigned k = link.Deliver(now, got, at)) {
      for (unsigned i = 0; i < k; ++i) {
        out.push_back({got[i]->tx_offload, at[i]});
        rte_pktmbuf_free(got[i]);
      }
    }
  };
  for (unsigned i = 0; i < n; ++i) {
    rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
    EXPECT_NE(m, nullptr);
    b.Build(m, len - 42, i);
    m->tx_offload = i;
    link.Offer(m, Tsc{i} * spacing);
    drain(Tsc{i} * spacing);
  }
  drain(kNever - 1);
  return out;
}

TEST(LinkSpec, ParsesNetemWordsAndNamesWhatItDoesNotModel) {
  const LinkSpec l = Spec(
      "delay 3ms 1ms 25% distribution normal loss random 1% duplicate 0.1% reorder 5% gap 10 "
      "corrupt 0.01% rate 100mbit 20 seed 7 limit 1000");
  EXPECT_EQ(l.delay_ns, 3e6);
  EXPECT_EQ(l.jitter_ns, 1e6);
  EXPECT_DOUBLE_EQ(l.delay_corr, 0.25);
  EXPECT_EQ(l.dist_table.size(), 4096u);  // iproute2's normal.dist
  EXPECT_EQ(l.loss, LinkSpec::Loss::kRandom);
  EXPECT_DOUBLE_EQ(l.loss_p, 0.01);
  EXPECT_DOUBLE_EQ(l.duplicate, 0.001);
  EXPECT_DOUBLE_EQ(l.reorder, 0.05);
  EXPECT_EQ(l.gap, 10u);
  EXPECT_DOUBLE_EQ(l.corrupt, 0.0001);
  EXPECT_EQ(l.rate_bps, 1e8);
  EXPECT_EQ(l.rate_overhead, 20);
  EXPECT_EQ(l.seed, 7u);
  const LinkSpec ge = Spec("loss gemodel 1% 10%");
  EXPECT_EQ(ge.loss, LinkSpec::Loss::kGemodel);
  EXPECT_DOUBLE_EQ(ge.ge_r, 0.1);
  for (const char* bad :
       {"slot 1ms", "delay", "loss", "rate fast", "distribution cauchy", "reorder 5%", "limit 0",
        // Numbers the fields cannot hold (spec_fuzz's finds: a gap of 6.7e17 was converted to
        // unsigned; an infinite delay or rate printed back as "inf", which does not parse).
        "delay 5ms reorder 1% gap 666666666666666666", "delay 5ms reorder 1% gap 2.5", "seed 1e30",
        "seed 0.5", "seed -1", "limit 1e300", "delay 1e300s", "delay 2h", "delay 3601s",
        "delay 1ms 1e308s", "rate 1e300tbit", "rate 11tbit", "rate 0.5bit"}) {
    const auto r = ParseLinkSpec(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.error().message.find("--link"), std::string::npos) << r.error().message;
  }
  EXPECT_NE(ParseLinkSpec("slot 1ms").error().message.find("'slot' is not a netem word"),
            std::string::npos);
}

TEST(LinkSpec, PrintsBackIntoWordsThatParseToTheSameLink) {
  // The run header and the result record print the link this way; spec_fuzz's find: a reorder
  // without a gap printed "gap 0", which netem and the parser refuse.
  for (const char* words :
       {"delay 5ms reorder 1%", "delay 5ms reorder 25% 50% gap 5", "delay 1ms gap 3",
        "delay 3ms 1ms 25% distribution normal loss state 1% 30% 10% duplicate 0.1%",
        "loss gemodel 1% 10% 70% 0.1% corrupt 0.01% rate 100mbit -4 seed 9007199254740992",
        "delay 3600s limit 1000000"}) {
    auto once = ParseLinkSpec(words);
    ASSERT_TRUE(once.ok()) << words << ": " << once.error().message;
    auto twice = ParseLinkSpec(once->ToString());
    ASSERT_TRUE(twice.ok()) << once->ToString() << ": " << twice.error().message;
    EXPECT_EQ(twice->ToString(), once->ToString()) << words;
  }
}

// Issue 16 (item 20): a link printed back in its own words — `rate 10gbit`, `delay 10ms`, not
// `rate 1e+10bit` and `delay 10000000ns` — and with every digit a rate or time has.
TEST(LinkSpec, PrintsTimesAndRatesInTheirOwnUnits) {
  const auto words = [](const char* text) {
    auto l = ParseLinkSpec(text);
    EXPECT_TRUE(l.ok()) << text;
    return l.ok() ? l->ToString() : std::string();
  };
  EXPECT_EQ(words("delay 10ms rate 10gbit").rfind("delay 10ms 0ms 0% distribution uniform rate "
                                                  "10gbit 0 ",
                                                  0),
            0u)
      << words("delay 10ms rate 10gbit");
  EXPECT_NE(words("delay 1.5ms 250us").find("delay 1500us 250us"), std::string::npos);
  EXPECT_NE(words("delay 2s 1ns").find("delay 2s 1ns"), std::string::npos);
  EXPECT_NE(words("rate 123456789bit").find("rate 123456789bit"), std::string::npos)
      << words("rate 123456789bit");
  EXPECT_NE(words("rate 1500kbit").find("rate 1500kbit"), std::string::npos);
  EXPECT_NE(words("rate 10mbps").find("rate 80mbit"), std::string::npos);
  for (const char* text : {"delay 1.5ms 250us", "rate 123456789bit", "delay 0.5us"}) {
    auto again = ParseLinkSpec(words(text));
    ASSERT_TRUE(again.ok()) << words(text);
    EXPECT_EQ(again->ToString(), words(text));
  }
}

// How long the drain waits for what a link holds: the delay, its widest jitter, and a full
// queue ahead at the link's rate.
TEST(LinkSpec, MaxHoldIsTheDelayWidestJitterAndAFullQueueAtTheRate) {
  auto plain = ParseLinkSpec("delay 6s 1s");
  ASSERT_TRUE(plain.ok());
  EXPECT_DOUBLE_EQ(plain->MaxHoldS(1514), 7.0);
  auto rate = ParseLinkSpec("rate 1mbit limit 100");
  ASSERT_TRUE(rate.ok());
  EXPECT_DOUBLE_EQ(rate->MaxHoldS(1250), 100 * 1250 * 8 / 1e6);  // one second
  auto normal = ParseLinkSpec("delay 10ms 1ms distribution normal");
  ASSERT_TRUE(normal.ok());
  EXPECT_GT(normal->MaxHoldS(64), 0.0105);  // the table reaches beyond 0.5 sigma
  EXPECT_LT(normal->MaxHoldS(64), 0.010 + 0.001 * 32768.0 / kNetemDistScale + 1e-12);
}

TEST(LinkModel, RandomLossStaysInsideItsBinomialInterval) {
  LinkModel link(Spec("loss random 1% seed 3"), kHz);
  const unsigned n = 1000000;
  const auto got = Pass(link, n, 10);
  const double lost = n - got.size();
  const double sd = std::sqrt(n * 0.01 * 0.99);
  EXPECT_NEAR(lost, n * 0.01, 3.29 * sd);  // two-sided 99.9 %
  EXPECT_EQ(link.counters().lost.Get(), n - got.size());
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

TEST(LinkModel, GilbertElliottGivesItsLossRateAndBurstLength) {
  // p = 1 %, r = 10 %, all lost in bad, none in good: loss p/(p+r) = 9.09 %, bursts 1/r = 10.
  LinkModel link(Spec("loss gemodel 1% 10% 100% 0% seed 5"), kHz);
  const unsigned n = 1000000;
  const auto got = Pass(link, n, 10);
  std::vector<bool> arrived(n, false);
  for (const auto& a : got) arrived[a.id] = true;
  unsigned bursts = 0, lost = 0;
  for (unsigned i = 0; i < n; ++i)
    if (!arrived[i]) {
      ++lost;
      if (i == 0 || arrived[i - 1]) ++bursts;
    }
  EXPECT_NEAR(static_cast<double>(lost) / n, 0.01 / 0.11, 0.0909 * 0.05);
  EXPECT_NEAR(static_cast<double>(lost) / bursts, 10, 10 * 0.05);
}

TEST(LinkModel, DelayAndJitterFollowTheDistributionTable) {
  LinkModel link(Spec("delay 1ms 100us distribution normal seed 9 limit 1000000"), kHz);
  const unsigned n = 200000;
  const auto got = Pass(link, n, 2000);  // at most ~650 held at once: the test pool is small
  std::vector<double> delay;
  for (const auto& a : got) delay.push_back(static_cast<double>(a.at) - 2000.0 * a.id);
  std::sort(delay.begin(), delay.end());
  const auto q = [&](double p) { return delay[static_cast<size_t>(p * (delay.size() - 1))]; };
  // Normal: median mu, mu +- sigma at the 84.13 / 15.87 % points (within 1 % of sigma + table
  // granularity).
  EXPECT_NEAR(q(0.5), 1e6, 2e3);
  EXPECT_NEAR(q(0.8413), 1.1e6, 3e3);
  EXPECT_NEAR(q(0.1587), 0.9e6, 3e3);
  // Jitter reorders frames, as netem does.
  unsigned out_of_order = 0;
  for (size_t i = 1; i < got.size(); ++i) out_of_order += got[i].id < got[i - 1].id;
  EXPECT_GT(out_of_order, 0u);
}

TEST(LinkModel, ReorderAndDuplicateAreVisibleAndCounted) {
  LinkModel link(Spec("delay 10ms reorder 25% gap 5 duplicate 10% seed 11 limit 100000"), kHz);
  const unsigned n = 20000;
  const auto got = Pass(link, n, 40000);  // ~250 held at once
  EXPECT_EQ(got.size(), n + link.counters().duplicated.Get());
  EXPECT_NEAR(link.counters().duplicated.Get(), n * 0.1, 4 * std::sqrt(n * 0.1 * 0.9));
  EXPECT_GT(link.counters().reordered.Get(), 0u);
  unsigned early = 0;  // arrived before a frame offered earlier
  for (size_t i = 1; i < got.size(); ++i) early += got[i].id < got[i - 1].id;
  EXPECT_GT(early, 0u);
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

TEST(LinkModel, DeliversInArrivalOrderWhetherFramesKeepTheirOrderOrOvertake) {
  // The link holds frames that keep their order in a ring and those that overtake in a heap;
  // either way they leave by arrival time, ties in the order offered, and NextArrival names
  // the first. In order only (a rate), mostly out of order (jitter), and both mixed.
  for (const char* words :
       {"delay 200us rate 1gbit seed 3 limit 100000",
        "delay 200us 100us distribution uniform seed 5 limit 100000",
        "delay 200us 20us 50% distribution normal reorder 10% duplicate 5% rate "
        "1gbit seed 7 limit 100000"}) {
    LinkModel link(Spec(words), kHz);
    FrameBuilder b(Proto::kUdp, 0, /*track_stages=*/false);
    std::vector<rte_mbuf*> got(7);  // a small out: deliveries stop mid-heap and mid-ring
    std::vector<Tsc> at(7);
    std::vector<Arrival> out;
    const auto drain = [&](Tsc now) {
      for (;;) {
        const Tsc next = link.NextArrival();
        const unsigned k = link.Deliver(now, got, at);
        if (k == 0) {
          EXPECT_TRUE(next == kNever || next > now) << words;
          return;
        }
        EXPECT_EQ(at[0], next) << words;
        for (unsigned i = 0; i < k; ++i) {
          out.push_back({got[i]->tx_offload, at[i]});
          rte_pktmbuf_free(got[i]);
        }
      }
    };
    const unsigned n = 20000;
    for (unsigned i = 0; i < n; ++i) {
      rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
      ASSERT_NE(m, nullptr) << words << " frame " << i << " held " << link.InFlight();
      b.Build(m, 58, i);
      m->tx_offload = i;
      link.Offer(m, Tsc{i} * 1000);
      if (i % 3 == 0) drain(Tsc{i} * 1000);
    }
    drain(kNever - 1);
    EXPECT_EQ(link.InFlight(), 0u);
    EXPECT_EQ(out.size(), n + link.counters().duplicated.Get()) << words;
    unsigned overtook = 0;
    for (size_t i = 1; i < out.size(); ++i) {
      ASSERT_LE(out[i - 1].at, out[i].at) << words << " at " << i;
      if (out[i - 1].at == out[i].at) EXPECT_LE(out[i - 1].id, out[i].id) << words << " at " << i;
      overtook += out[i].id < out[i - 1].id;
    }
    if (std::string_view(words).starts_with("delay 200us rate"))
      EXPECT_EQ(overtook, 0u);
    else
      EXPECT_GT(overtook, n / 100) << words;
    EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
  }
}

TEST(LinkModel, CorruptFlipsOneBitInTheHeadersTheSinkChecks) {
  LinkModel link(Spec("corrupt 50% seed 13"), kHz);
  FrameBuilder b(Proto::kUdp, 0, false);
  std::vector<uint8_t> clean(60);
  unsigned flipped = 0;
  for (int i = 0; i < 200; ++i) {
    rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
    b.Build(m, 18, 1);
    std::copy_n(rte_pktmbuf_mtod(m, uint8_t*), 60, clean.begin());
    b.Unbuild(18);  // same frame again next time
    link.Offer(m, 0);
    rte_mbuf* got = nullptr;
    Tsc at = 0;
    ASSERT_EQ(link.Deliver(0, {&got, 1}, {&at, 1}), 1u);
    const uint8_t* p = rte_pktmbuf_mtod(got, uint8_t*);
    unsigned bits = 0;
    for (unsigned k = 0; k < 60; ++k) bits += std::popcount(static_cast<uint8_t>(p[k] ^ clean[k]));
    for (unsigned k = 38; k < 60; ++k) EXPECT_EQ(p[k], clean[k]);  // only the checked headers
    if (bits == 1)  // and the sink's check catches it
      EXPECT_FALSE(VerifyHeaders(p, rte_pktmbuf_data_len(got), 0) &&
                   ParseFrame(got).status == ParseStatus::kOk);
    else
      EXPECT_TRUE(VerifyHeaders(p, rte_pktmbuf_data_len(got), 0));
    EXPECT_LE(bits, 1u);
    flipped += bits;
    rte_pktmbuf_free(got);
  }
  EXPECT_EQ(flipped, link.counters().corrupted.Get());
  EXPECT_GT(flipped, 50u);
}

TEST(LinkModel, RateWithOverheadPacesArrivals) {
  // 1000 frames of 1000 bytes + 20 overhead, all offered at once, through 100 Mbit/s.
  LinkModel link(Spec("rate 100mbit 20 limit 2000"), kHz);
  const auto got = Pass(link, 1000, 0, 1000);
  ASSERT_EQ(got.size(), 1000u);
  const double expect_ns = 1000 * 1020 * 8 / 1e8 * 1e9;
  EXPECT_NEAR(static_cast<double>(got.back().at), expect_ns, expect_ns * 0.005);
}

TEST(LinkModel, TheSameSeedGivesTheSameFates) {
  const char* words = "delay 1ms 300us 30% loss random 5% 20% duplicate 2% reorder 10% corrupt 1%";
  LinkModel a(Spec((std::string(words) + " seed 21").c_str()), kHz);
  LinkModel b(Spec((std::string(words) + " seed 21").c_str()), kHz);
  LinkModel c(Spec((std::string(words) + " seed 22").c_str()), kHz);
  const auto ra = Pass(a, 20000, 500), rb = Pass(b, 20000, 500), rc = Pass(c, 20000, 500);
  ASSERT_EQ(ra.size(), rb.size());
  for (size_t i = 0; i < ra.size(); ++i) {
    EXPECT_EQ(ra[i].id, rb[i].id);
    EXPECT_EQ(ra[i].at, rb[i].at);
  }
  bool differs = ra.size() != rc.size();
  for (size_t i = 0; !differs && i < ra.size(); ++i) differs = ra[i].id != rc[i].id;
  EXPECT_TRUE(differs);
}

TEST(LinkModel, TheLimitDropsAndCounts) {
  LinkModel link(Spec("delay 1s limit 10"), kHz);
  FrameBuilder b(Proto::kUdp, 0, false);
  for (int i = 0; i < 15; ++i) {
    rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
    b.Build(m, 18, 1);
    link.Offer(m, 0);
  }
  EXPECT_EQ(link.InFlight(), 10u);
  EXPECT_EQ(link.counters().dropped_limit.Get(), 5u);
  EXPECT_EQ(link.Purge(), 10u);
  EXPECT_EQ(rte_mempool_in_use_count(test::Pool()), 0);
}

}  // namespace
}  // namespace txbatch
