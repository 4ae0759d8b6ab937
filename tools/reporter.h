#pragma once
// What a polling loop reports as it runs (each --stats interval's line on standard output and its
// --stats-json event), written by a thread of its own: the loop that forwards or counts frames
// never waits for a reader. A reader that stalls — a pipe nobody drains, `| less` a page in, a
// terminal held with Ctrl-S — holds up this thread, not the ports; what it cannot keep up with is
// dropped and counted, never queued without bound. Control plane.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace txbatch {

class Reporter {
 public:
  // Jobs waiting (besides the one being written) past which a new one is dropped: at --stats 1,
  // a minute of a stalled reader.
  static constexpr size_t kMaxPending = 64;

  // Starts the thread (off the main lcore's CPU where EAL has another; needs EAL started).
  Reporter();
  ~Reporter();  // Finish()
  Reporter(const Reporter&) = delete;
  Reporter& operator=(const Reporter&) = delete;

  // Queues `job` (it writes one interval) for the reporter's thread, in order; never waits for
  // one to run. False, and `job` dropped and counted, where kMaxPending wait already — unless
  // not `droppable` (a line said once, not an interval): that one is queued past the bound.
  bool Post(std::function<void()> job, bool droppable = true);
  // Runs every job posted, then ends the thread: returns once their writes are done (a stalled
  // reader is waited for here, after the loop). Posting after it runs the job here. Post and
  // Finish are called from one thread (the loop's); a job that throws is said on stderr.
  void Finish();
  // Jobs dropped because the reader did not keep up.
  uint64_t dropped() const;

 private:
  void Loop();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;  // guarded by mu_
  bool finish_ = false;                     // guarded by mu_
  uint64_t dropped_ = 0;                    // guarded by mu_
  std::thread thread_;
};

}  // namespace txbatch
