#pragma once
// ThreadSanitizer cannot see the synchronisation inside Debian's DPDK (not instrumented): a frame
// handed to another thread through a mempool or a PMD's ring looks like a data race to it. These
// tell it about each hand-over (scripts/tsan.sh); in every other build they are empty and vanish.

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#endif

namespace txbatch {

#if defined(__SANITIZE_THREAD__)
// `p` is handed to another thread: what this thread wrote to it happens before that thread's use.
inline void TsanRelease(const void* p) { __tsan_release(const_cast<void*>(p)); }
// `p` was handed over by another thread (the pair of TsanRelease).
inline void TsanAcquire(const void* p) { __tsan_acquire(const_cast<void*>(p)); }
#else
// Without ThreadSanitizer there is nobody to tell.
inline void TsanRelease(const void*) {}
inline void TsanAcquire(const void*) {}
#endif

}  // namespace txbatch
