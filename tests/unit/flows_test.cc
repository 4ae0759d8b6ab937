// --flows (issue 46, item 3): which producer sends which flow, the turn a producer's writes take
// among its flows (TCP Small Queues hold a flow back, not the producer), Jain's index, and
// fq_codel hashing the flows of a cell apart.
#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "dataplane/fq_codel.h"
#include "dataplane/frame.h"
#include "dataplane/producer.h"
#include "engine/cell.h"
#include "tests/unit/test_eal.h"

namespace txbatch {
namespace {

TEST(Flows, EachProducerSendsItsOwnRangeAndTheProbeTheLast) {
  CellConfig c;
  c.procs = 3;
  c.flows = 4;
  c.probe = RateSpec{RateSpec::Unit::kPps, 100};
  EXPECT_EQ(Producers(c), 4u);
  EXPECT_EQ(Flows(c), 13u);
  EXPECT_EQ(LoadFlows(c), 12u);
  EXPECT_EQ(ProbeFlow(c), 12u);
  std::vector<unsigned> owner(Flows(c), ~0u);
  for (unsigned i = 0; i < Producers(c); ++i) {
    const FlowRange r = ProducerFlows(c, i);
    EXPECT_EQ(r.count, i < c.procs ? c.flows : 1u) << i;
    for (unsigned f = r.first; f < r.first + r.count; ++f) {
      EXPECT_EQ(owner[f], ~0u) << "flow " << f << " sent by two producers";
      owner[f] = i;
      EXPECT_EQ(ProducerOfFlow(c, f), i) << f;
    }
  }
  for (unsigned f = 0; f < Flows(c); ++f) EXPECT_NE(owner[f], ~0u) << "flow " << f << " unsent";
  EXPECT_EQ(owner[ProbeFlow(c)], c.procs);  // the probe producer (index procs)
}

TEST(Flows, AWriteGoesToTheNextFlowThatTsqDoesNotHoldBack) {
  const auto none = [](unsigned) { return false; };
  EXPECT_EQ(NextFlow(0, 4, none), 0u);
  EXPECT_EQ(NextFlow(3, 4, none), 3u);
  EXPECT_EQ(NextFlow(4, 4, none), 0u);  // after the last, the first
  // Flows 1 and 2 throttled: from 1 the turn passes to 3; from 3 on to 3.
  const auto held = [](unsigned f) { return f == 1 || f == 2; };
  EXPECT_EQ(NextFlow(1, 4, held), 3u);
  EXPECT_EQ(NextFlow(2, 4, held), 3u);
  EXPECT_EQ(NextFlow(0, 4, held), 0u);
  // All throttled: the write waits for the one whose turn it is.
  const auto all = [](unsigned) { return true; };
  EXPECT_EQ(NextFlow(2, 4, all), 2u);
  EXPECT_EQ(NextFlow(5, 4, all), 1u);
  EXPECT_EQ(NextFlow(7, 1, none), 0u);
}

TEST(Flows, JainsIndexIsOneForEqualSharesAndOneOverNForOneFlowAlone) {
  const std::vector<uint64_t> equal{7, 7, 7, 7}, alone{0, 0, 9, 0}, nothing{0, 0};
  EXPECT_DOUBLE_EQ(JainIndex(equal), 1.0);
  EXPECT_DOUBLE_EQ(JainIndex(alone), 0.25);
  EXPECT_DOUBLE_EQ(JainIndex(nothing), 1.0);  // nothing to be unfair with
  // (1 + 3)^2 / (2 x (1 + 9)) = 16 / 20.
  const std::vector<uint64_t> one_three{1, 3};
  EXPECT_DOUBLE_EQ(JainIndex(one_three), 0.8);
}

// A cell's flows differ in their source port alone (49152 + id); fq_codel hashes the 5-tuple
// with jhash (a fixed seed: the buckets are the same every run), so flows may share a bucket as
// in the kernel (there with a random perturbation). Eight flows into 1024 buckets collide with
// probability 1 - prod(1 - k/1024, k < 8) = 2.7 %; with this seed they do not, and the flows of
// txbatch's default fq_codel are eight queues of their own.
TEST(Flows, FqCodelHashesACellsFlowsIntoBucketsOfTheirOwn) {
  QdiscCounters c;
  FqCodel q(FqCodelParams{}, 1514, 1e9, c);
  std::set<uint32_t> buckets;
  for (uint16_t flow = 0; flow < 8; ++flow) {
    FrameBuilder b(Proto::kTcp, flow, false);
    rte_mbuf* m = rte_pktmbuf_alloc(test::Pool());
    ASSERT_NE(m, nullptr);
    b.Build(m, 1448, 1);
    buckets.insert(q.Classify(m));
    EXPECT_LT(q.Classify(m), FqCodelParams{}.flows);
    rte_pktmbuf_free(m);
  }
  EXPECT_EQ(buckets.size(), 8u);
}

}  // namespace
}  // namespace txbatch
