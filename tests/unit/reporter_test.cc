// The reporter writes what a polling loop posts, in order, on a thread of its own: a job that
// waits (a reader that stalled) holds up that thread only; what waits past its bound is dropped
// and counted, and Finish writes everything else before it returns. An interval output
// (tools/interval_output.h, the bridge's and the sink's --stats) folds an interval its reporter
// had no room for into the next one written.
#include "tools/reporter.h"

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <mutex>
#include <vector>

#include "tools/interval_output.h"

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

// Frees a write held on `release` however the test ends (an output's reporter is finished, its
// jobs run, before the output goes).
struct Unblock {
  std::promise<void>& release;
  bool done = false;
  void operator()() {
    if (!done) release.set_value();
    done = true;
  }
  ~Unblock() { (*this)(); }
};

// A reader that stalls at the first interval: kMaxPending more wait behind it, the next is
// refused, and the loop's last (not droppable) is taken past the bound. Interval k ends at k s
// with a total of 10 k frames and one latency sample added since the one before, so every
// interval holds 10 frames and 1 sample — except the last written, which covers the refused one
// too: from (k - 1) s, 20 frames, 2 samples.
TEST(IntervalOutput, AnIntervalWithNoRoomIsFoldedIntoTheNextWritten) {
  struct Written {
    double from_s, at_s;
    uint64_t frames, samples;
  };
  std::promise<void> started, release;
  std::shared_future<void> released = release.get_future().share();
  std::mutex mu;
  std::vector<Written> written;
  bool stalled = false;  // read and written on the reporter's thread only
  using Output = IntervalOutput<uint64_t, uint64_t>;  // frames so far; latency samples since
  Output out([&](const Output::Interval& t) {
    if (!stalled) {
      stalled = true;
      started.set_value();
      released.wait();  // a reader that stopped reading
    }
    std::lock_guard lk(mu);
    written.push_back({t.from_s, t.at_s, t.now - t.before, t.unwritten});
  });
  Unblock unblock{release};
  const auto post = [&out](int k, bool droppable) {
    out.unwritten() += 1;
    return out.Post(k, 10u * k, droppable);
  };
  ASSERT_TRUE(post(1, true));
  ASSERT_EQ(started.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready)
      << "the reporter never ran the first interval's write";
  const int refused = 2 + static_cast<int>(Reporter::kMaxPending);
  for (int k = 2; k < refused; ++k) ASSERT_TRUE(post(k, true)) << "interval " << k;
  EXPECT_FALSE(post(refused, true)) << "taken, though kMaxPending intervals were waiting";
  EXPECT_TRUE(out.behind());
  EXPECT_TRUE(post(refused + 1, /*droppable=*/false));
  EXPECT_FALSE(out.behind());
  unblock();
  out.reporter().Finish();
  EXPECT_EQ(out.reporter().dropped(), 1u);

  ASSERT_EQ(written.size(), Reporter::kMaxPending + 2);  // all but the refused one
  double ended_s = 0;
  uint64_t frames = 0, samples = 0;
  for (size_t i = 0; i < written.size(); ++i) {
    EXPECT_EQ(written[i].from_s, ended_s)
        << "interval " << i << " written does not start where the last one written ended";
    ended_s = written[i].at_s;
    frames += written[i].frames;
    samples += written[i].samples;
  }
  EXPECT_EQ(written.back().from_s, refused - 1);
  EXPECT_EQ(written.back().at_s, refused + 1);
  EXPECT_EQ(written.back().frames, 20u) << "the refused interval's frames were not carried over";
  EXPECT_EQ(written.back().samples, 2u) << "the refused interval's latency was not carried over";
  EXPECT_EQ(frames, 10u * (refused + 1)) << "the intervals written do not add up to the totals";
  EXPECT_EQ(samples, static_cast<uint64_t>(refused + 1));
}

}  // namespace
}  // namespace txbatch
