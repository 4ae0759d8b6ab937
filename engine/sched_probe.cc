#include "engine/sched_probe.h"

#include <linux/futex.h>
#include <pthread.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_pause.h>
#include <rte_ring.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <span>
#include <thread>
#include <vector>

#include "base/pi_mutex.h"
#include "base/thread_clock.h"
#include "base/tsc.h"
#include "base/median.h"

namespace txbatch {
namespace {

constexpr int kPasses = 2000;
constexpr int kCalls = 20000;
constexpr int kLinePasses = 100000;
constexpr int kTimedWaits = 2000;
constexpr int kPiPasses = 20000;
// IdleScan's gaps (us) and passes at each (the longest is the halted price).
constexpr std::array kIdleGapsUs = {25, 50, 75, 100, 125, 150, 175, 200, 250, 300, 400, 600, 1000};
constexpr int kIdlePasses = 100;
constexpr Tsc kPiHold = 3000, kPiAway = 300;
constexpr double kSpinS = 0.2;  // a spinner's time in TimerIrq, alone and beside the waiter
constexpr Tsc kLostGap = 1000;  // TSC between a spinner's two reads that it lost (a loop: ~30)
constexpr double kTickGapMaxS = 1e-3;  // a longer gap is a descheduling, not a tick
constexpr unsigned kRecycleBulk = 32;
constexpr int kRecycleBulks = 20000;
constexpr unsigned kRecycleRing = 256;  // its ring's count: 255 mbufs on their way at most

long Futex(std::atomic<int>* word, int op, int value, const timespec* timeout = nullptr) {
  return syscall(SYS_futex, reinterpret_cast<int*>(word), op, value, timeout, nullptr, 0);
}

bool PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// Whether a thread may be pinned to `cpu` (unpinned, two spinners on one CPU would take a time
// slice a pass: LinePass would run for minutes).
bool CanPin(int cpu) {
  bool ok = false;
  std::thread t([&] { ok = PinTo(cpu); });
  t.join();
  return ok;
}

// TSC cycles a FUTEX_WAKE costs with nobody waiting: the system call's own price.
double FutexCall(int cpu) {
  double cycles = 0;
  std::thread t([&] {
    PinTo(cpu);
    std::atomic<int> word{0};
    const Tsc t0 = Now();
    for (int i = 0; i < kCalls; ++i) Futex(&word, FUTEX_WAKE_PRIVATE, 1);
    cycles = static_cast<double>(Now() - t0) / kCalls;
  });
  t.join();
  return cycles;
}

struct Passes {
  double pass = 0;       // TSC cycles a pass
  double wake_call = 0;  // the median FUTEX_WAKE call (the other thread asleep in FUTEX_WAIT)
};

// Two threads on `a` and `b` pass a turn back and forth through a futex word. The other thread
// has long been asleep when a turn is passed (a pass is tens of microseconds on a guest): the
// wake call is what waking a sleeper costs its waker. `armed`: each sleep has a timer set, as a
// condition variable's wait_for (125 us, the txirq's and a runner's idle poll: the CPU's next
// timer, so setting and cancelling it reprograms the CPU's timer; the wake comes long before; a
// partner descheduled past it makes a wait time out and wait again, rare where a pass is a few
// microseconds).
// `gap`: each thread spins that long before it passes the turn, so the other's CPU has idled as
// long (IdleScan); the pass is counted without it.
Passes Handoff(int a, int b, bool armed = false, Tsc gap = 0, int passes = kPasses) {
  const timespec poll{0, 125000};
  std::atomic<int> turn{0};
  std::vector<double> calls[2];
  const auto player = [&](int me, int cpu) {
    PinTo(cpu);
    if (armed) prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    calls[me].reserve(static_cast<size_t>(passes));
    for (int i = 0; i < passes; ++i) {
      while (turn.load() != me) Futex(&turn, FUTEX_WAIT_PRIVATE, 1 - me, armed ? &poll : nullptr);
      if (gap > 0) BusyWaitUntil(Now() + gap);
      turn.store(1 - me);
      const Tsc w0 = Now();
      Futex(&turn, FUTEX_WAKE_PRIVATE, 1);
      calls[me].push_back(static_cast<double>(Now() - w0));
    }
  };
  const Tsc t0 = Now();
  std::thread x(player, 0, a), y(player, 1, b);
  x.join();
  y.join();
  Passes p;
  p.pass =
      (static_cast<double>(Now() - t0) - 2.0 * passes * static_cast<double>(gap)) / (2.0 * passes);
  calls[0].insert(calls[0].end(), calls[1].begin(), calls[1].end());
  p.wake_call = Median(calls[0]);
  return p;
}

// The CPU, in TSC cycles, a thread on `cpu` spends on a futex wait whose 20 us timeout ends it
// (nobody wakes it): the call, the timer armed, the switches out and back in, the return (on a
// guest the timer is a VM exit each way; the interrupt itself lands while the thread sleeps and
// is not counted). Its own CPU time, not the wall's: the CPU may idle meanwhile. With 1 ns of
// timer slack, as txbatch's threads.
double TimedWait(int cpu) {
  double cycles = 0;
  std::thread t([&] {
    PinTo(cpu);
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    std::atomic<int> word{0};
    const timespec wait{0, 20000};
    const double cpu0 = ThreadCpuNs(), wall0 = MonotonicNs();
    const Tsc t0 = Now();
    for (int i = 0; i < kTimedWaits; ++i) Futex(&word, FUTEX_WAIT_PRIVATE, 0, &wait);
    const double tsc_per_ns = static_cast<double>(Now() - t0) / (MonotonicNs() - wall0);
    cycles = (ThreadCpuNs() - cpu0) * tsc_per_ns / kTimedWaits;
  });
  t.join();
  return cycles;
}

struct Lost {
  double cycles = 0;  // TSC lost
  long gaps = 0;      // in so many gaps
  // Of them, the gaps shorter than the cap given (interrupts, not a descheduling).
  double short_cycles = 0;
  long short_gaps = 0;
};

// What a thread spinning on its CPU loses in `span`: the gaps between its clock reads longer
// than kLostGap (an interrupt, another thread run there), and those of them below `cap`.
Lost SpinLost(Tsc span, Tsc cap) {
  const Tsc t0 = Now();
  Tsc prev = t0;
  Lost l;
  while (prev - t0 < span) {
    const Tsc now = Now();
    if (const Tsc gap = now - prev; gap > kLostGap) {
      l.cycles += static_cast<double>(gap), ++l.gaps;
      if (gap < cap) l.short_cycles += static_cast<double>(gap), ++l.short_gaps;
    }
    prev = now;
  }
  return l;
}

struct IrqLoss {
  double per_wait = 0;    // what the spinner lost a timed wait beyond what it lost alone
  bool measured = false;  // both pinned, the waiter at SCHED_FIFO, and waits ended by the timer
  Lost alone;             // what the spinner lost alone (pinned: else nothing)
};

// What a timed wait that its timer ends costs a CPU busy with another thread, as the real
// txirq's idle poll costs the producer it preempts: a thread spinning on `cpu` for kSpinS alone,
// then beside a SCHED_FIFO thread on the same CPU that waits on a futex with a 125 us timeout
// again and again (1 ns of timer slack); per wait, the spinner's TSC lost beside it beyond alone
// (its ticks and the host's). The interrupt (on a guest, the exit to the host and back), the
// switches to the waiter and back, its return and its next call. Not measured where a thread
// cannot be pinned or SCHED_FIFO is not permitted (the real txirq then preempts nobody either).
IrqLoss TimerIrq(int cpu, double tsc_hz) {
  IrqLoss r;
  const Tsc span = static_cast<Tsc>(kSpinS * tsc_hz);
  const Tsc cap = static_cast<Tsc>(kTickGapMaxS * tsc_hz);
  Lost alone, beside;
  bool pinned = true;
  std::thread([&] {
    pinned &= PinTo(cpu);
    alone = SpinLost(span, cap);
  }).join();
  if (pinned) r.alone = alone;
  std::atomic<bool> stop{false}, ready{false}, fifo{false};
  std::atomic<long> waits{0};
  std::thread waiter([&] {
    sched_param sp{};
    sp.sched_priority = 1;
    fifo.store(PinTo(cpu) && pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp) == 0);
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    ready.store(true);
    std::atomic<int> word{0};
    const timespec poll{0, 125000};
    while (fifo.load() && !stop.load())  // counted where its timer ended it
      if (Futex(&word, FUTEX_WAIT_PRIVATE, 0, &poll) == -1 && errno == ETIMEDOUT)
        waits.fetch_add(1);
  });
  while (!ready.load()) std::this_thread::yield();
  if (fifo.load())
    std::thread([&] {
      pinned &= PinTo(cpu);
      const long w0 = waits.load();
      beside = SpinLost(span, cap);
      const long n = waits.load() - w0;
      r.measured = pinned && n > 0;
      if (r.measured)
        r.per_wait = std::max(0.0, (beside.cycles - alone.cycles) / static_cast<double>(n));
    }).join();
  stop.store(true);
  waiter.join();
  return r;
}

struct PiPasses {
  double unlock = 0;    // the holder's unlock call, a waiter spinning on it
  double handover = 0;  // from that call's start until the waiter's lock call returned
};

// Two threads on `a` and `b` take a priority-inheriting mutex in turn: each holds it kPiHold
// cycles and tries again kPiAway after letting go, so the other has long been waiting in
// FUTEX_LOCK_PI (spinning on its running owner) when it is let go. Medians over both threads.
PiPasses PiPass(int a, int b) {
  PiMutex m;
  std::atomic<Tsc> unlocked[2] = {0, 0};  // when each began its last unlock
  std::vector<double> unlock[2], handover[2];
  const auto player = [&](int me, int cpu) {
    PinTo(cpu);
    unlock[me].reserve(kPiPasses);
    handover[me].reserve(kPiPasses);
    for (int i = 0; i < kPiPasses; ++i) {
      const Tsc tried = Now();
      m.lock();
      const Tsc got = Now(), other = unlocked[1 - me].load();
      if (other > tried) handover[me].push_back(static_cast<double>(got - other));  // it waited
      BusyWaitUntil(got + kPiHold);
      const Tsc u0 = Now();
      unlocked[me].store(u0);
      m.unlock();
      unlock[me].push_back(static_cast<double>(Now() - u0));
      BusyWaitUntil(Now() + kPiAway);
    }
  };
  std::thread x(player, 0, a), y(player, 1, b);
  x.join();
  y.join();
  for (auto* v : {unlock, handover}) v[0].insert(v[0].end(), v[1].begin(), v[1].end());
  PiPasses p;
  p.unlock = Median(unlock[0]);
  p.handover = handover[0].empty() ? 0 : Median(handover[0]);
  return p;
}

}  // namespace

