// txbatch's model of the kernel reference run, beside the kernel (issue 45, item 2;
// doc/fidelity.md "The kernel beside txbatch's model"): the guest's Debian 6.1.192 sends
// pktgen's 60-byte frames through pfifo_fast to its e1000 with BQL pinned at 10 and 40 frames and
// dynamic (kernel_ref.h: one run, shared with kernel_ref_test.cc), scripts/kernel-vs-model.py
// runs txbatch's model of each case on both engines, and the bulk-size distributions must agree
// within the bounds below. They compare the kernel's qdisc:qdisc_dequeue histogram
// (results.batch_sizes: non-empty dequeues by their packets) with txbatch's dequeue_sizes, the
// same events: a requeued frame dequeued again alone is a bulk of 1 in both, a bypassed frame
// is in neither, a bulk a stopped queue refused whole is in both.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>

#include "batching/flush_policy.h"
#include "tests/test_files.h"
#include "tests/vm/kernel_ref.h"

namespace txbatch::test {
namespace {

using nlohmann::json;
using Hist = std::map<unsigned, uint64_t>;  // bulk size -> bulks

// The singles' shares may differ by 10 points (issue 45's bound). Two sizes whose shares are
// closer than that may swap ranks between two distributions that both meet it — a pinned BQL
// makes bulks of N and of 1 alternate, so their counts are equal to a few, and which is the
// larger is the guest's chance — so every size within 10 points of the largest share is a mode,
// and two distributions have the same mode when their sets of modes meet.
constexpr double kModeTie = 0.10;
// Likewise the median: a distribution whose cumulative share crosses 1/2 at a jump (the N/1
// alternation: 50.0 % singles) has no stable median, so its median is the range of sizes at
// cumulative shares within 5 points of 1/2 — half the singles' bound, so that two CDFs 10 points
// apart at the jump still have ranges that meet — and medians within 1 frame are ranges that
// come within 1 frame of each other.
constexpr double kMedianHalfWidth = 0.05;
// Enough bulks that a share is known to well inside the bounds: at 1000 bulks a 50 % share's
// binomial standard deviation is 1.6 points.
constexpr uint64_t kMinBulks = 1000;

Hist HistOf(const json& sizes) {
  Hist h;
  for (const auto& [k, v] : sizes.items())
    if (v.get<uint64_t>() > 0) h[static_cast<unsigned>(std::stoul(k))] = v.get<uint64_t>();
  return h;
}

uint64_t Total(const Hist& h) {
  uint64_t n = 0;
  for (const auto& [size, count] : h) n += count;
  return n;
}

double Share(const Hist& h, unsigned size) {
  const auto it = h.find(size);
  return it == h.end() ? 0 : static_cast<double>(it->second) / static_cast<double>(Total(h));
}

// Sizes whose share is within kModeTie of the largest.
std::set<unsigned> Modes(const Hist& h) {
  uint64_t top = 0;
  for (const auto& [size, count] : h) top = std::max(top, count);
  std::set<unsigned> out;
  for (const auto& [size, count] : h)
    if (static_cast<double>(top - count) <= kModeTie * static_cast<double>(Total(h)))
      out.insert(size);
  return out;
}

// The smallest size whose cumulative share reaches p.
unsigned Quantile(const Hist& h, double p) {
  uint64_t acc = 0;
  for (const auto& [size, count] : h) {
    acc += count;
    if (static_cast<double>(acc) >= p * static_cast<double>(Total(h))) return size;
  }
  return h.rbegin()->first;
}

// The `n` most frequent sizes of more than one frame.
std::set<unsigned> TopMulti(const Hist& h, size_t n) {
  std::vector<std::pair<uint64_t, unsigned>> by_count;
  for (const auto& [size, count] : h)
    if (size > 1) by_count.emplace_back(count, size);
  std::sort(by_count.rbegin(), by_count.rend());
  std::set<unsigned> out;
  for (size_t i = 0; i < std::min(n, by_count.size()); ++i) out.insert(by_count[i].second);
  return out;
}

std::string Text(const std::set<unsigned>& s) {
  std::string out;
  for (unsigned v : s) {
    if (!out.empty()) out += ',';
    out += std::to_string(v);
  }
  return "{" + out + "}";
}

bool Meet(const std::set<unsigned>& a, const std::set<unsigned>& b) {
  return std::any_of(a.begin(), a.end(), [&b](unsigned v) { return b.count(v) > 0; });
}

// BQL pinned at N frames: the bounds of issue 45 (same mode, medians within 1 frame, singles'
// shares within 10 points, read as above), and the size the full bulks have. The 6.1.192 rule
// (doc/fidelity.md): a bulk takes frames while dql_avail lasts, so with a backlog a run's full
// bulk is N, leaves inflight = limit exactly (not over: the queue stays open) and the next
// dequeue takes one frame, which stops it; so half the bulks are single frames, and the mode of
// the others is N in any guest whose qdisc held a backlog (few of its frames bypassed it: the
// test below compares only such runs).
void ComparePinned(const Hist& kernel, const Hist& model) {
  EXPECT_NEAR(Share(model, 1), Share(kernel, 1), 0.10) << "singles' share";
  const std::set<unsigned> km = Modes(kernel), mm = Modes(model);
  EXPECT_TRUE(Meet(km, mm)) << "modes (sizes within " << kModeTie * 100
                            << " points of the top share): kernel " << Text(km) << ", model "
                            << Text(mm);
  const unsigned klo = Quantile(kernel, 0.5 - kMedianHalfWidth);
  const unsigned khi = Quantile(kernel, 0.5 + kMedianHalfWidth);
  const unsigned mlo = Quantile(model, 0.5 - kMedianHalfWidth);
  const unsigned mhi = Quantile(model, 0.5 + kMedianHalfWidth);
  EXPECT_TRUE(mlo <= khi + 1 && klo <= mhi + 1)
      << "medians (sizes at cumulative shares 0.45..0.55): kernel " << klo << ".." << khi
      << ", model " << mlo << ".." << mhi;
  EXPECT_EQ(TopMulti(model, 1), TopMulti(kernel, 1)) << "the full bulk's size";
}

// e1000 (6.1) stops its queue when fewer than desc_needed = MAX_SKB_FRAGS + 7 = 24 of its
// descriptors are unused (e1000_xmit_frame's e1000_maybe_stop_tx), E1000_DESC_UNUSED keeping one
// slot empty (unused = ring - 1 - used) and a 60-byte frame taking one: S = ring - 1 - 23 =
// ring - 24 frames in flight at most (232 of the default 256), on the guest and on the model
// (kernel-vs-model.py builds ring=tx_ring, stop_slack=25 from the same record).
constexpr uint64_t kE1000StopUnused = 24;

// BQL dynamic: DQL's limit and the ring-bound cycle. DQL starts at 0 (6.1.192's dql_reset) and
// grows at every completion that finds the queue over its limit with nothing in progress (QEMU's
// e1000 has done every frame queued), so it keeps growing until the ring stops the queue before
// BQL does: the settled limit L is at least S. How far past S it lands is the guest's timing:
// 255 frames (60 (2^k - 1) bytes: every completion after BQL stopped the queue) in the model and
// four quiet local guests, 252 on CI's host and 419 in a local guest beside a second QEMU
// (2026-12-06: a completion that came while the producers were still queueing adds what they had
// queued since the last). Then the ring, not BQL, ends a cycle, and a cycle's bulks follow from L
// and S (the 2025 bulk cap: dev_tx_weight + 1 = 65 a bulk, 65 packets a quota):
// - 3 x 65 < L < 4 x 65 (the model's 255): a completion after the ring's stop finds r = L - S
//   frames requeued, which come back one a dequeue (r bulks of 1, r packets of the quota), then
//   bulks of 65 - r (the quota's rest), 65, 65 and L - 3 x 65 (BQL's rest), of which the ring
//   takes S - 3 x 65 and r go back: bulks of 65 - r and of L - 195 as many as cycles;
// - L >= 4 x 65 (BQL never binds): the fourth bulk is a whole 65 of which the ring takes
//   S - 195 and r = 260 - S go back: r singles, then bulks of 65 - r = S - 195, 65, 65, 65 —
//   so at least three bulks of 65 for each of S - 195 (three spared for the run's edges).
// Each side's cycle is computed from its own L. The model's simulation and real engine run the
// cycle throughout (the producers always keep a backlog): at least one cycle, bulks of the
// quota's rest and of BQL's rest within a quarter + 3 of each other (one each a cycle; a cycle
// broken after the first at the run's edges), and at least r - 1 singles a cycle (the requeued
// frames; one a cycle spared for the run's edges). The guest's two pktgen threads keep a backlog
// at the ring only while the host lets them (a loaded host: 69 % of the frames bypassed an empty
// qdisc, one cycle or none in a run): where its run shows cycles, they are held to the same
// rules; where it shows none (no more than 3 bulks of either rest: a stray bulk is no cycle), the
// test says so and compares the rest. Completions before the
// ring filled and an empty qdisc add bulks of 65, partial bulks and singles: the shares, and which
// multi-frame bulk is commonest, are the guest's speed and not compared (doc/fidelity.md). What
// is, always: L >= S on both sides; the guest's inflight never above S (the ring's bound); the
// largest bulk (65) and the mode.
void CompareDynamic(const Hist& kernel, const Hist& model, const json& kernel_rec,
                    uint64_t model_limit) {
  const json& kernel_bql = kernel_rec.at("results").at("bql");
  const json& env = kernel_rec.at("env");
  const uint64_t stop =
      (env.contains("tx_ring") ? env.at("tx_ring").get<uint64_t>() : 256) - kE1000StopUnused;
  EXPECT_LE(kernel_bql.at("inflight").at("max").get<uint64_t>(), stop * kKrefPktSize)
      << "the guest's inflight above the ring's stop";
  EXPECT_EQ(model.rbegin()->first, kernel.rbegin()->first) << "the largest bulk";
  const std::set<unsigned> km = Modes(kernel), mm = Modes(model);
  EXPECT_TRUE(Meet(km, mm)) << "modes: kernel " << Text(km) << ", model " << Text(mm);
  const uint64_t bulk = kDevTxWeight + 1;  // a fresh quota's bulk (the 2025 cap)
  const auto count = [](const Hist& h, unsigned size) { return h.count(size) ? h.at(size) : 0; };
  for (const auto& [who, h, limit_bytes] :
       {std::tuple<const char*, const Hist*, uint64_t>{
            "kernel", &kernel, kernel_bql.at("limit_after").get<uint64_t>()},
        std::tuple<const char*, const Hist*, uint64_t>{"model", &model, model_limit}}) {
    const bool is_model = std::string(who) == "model";
    const uint64_t limit = limit_bytes / kKrefPktSize;
    if (limit < stop || limit <= 3 * bulk) {
      ADD_FAILURE() << who << ": BQL's settled limit " << limit << " frames, below the ring's "
                    << "stop S = " << stop << " or 3 bulks of " << bulk;
      continue;
    }
    const bool bql_binds = limit < 4 * bulk;
    const uint64_t requeued = bql_binds ? limit - stop : 4 * bulk - stop;
    const unsigned quota_rest = static_cast<unsigned>(bulk - requeued);
    const unsigned bql_rest = static_cast<unsigned>(limit - 3 * bulk);
    // Where BQL ends a bulk a cycle has one of each rest; where the ring alone binds, one of the
    // quota's rest and three whole bulks (65, 65, and the 65 the ring cut).
    const uint64_t a = count(*h, quota_rest);
    const uint64_t b = bql_binds ? count(*h, bql_rest) : count(*h, bulk) / 3;
    const uint64_t cycles = std::min(a, b);
    std::printf("dynamic %s: limit %llu frames, ring stop %llu: %s; bulks of %u: %llu", who,
                static_cast<unsigned long long>(limit), static_cast<unsigned long long>(stop),
                bql_binds ? "BQL ends a bulk" : "the ring alone binds", quota_rest,
                static_cast<unsigned long long>(a));
    std::printf(", of %u: %llu", bql_binds ? bql_rest : static_cast<unsigned>(bulk),
                static_cast<unsigned long long>(bql_binds ? b : count(*h, bulk)));
    std::printf(", singles %llu (%.2f a cycle)\n", static_cast<unsigned long long>(count(*h, 1)),
                cycles ? static_cast<double>(count(*h, 1)) / static_cast<double>(cycles) : 0.0);
    // The guest's run shows no cycle (at most kStrayBulks of the quota's rest and, where BQL
    // ends a bulk, of BQL's rest): its producers kept no backlog at the ring. A bulk of either
    // size also comes without a cycle, at a run's edges or by chance where the qdisc briefly
    // held that many (a CI run of 2026-12-07 at 902fc5d: 80 % of the guest's frames bypassed an
    // empty qdisc, 0 bulks of 42 and one of 60, and this test failed on it). Where one size
    // shows a backlog (more than kStrayBulks) and the other does not, it is a cycle of another
    // shape, and fails below.
    constexpr uint64_t kStrayBulks = 3;  // as the run's edges are spared below
    if (!is_model && count(*h, quota_rest) <= kStrayBulks &&
        (!bql_binds || count(*h, bql_rest) <= kStrayBulks)) {
      std::printf(
          "dynamic kernel: no ring-bound cycle in this run (its producers kept no backlog "
          "at the ring; %llu frames requeued); the cycle is compared on the model's side "
          "only\n",
          static_cast<unsigned long long>(
              kernel_rec.at("results").at("qdisc").at("requeues").get<uint64_t>()));
      continue;
    }
    EXPECT_GT(cycles, 0u) << who << ": no ring-bound cycle (no bulk of " << quota_rest << ", or "
                          << "none of " << (bql_binds ? bql_rest : bulk) << ")";
    if (bql_binds)
      EXPECT_LE(std::max(a, b) - cycles, std::max(a, b) / 4 + 3)
          << who << ": bulks of " << quota_rest << " and of " << bql_rest
          << " come one each a cycle";
    else
      EXPECT_LE(a, b + 3) << who << ": each bulk of " << quota_rest << " is followed by three of "
                          << bulk << " in a cycle (3 spared for the run's edges)";
    EXPECT_GE(count(*h, 1), (requeued - 1) * cycles)
        << who << ": the requeued frames of " << cycles << " ring-bound cycles come back alone";
  }
}

TEST(KernelModel, TheModelsBulkSizesAreTheKernelsOnBothEngines) {
  KernelBesideModel both;
  ASSERT_NO_FATAL_FAILURE(ReadKernelBesideModel("udp", &both));
  const json &kref = both.kref, &model = both.model;
  std::map<std::string, const json*> cases;
  for (const json& c : model.at("cases")) cases[c.at("case").get<std::string>()] = &c;

  std::set<std::string> compared;
  unsigned pinned_beside_kernel = 0;  // pinned cases whose guest run held a backlog
  for (const json& rec : kref.at("records")) {
    const json& c = rec.at("config");
    if (c.at("mode") != "udp") continue;  // the TCP cases have no model here
    const std::string name = c.at("case").get<std::string>();
    compared.insert(name);
    SCOPED_TRACE(name);
    ASSERT_TRUE(cases.count(name)) << "the model has no case " << name;
    const Hist kernel = HistOf(rec.at("results").at("batch_sizes"));
    const bool pinned = c.at("bql").at("mode") == "pinned";
    // The shares compared need enough bulks; the dynamic case compares no share.
    if (pinned) {
      ASSERT_GE(Total(kernel), kMinBulks) << rec.at("results").at("batch_sizes");
    }
    // ComparePinned's rule holds with a backlog at the qdisc; a frame that bypassed it found it
    // empty. The guest's pktgen keeps one only while the host lets it: a CI run of 2026-12-07
    // (at 67c27d7, nothing else running) had 33.6 % of bql_40's frames bypass and 71 % singles,
    // a run by hand that hour 17.2 % and 63 %, where bql_10 in the same boots had 3.7 % and
    // 50.7 % (the rule's 50 %). Above a tenth bypassing, the guest's run is of another regime:
    // the model is held to the rule alone, said so, and at least one pinned case must be
    // compared with the kernel.
    const json& kr = rec.at("results");
    const double kernel_frames = kr.at("pktgen").at("sent").get<double>();
    const double bypassed_share = kr.contains("bypassed") && kr.at("bypassed").is_number() &&
                                          kernel_frames > 0
                                      ? kr.at("bypassed").get<double>() / kernel_frames
                                      : 0.0;
    constexpr double kBacklogBypassedShare = 0.10;
    const bool kernel_backlog = bypassed_share <= kBacklogBypassedShare;
    if (pinned && !kernel_backlog)
      std::printf("%s kernel: %.1f %% of its frames bypassed an empty qdisc (no steady backlog in "
                  "this run): the model is held to the rule alone\n",
                  name.c_str(), 100 * bypassed_share);
    if (pinned && kernel_backlog) ++pinned_beside_kernel;
    std::set<std::string> engines;
    for (const json& m : cases[name]->at("records")) {
      const std::string engine = m.at("config").at("engine").get<std::string>();
      SCOPED_TRACE(engine);
      engines.insert(engine);
      const json& r = m.at("results");
      EXPECT_TRUE(r.at("accounting").at("balanced").get<bool>()) << r.at("accounting");
      const Hist h = HistOf(r.at("dequeue_sizes"));
      ASSERT_GE(Total(h), kMinBulks) << r.at("dequeue_sizes");
      if (pinned && kernel_backlog) {
        ComparePinned(kernel, h);
      } else if (pinned) {
        // The rule itself: half the bulks single frames, the others N.
        EXPECT_NEAR(Share(h, 1), 0.5, 0.10) << "singles' share (the rule's half)";
        EXPECT_TRUE(Modes(h).count(c.at("bql").at("frames").get<unsigned>()))
            << "the full bulk, N = " << c.at("bql").at("frames") << ", among the modes "
            << Text(Modes(h));
      } else
        CompareDynamic(kernel, h, rec, r.at("bql").at("limit").get<uint64_t>());
    }
    EXPECT_EQ(engines, (std::set<std::string>{"real", "sim"}));
  }
  EXPECT_EQ(compared, (std::set<std::string>{"bql_10", "bql_40", "bql_dynamic"}));
  EXPECT_GE(pinned_beside_kernel, 1u) << "no pinned case's guest run held a backlog";
  if (!HasFailure()) std::filesystem::remove_all(both.dir);
}

}  // namespace
}  // namespace txbatch::test
