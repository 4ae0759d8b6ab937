#pragma once
// Clocks read in nanoseconds: a thread's own CPU time, and the monotonic wall clock. What a
// cell's CPU cost and the scheduler probe's timed waits are measured with.

#include <pthread.h>
#include <time.h>

namespace txbatch {

inline double TimespecNs(const timespec& ts) {
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// The CPU time thread `t` has used (0 where its clock cannot be had: it has ended).
inline double ThreadCpuNs(pthread_t t = pthread_self()) {
  clockid_t cid;
  if (pthread_getcpuclockid(t, &cid) != 0) return 0;
  timespec ts{};
  clock_gettime(cid, &ts);
  return TimespecNs(ts);
}

inline double MonotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return TimespecNs(ts);
}

}  // namespace txbatch