double SchedulerProbe::timer_arm() const {
  return same_cpu_handoff_armed > 0 ? std::max(0.0, same_cpu_handoff_armed - same_cpu_handoff) : 0;
}

double SchedulerProbe::timer_wake() const { return timed_wait; }

double SchedulerProbe::timer_irq() const {
  return preempting_measured ? std::max(0.0, preempting_wait - timed_wait - 2 * context_switch())
                             : 0;
}

double SchedulerProbe::context_switch() const {
  return std::max(0.0, same_cpu_handoff - 2 * futex);
}

double SchedulerProbe::remote_wake() const {
  return cross_cpu_wake_call > 0 ? std::max(0.0, cross_cpu_wake_call - futex) : 0;
}

// One round of ProbeRecycle's: each half's TSC an mbuf, on one thread (`remote` false, on
// `a`) or two (`a` builds, `b` receives). Nothing where a thread could not be pinned or
// registered.
struct RecycleRound {
  double build = 0, receive = 0;
};
std::optional<RecycleRound> RecyclePass(rte_mempool* pool, rte_ring* ring, int a, int b,
                                        bool remote) {
  std::array<rte_mbuf*, kRecycleBulk> bulk;
  std::atomic<bool> ok{true};
  // Allocates a bulk (retrying, untimed, while the other thread's cache holds the pool's
  // mbufs) and writes each one's first line: TSC of the successful allocation and the writes;
  // nothing once the other thread has failed.
  const auto build = [&](uint32_t stamp) -> std::optional<Tsc> {
    while (ok.load(std::memory_order_relaxed)) {
      const Tsc t0 = Now();
      if (rte_pktmbuf_alloc_bulk(pool, bulk.data(), kRecycleBulk) != 0) {
        rte_pause();
        continue;
      }
      for (rte_mbuf* m : bulk)
        std::memset(rte_pktmbuf_mtod(m, void*), static_cast<int>(stamp & 0xff), 64);
      return Now() - t0;
    }
    return std::nullopt;
  };
  // Reads each one's first line and frees them: TSC of it.
  std::atomic<uint64_t> sink{0};
  const auto receive = [&](std::span<rte_mbuf*> got) {
    const Tsc t0 = Now();
    uint64_t sum = 0;
    for (rte_mbuf* m : got) {
      const auto* d = rte_pktmbuf_mtod(m, const uint64_t*);
      for (int i = 0; i < 8; ++i) sum += d[i];
    }
    rte_pktmbuf_free_bulk(got.data(), static_cast<unsigned>(got.size()));
    sink.fetch_add(sum, std::memory_order_relaxed);
    return Now() - t0;
  };
  Tsc built = 0, received = 0;
  const auto enter = [&](int cpu) {
    if (!PinTo(cpu) || rte_thread_register() != 0) ok.store(false);
  };
  if (!remote) {
    // The same round trip through the ring on one thread: as many bulks built into it as it
    // holds, then all received, so only the CPU crossing differs from the pass across two.
    std::thread t([&] {
      enter(a);
      std::array<rte_mbuf*, kRecycleBulk> got;
      constexpr int kHeld = (kRecycleRing - 1) / kRecycleBulk;  // an rte_ring holds count - 1
      for (int i = 0; i < kRecycleBulks && ok.load();) {
        int held = 0;
        for (; held < kHeld && i < kRecycleBulks; ++held, ++i) {
          const auto t = build(static_cast<uint32_t>(i));
          if (!t) break;
          built += *t;
          (void)rte_ring_sp_enqueue_bulk(ring, reinterpret_cast<void**>(bulk.data()), kRecycleBulk,
                                         nullptr);  // room: it holds kHeld
        }
        for (; held > 0; --held) {
          (void)rte_ring_sc_dequeue_bulk(ring, reinterpret_cast<void**>(got.data()), kRecycleBulk,
                                         nullptr);
          received += receive(got);
        }
      }
      rte_thread_unregister();
    });
    t.join();
  } else {
    std::thread y([&] {
      enter(b);
      std::array<rte_mbuf*, kRecycleBulk> got;
      for (int i = 0; i < kRecycleBulks && ok.load();) {
        if (rte_ring_sc_dequeue_bulk(ring, reinterpret_cast<void**>(got.data()), kRecycleBulk,
                                     nullptr) == 0) {
          rte_pause();
          continue;
        }
        received += receive(got);
        ++i;
      }
      rte_thread_unregister();
    });
    std::thread x([&] {
      enter(a);
      for (int i = 0; i < kRecycleBulks; ++i) {
        const auto t = build(static_cast<uint32_t>(i));
        if (!t) break;
        built += *t;
        bool sent = false;
        while (!(sent = rte_ring_sp_enqueue_bulk(ring, reinterpret_cast<void**>(bulk.data()),
                                                 kRecycleBulk, nullptr) != 0) &&
               ok.load())
          rte_pause();
        if (!sent) rte_pktmbuf_free_bulk(bulk.data(), kRecycleBulk);
      }
      rte_thread_unregister();
    });
    x.join();
    y.join();
  }
  if (!ok.load()) {
    // What is still on its way goes home.
    void* left = nullptr;
    while (rte_ring_sc_dequeue(ring, &left) == 0) rte_pktmbuf_free(static_cast<rte_mbuf*>(left));
    return std::nullopt;
  }
  const double n = static_cast<double>(kRecycleBulks) * kRecycleBulk;
  return RecycleRound{static_cast<double>(built) / n, static_cast<double>(received) / n};
}

