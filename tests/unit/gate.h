#pragma once
// A point a thread stops at until the test lets it go: the test waits for the thread to arrive,
// looks at what it wants to see meanwhile, and releases it (the queue tests' gated drivers and
// policies).

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace txbatch::test {

// A one-shot gate: the thread that reaches Stop waits there (at most kWait) until Release.
class Gate {
 public:
  static constexpr std::chrono::seconds kWait{10};
  void Stop() {
    std::unique_lock lk(mu_);
    arrived_ = true;
    cv_.notify_all();
    cv_.wait_for(lk, kWait, [&] { return released_; });
  }
  // Waits (bounded) until a thread stopped here; false if none came.
  bool WaitArrived() {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, kWait, [&] { return arrived_; });
  }
  void Release() {
    std::lock_guard lk(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool arrived_ = false, released_ = false;
};

}  // namespace txbatch::test
