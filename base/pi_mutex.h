#pragma once
// A mutex with priority inheritance (PTHREAD_PRIO_INHERIT), for locks the SCHED_FIFO txirq
// thread shares with producers. When the txirq waits for such a lock held by a producer that a
// sibling producer has preempted, inheritance lifts the holder to the txirq's priority so it
// finishes its short critical section at once instead of after the sibling's time slice (that
// inversion left the e1000 ring idle for milliseconds, seen here). Uncontended it is one CAS.
// Lockable; annotated for clang's thread-safety analysis: take it with LockGuard / UniqueLock
// (base/thread_annotations.h) where the members it guards say GUARDED_BY.

#include <pthread.h>

#include "base/thread_annotations.h"

namespace txbatch {

class CAPABILITY("mutex") PiMutex {
 public:
  // `inherit` false gives a plain futex mutex (for a lock many producers contend on, where
  // inheritance's strict hand-over costs more than it saves).
  explicit PiMutex(bool inherit = true) {
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    if (inherit) pthread_mutexattr_setprotocol(&attr, PTHREAD_PRIO_INHERIT);
    pthread_mutex_init(&m_, &attr);
    pthread_mutexattr_destroy(&attr);
  }
  ~PiMutex() { pthread_mutex_destroy(&m_); }
  PiMutex(const PiMutex&) = delete;
  PiMutex& operator=(const PiMutex&) = delete;

  void lock() ACQUIRE() { pthread_mutex_lock(&m_); }
  void unlock() RELEASE() { pthread_mutex_unlock(&m_); }
  bool try_lock() TRY_ACQUIRE(true) { return pthread_mutex_trylock(&m_) == 0; }

 private:
  pthread_mutex_t m_;
};

}  // namespace txbatch
