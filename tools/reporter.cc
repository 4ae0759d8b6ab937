#include "tools/reporter.h"

#include <pthread.h>

#include <cstdio>
#include <exception>
#include <utility>

#include "dataplane/eal.h"

namespace txbatch {

Reporter::Reporter() : thread_([this] { Loop(); }) {}

Reporter::~Reporter() { Finish(); }

bool Reporter::Post(std::function<void()> job, bool droppable) {
  {
    std::lock_guard lk(mu_);
    if (!finish_) {
      if (droppable && jobs_.size() >= kMaxPending) {
        ++dropped_;
        return false;
      }
      jobs_.push_back(std::move(job));
      cv_.notify_one();
      return true;
    }
  }
  job();  // the thread has ended: nothing runs beside this one
  return true;
}

void Reporter::Finish() {
  {
    std::lock_guard lk(mu_);
    finish_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

uint64_t Reporter::dropped() const {
  std::lock_guard lk(mu_);
  return dropped_;
}

void Reporter::Loop() {
  pthread_setname_np(pthread_self(), "txb-report");
  EnterOutputThread();
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [this] { return finish_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // finishing, and everything posted has run
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lk.unlock();  // the write may wait for its reader: the loop keeps posting meanwhile
    try {
      job();
    } catch (const std::exception& e) {
      // A write that threw (fmt on a failed stream, an allocation) ends nothing but itself.
      std::fprintf(stderr, "txbatch: a --stats line could not be written: %s\n", e.what());
    }
    job = nullptr;  // what it held is freed before the lock is taken again
    lk.lock();
  }
}

}  // namespace txbatch