bool SchedulerProbe::halts() const {
  return !idle_wake_calls.empty() && cross_cpu_wake_call > 0 &&
         idle_wake_calls.back() >= 1.5 * cross_cpu_wake_call;
}

double SchedulerProbe::halt_after() const {
  if (!halts() || idle_gaps.size() != idle_wake_calls.size()) return 0;
  // The longest gap's wake is past half (halts()): the scan starts below it.
  const double half = (cross_cpu_wake_call + idle_wake_calls.back()) / 2;
  for (size_t i = idle_wake_calls.size() - 1; i-- > 0;)
    if (idle_wake_calls[i] < half) return (idle_gaps[i] + idle_gaps[i + 1]) / 2;
  return idle_gaps.front() / 2;  // dear from the first gap on
}

double SchedulerProbe::remote_wake_halted() const {
  return halts() ? std::max(0.0, idle_wake_calls.back() - futex) : 0;
}

double SchedulerProbe::wakeup_halted() const {
  return halts() ? std::max(0.0, long_idle_handoff - 2 * futex - remote_wake_halted()) : 0;
}

double SchedulerProbe::wakeup() const {
  return cross_cpu_handoff > 0 ? std::max(0.0, cross_cpu_handoff - 2 * futex - remote_wake()) : 0;
}

