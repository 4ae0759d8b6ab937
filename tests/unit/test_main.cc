// gtest main for the unit suite: starts EAL once (--no-huge, no PCI, no telemetry) so tests can
// use real mbufs from a real mempool.
#include <gtest/gtest.h>

#include <memory>

#include "batching/batch.h"
#include "dataplane/eal.h"
#include "dataplane/mempool.h"
#include "tests/unit/test_eal.h"

namespace txbatch::test {
namespace {

std::unique_ptr<Eal> g_eal;
PoolPtr g_pool;
// Two full batches (kMaxBatch), less one: a power of two less one suits the mempool's ring.
constexpr unsigned kPoolMbufs = 2 * kMaxBatch - 1;

class EalEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    auto plan = PlanEal(PoolBytes(kPoolMbufs, 1500), {}, EalMemory::kNoHuge);
    ASSERT_TRUE(plan.ok());
    auto eal = Eal::Start(*plan);
    ASSERT_TRUE(eal.ok()) << eal.error().message;
    g_eal = std::move(*eal);
    auto pool = CreatePacketPool("unit_pool", kPoolMbufs, 1500);
    ASSERT_TRUE(pool.ok()) << pool.error().message;
    g_pool = std::move(*pool);
  }
  void TearDown() override {
    g_pool.reset();
    g_eal.reset();
  }
};

}  // namespace

rte_mempool* Pool() { return g_pool.get(); }
double TscHz() { return g_eal->tsc_hz(); }

}  // namespace txbatch::test

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new txbatch::test::EalEnvironment);
  return RUN_ALL_TESTS();
}
