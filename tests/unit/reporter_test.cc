// The reporter writes what a polling loop posts, in order, on a thread of its own: a job that
// waits (a reader that stalled) holds up that thread only; what waits past its bound is dropped
// and counted, and Finish writes everything else before it returns.
#include "tools/reporter.h"

#include <gtest/gtest.h>

#include <future>
#include <mutex>
#include <vector>

namespace txbatch {
namespace {

TEST(Reporter, AStalledWriteNeverHoldsUpThePosterAndWhatItCannotKeepIsCounted) {
  std::promise<void> started, release;
  std::shared_future<void> released = release.get_future().share();
  std::mutex mu;
  std::vector<int> ran;
  Reporter r;
  ASSERT_TRUE(r.Post([&started, released] {
    started.set_value();
    released.wait();  // a write to a reader that stopped reading
  }));
  started.get_future().wait();
  // Every Post returns while the first job waits (if one waited, this test would never end).
  const int posts = static_cast<int>(Reporter::kMaxPending) + 36;
  int accepted = 0;
  for (int i = 0; i < posts; ++i)
    accepted += r.Post([&mu, &ran, i] {
      std::lock_guard lk(mu);
      ran.push_back(i);
    });
  EXPECT_EQ(accepted, static_cast<int>(Reporter::kMaxPending));
  EXPECT_EQ(r.dropped(), 36u);
  release.set_value();
  r.Finish();
  std::vector<int> want(Reporter::kMaxPending);
  for (size_t i = 0; i < want.size(); ++i) want[i] = static_cast<int>(i);
  EXPECT_EQ(ran, want);  // the first kMaxPending, in the order posted
  // After Finish a job runs on the caller's thread, at once.
  bool late = false;
  EXPECT_TRUE(r.Post([&late] { late = true; }));
  EXPECT_TRUE(late);
}

}  // namespace
}  // namespace txbatch
