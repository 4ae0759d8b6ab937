// Compiled by tests/layers_test.sh with clang's -Wthread-safety(-beta) -Werror: as it stands it
// must compile (a member read under its lock, two locks in their order), with -DBREACH it must
// not (the member read without its lock), nor with -DBREACH_ORDER (the locks in the other order). Proves the annotations in base/thread_annotations.h are live under clang, so that
// the build's clean -Wthread-safety means the locks were checked, not that nothing was.

#include "base/pi_mutex.h"
#include "base/thread_annotations.h"

namespace {

struct Guarded {
  txbatch::PiMutex mu;
  txbatch::Mutex other ACQUIRED_AFTER(mu);
  int value GUARDED_BY(mu) = 0;
  int counted GUARDED_BY(other) = 0;

  int Read() {
    txbatch::LockGuard lock(mu);
    return value;
  }
  void Both() {
    txbatch::UniqueLock lock(mu);
    ++value;
    lock.unlock();
    txbatch::LockGuard second(other);
    ++counted;
  }
#ifdef BREACH
  int ReadUnlocked() { return value; }
#endif
#ifdef BREACH_ORDER
  void OtherFirst() {
    txbatch::LockGuard second(other);
    txbatch::LockGuard first(mu);
  }
#endif
};

}  // namespace

int main() {
  Guarded g;
  g.Both();
  return g.Read() == 1 ? 0 : 1;
}
