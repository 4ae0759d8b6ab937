#pragma once
// The measured part of a run (DESIGN.md Terms, "run window"): rates and latency count only
// events whose time falls in [start, end); warm-up before and drain after are excluded from
// rates but not from the books.

#include <atomic>

#include "base/tsc.h"

namespace txbatch {

struct RunWindow {
  std::atomic<Tsc> start{kNever};
  std::atomic<Tsc> end{kNever};
  bool Contains(Tsc t) const {
    return t >= start.load(std::memory_order_relaxed) && t < end.load(std::memory_order_relaxed);
  }
};

}  // namespace txbatch
