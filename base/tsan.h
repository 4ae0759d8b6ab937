#pragma once
// ThreadSanitizer cannot see the synchronisation inside Debian's DPDK (not instrumented): a frame
// handed to another thread through a mempool or a PMD's ring looks like a data race to it. These
// tell it about each hand-over (scripts/tsan.sh); in every other build they are empty and vanish.

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace txbatch {

// `p` is handed to another thread: what this thread wrote to it happens before that thread's use.
inline void TsanRelease(const void* p) {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(const_cast<void*>(p));
#else
  (void)p;
#endif
}

// `p` was handed over by another thread (the pair of TsanRelease).
inline void TsanAcquire(const void* p) {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(const_cast<void*>(p));
#else
  (void)p;
#endif
}

}  // namespace txbatch
