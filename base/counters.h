#pragma once
// Counters readable from other threads while one writer at a time updates them.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

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

// Counter structs list their fields once, in a static Fields(f, s...) that calls f(tag, field of
// each s...) for every field: the tag says how the field adds up over several queues and what
// its difference over a window is — Sum (a count: added; later minus earlier) or Max (a
// largest value or a latest time: the larger; the later). Each struct is a template over the
// cell type, so the same list serves the live counters (Counter, SharedCounter) and their values
// read at one moment (uint64_t); AddInto, ReadInto and Difference below work on any of them.
struct Sum {};
struct Max {};

inline uint64_t ValueOf(const Counter& c) { return c.Get(); }
inline uint64_t ValueOf(const SharedCounter& c) { return c.Get(); }
inline uint64_t ValueOf(uint64_t v) { return v; }

namespace counters_detail {
template <class T>
struct IsArray : std::false_type {};
template <class T, size_t N>
struct IsArray<std::array<T, N>> : std::true_type {};

// f(tag, x, y...) once for a scalar field, element by element for an array field.
template <class F, class Tag, class X, class... Y>
void Cells(F& f, Tag tag, X& x, Y&... y) {
  if constexpr (IsArray<std::remove_const_t<X>>::value) {
    for (size_t i = 0; i < x.size(); ++i) f(tag, x[i], y[i]...);
  } else {
    f(tag, x, y...);
  }
}
}  // namespace counters_detail

// Calls f(tag, cell of s...) for every cell of the counter structs `s` (one type's Fields).
template <class Struct, class F, class... S>
void ForEachCell(F&& f, S&... s) {
  Struct::Fields([&f](auto tag, auto&... fields) { counters_detail::Cells(f, tag, fields...); },
                 s...);
}

// Adds one queue's counters to a total (maxima stay maxima). The total has one writer.
template <class Total, class Part>
void AddInto(Total& total, const Part& part) {
  ForEachCell<Total>(
      [](auto tag, auto& t, const auto& p) {
        if constexpr (std::is_same_v<decltype(tag), Max>)
          t.Max(ValueOf(p));
        else
          t.Add(ValueOf(p));
      },
      total, part);
}

// The values of live counters, read now (each one relaxed: a moment, not an atomic cut).
template <class Values, class Live>
void ReadInto(Values& values, const Live& live) {
  ForEachCell<Values>([](auto, uint64_t& v, const auto& c) { v = ValueOf(c); }, values, live);
}

// What happened between two readings: counts subtracted, maxima and times as read later.
template <class Values>
Values Difference(const Values& later, const Values& earlier) {
  Values d{};
  ForEachCell<Values>(
      [](auto tag, uint64_t& out, const uint64_t& b, const uint64_t& a) {
        if constexpr (std::is_same_v<decltype(tag), Max>)
          out = b;
        else
          out = b - a;
      },
      d, later, earlier);
  return d;
}

}  // namespace txbatch