double ProbeLinePass(int a, int b, int round_trips) {
  round_trips = std::max(1, round_trips);
  alignas(64) std::atomic<int> turn{0};
  // Timed from both players on their CPUs to the last pass, by the first: the threads' start and
  // moves are not the line's (they were a quarter of a 20000-round-trip probe's time here).
  alignas(64) std::atomic<int> ready{0};
  Tsc t0 = 0, t1 = 0;
  const auto player = [&](int me, int cpu) {
    PinTo(cpu);
    ready.fetch_add(1);
    while (ready.load(std::memory_order_acquire) < 2) rte_pause();
    if (me == 0) t0 = Now();
    for (int i = 0; i < round_trips; ++i) {
      while (turn.load(std::memory_order_acquire) != me) rte_pause();
      turn.store(1 - me, std::memory_order_release);
    }
    if (me == 0) {
      while (turn.load(std::memory_order_acquire) != 0) rte_pause();  // the last pass back
      t1 = Now();
    }
  };
  std::thread x(player, 0, a), y(player, 1, b);
  x.join();
  y.join();
  return static_cast<double>(t1 - t0) / (2.0 * round_trips);
}

std::optional<SchedulerProbe> ProbeScheduler(const std::vector<int>& cpus, int rounds,
                                             double tsc_hz) {
  if (cpus.empty() || !CanPin(cpus[0]) || (cpus.size() > 1 && !CanPin(cpus[1])))
    return std::nullopt;
  SchedulerProbe p;
  p.cpus = static_cast<unsigned>(cpus.size());
  std::vector<double> calls, same, same_armed, timed, preempting, tick_lost, tick_interval, cross,
      cross_wake, line, pi_unlock, pi_handover, long_idle;
  std::vector<std::vector<double>> idle_calls(kIdleGapsUs.size());
  for (int r = 0; r < std::max(1, rounds); ++r) {
    calls.push_back(FutexCall(cpus[0]));
    same.push_back(Handoff(cpus[0], cpus[0]).pass);
    same_armed.push_back(Handoff(cpus[0], cpus[0], /*armed=*/true).pass);
    timed.push_back(TimedWait(cpus[0]));
    const IrqLoss loss = TimerIrq(cpus[0], tsc_hz);
    if (loss.measured) preempting.push_back(loss.per_wait);
    if (const Lost& a = loss.alone; a.short_gaps > 0) {
      tick_lost.push_back(a.short_cycles / static_cast<double>(a.short_gaps));
      tick_interval.push_back(kSpinS * tsc_hz / static_cast<double>(a.short_gaps));
    }
    if (cpus.size() > 1) {
      const Passes across = Handoff(cpus[0], cpus[1]);
      cross.push_back(across.pass);
      cross_wake.push_back(across.wake_call);
      line.push_back(ProbeLinePass(cpus[0], cpus[1], kLinePasses));
      const PiPasses pi = PiPass(cpus[0], cpus[1]);
      pi_unlock.push_back(pi.unlock);
      pi_handover.push_back(pi.handover);
      for (size_t i = 0; i < kIdleGapsUs.size(); ++i) {
        const auto gap = static_cast<Tsc>(kIdleGapsUs[i] * 1e-6 * tsc_hz);
        const Passes idle = Handoff(cpus[0], cpus[1], /*armed=*/false, gap, kIdlePasses);
        idle_calls[i].push_back(idle.wake_call);
        if (i + 1 == kIdleGapsUs.size()) long_idle.push_back(idle.pass);
      }
    }
  }
  p.futex = Median(calls);
  p.same_cpu_handoff = Median(same);
  p.same_cpu_handoff_armed = Median(same_armed);
  p.timed_wait = Median(timed);
  p.preempting_measured = !preempting.empty();
  p.preempting_wait = preempting.empty() ? 0 : Median(preempting);
  p.tick_lost = tick_lost.empty() ? 0 : Median(tick_lost);
  p.tick_interval = tick_interval.empty() ? 0 : Median(tick_interval);
  p.cross_cpu_handoff = cross.empty() ? 0 : Median(cross);
  p.cross_cpu_wake_call = cross_wake.empty() ? 0 : Median(cross_wake);
  p.line_pass = line.empty() ? 0 : Median(line);
  p.pi_unlock = pi_unlock.empty() ? 0 : Median(pi_unlock);
  p.pi_handover = pi_handover.empty() ? 0 : Median(pi_handover);
  if (!long_idle.empty()) {
    for (size_t i = 0; i < kIdleGapsUs.size(); ++i) {
      p.idle_gaps.push_back(kIdleGapsUs[i] * 1e-6 * tsc_hz);
      p.idle_wake_calls.push_back(Median(idle_calls[i]));
    }
    p.long_idle_handoff = Median(long_idle);
  }
  return p;
}

