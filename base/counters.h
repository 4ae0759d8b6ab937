#pragma once
// Counters readable from other threads while one writer at a time updates them.

#include <atomic>
#include <cstdint>

namespace txbatch {

// A counter with one writer at a time (the holder of the lock that guards what it counts) and
// any number of readers: a relaxed load + store, no locked instruction on the hot path.
class Counter {
 public:
  void Add(uint64_t n = 1) {
    v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  void Sub(uint64_t n = 1) {
    v_.store(v_.load(std::memory_order_relaxed) - n, std::memory_order_relaxed);
  }
  // Raises the value to `v` if larger (same single-writer rule).
  void Max(uint64_t v) {
    if (v > Get()) v_.store(v, std::memory_order_relaxed);
  }
  uint64_t Get() const { return v_.load(std::memory_order_relaxed); }
  void Reset() { v_.store(0, std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

// A counter any number of threads may add to at once (one locked add each): for events written
// outside any lock, such as drops by producers of a lock-free qdisc.
class SharedCounter {
 public:
  void Add(uint64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t Get() const { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> v_{0};
};

}  // namespace txbatch
