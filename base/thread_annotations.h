#pragma once
// Clang's thread-safety analysis (-Wthread-safety: the top-level meson.build turns it on, as an
// error, for every clang build — CI's sanitizer build is one): which lock guards a member, which
// a function must hold, and the order locks are taken in, checked at compile time. Other
// compilers see nothing. libstdc++'s std::mutex and std::lock_guard carry no annotations, so the
// locks the analysis checks are txbatch's own: PiMutex (base/pi_mutex.h), Mutex and the scoped
// locks below.

#include <cassert>
#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define TXB_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define TXB_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) TXB_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY TXB_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) TXB_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) TXB_THREAD_ANNOTATION(pt_guarded_by(x))
#define ACQUIRED_BEFORE(...) TXB_THREAD_ANNOTATION(acquired_before(__VA_ARGS__))
#define ACQUIRED_AFTER(...) TXB_THREAD_ANNOTATION(acquired_after(__VA_ARGS__))
#define REQUIRES(...) TXB_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define ACQUIRE(...) TXB_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RELEASE(...) TXB_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) TXB_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define EXCLUDES(...) TXB_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS TXB_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace txbatch {

// std::mutex with the analysis's annotations.
class CAPABILITY("mutex") Mutex {
 public:
  void lock() ACQUIRE() { m_.lock(); }
  void unlock() RELEASE() { m_.unlock(); }
  bool try_lock() TRY_ACQUIRE(true) { return m_.try_lock(); }
  // For CondVar alone: the analysis does not see what is done through it.
  std::mutex& native() { return m_; }

 private:
  std::mutex m_;
};

// std::lock_guard for an annotated lock (Mutex, PiMutex): held from construction to the end of
// the scope.
template <class M>
class SCOPED_CAPABILITY LockGuard {
 public:
  explicit LockGuard(M& m) ACQUIRE(m) : m_(m) { m_.lock(); }
  ~LockGuard() RELEASE() { m_.unlock(); }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  M& m_;
};

// std::unique_lock for an annotated lock: let go and taken again inside its scope (unlock/lock),
// and Lockable, so std::condition_variable_any waits on it.
template <class M>
class SCOPED_CAPABILITY UniqueLock {
 public:
  explicit UniqueLock(M& m) ACQUIRE(m) : m_(m) { m_.lock(); }
  ~UniqueLock() RELEASE() {
    if (held_) m_.unlock();
  }
  UniqueLock(const UniqueLock&) = delete;
  UniqueLock& operator=(const UniqueLock&) = delete;
  void lock() ACQUIRE() {
    m_.lock();
    held_ = true;
  }
  void unlock() RELEASE() {
    held_ = false;
    m_.unlock();
  }
  bool owns_lock() const { return held_; }
  M& mutex() const { return m_; }

 private:
  M& m_;
  bool held_ = true;
};

// A held lock let go for a scope and taken again at its end, however the scope ends (an
// exception too): sch_direct_xmit's root lock around the driver call. The analysis sees it let
// go inside and held again after.
template <class M>
class SCOPED_CAPABILITY Unlocked {
 public:
  explicit Unlocked(M& m) RELEASE(m) : m_(m) { m_.unlock(); }
  ~Unlocked() RELEASE() { m_.lock(); }
  Unlocked(const Unlocked&) = delete;
  Unlocked& operator=(const Unlocked&) = delete;

 private:
  M& m_;
};

// std::condition_variable waiting on a UniqueLock<Mutex>: the same wait (one futex, not the
// second lock std::condition_variable_any takes on every notify), the lock let go while asleep
// and held again on return, as the analysis assumes of a call that keeps it.
class CondVar {
 public:
  void wait(UniqueLock<Mutex>& lock) {
    Adopted native(lock);
    cv_.wait(native.lock);
  }
  template <class Rep, class Period>
  void wait_for(UniqueLock<Mutex>& lock, const std::chrono::duration<Rep, Period>& d) {
    Adopted native(lock);
    cv_.wait_for(native.lock, d);
  }
  void notify_one() noexcept { cv_.notify_one(); }
  void notify_all() noexcept { cv_.notify_all(); }

 private:
  // The caller's lock as std::condition_variable takes it, handed back held on every way out
  // (the caller's UniqueLock lets it go, once).
  struct Adopted {
    explicit Adopted(UniqueLock<Mutex>& l) : lock(l.mutex().native(), std::adopt_lock) {
      assert(l.owns_lock());
    }
    ~Adopted() { lock.release(); }
    Adopted(const Adopted&) = delete;
    Adopted& operator=(const Adopted&) = delete;
    std::unique_lock<std::mutex> lock;
  };
  std::condition_variable cv_;
};

}  // namespace txbatch