std::optional<RecycleProbe> ProbeRecycle(rte_mempool* pool, const std::vector<int>& cpus,
                                         int rounds) {
  if (pool == nullptr || cpus.size() < 2 || !CanPin(cpus[0]) || !CanPin(cpus[1]))
    return std::nullopt;
  rte_ring* ring = rte_ring_create("txb_recycle_probe", kRecycleRing, SOCKET_ID_ANY,
                                   RING_F_SP_ENQ | RING_F_SC_DEQ);
  if (ring == nullptr) return std::nullopt;
  std::vector<double> build_local, build_remote, receive_local, receive_remote;
  for (int r = 0; r < std::max(1, rounds); ++r) {
    const auto local = RecyclePass(pool, ring, cpus[0], cpus[0], /*remote=*/false);
    const auto across = RecyclePass(pool, ring, cpus[0], cpus[1], /*remote=*/true);
    if (!local || !across) break;
    build_local.push_back(local->build);
    receive_local.push_back(local->receive);
    build_remote.push_back(across->build);
    receive_remote.push_back(across->receive);
  }
  rte_ring_free(ring);
  if (build_local.empty()) return std::nullopt;
  RecycleProbe p;
  p.build_local = Median(build_local);
  p.build_remote = Median(build_remote);
  p.receive_local = Median(receive_local);
  p.receive_remote = Median(receive_remote);
  return p;
}

}  // namespace txbatch
