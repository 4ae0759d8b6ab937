#pragma once
// The scheduler's costs on this machine, for the simulation's CPUs (engine/sim_engine.h, "CPUs
// and the scheduler"), measured the way the real engine pays them: two threads passing a turn
// through a futex (what a contended std::mutex or PiMutex does), on one CPU and on two, a
// thread's timed waits (a condition variable's wait_for, nanosleep), and a priority-inheriting
// mutex handed between two CPUs (the TX lock's FUTEX_LOCK_PI / FUTEX_UNLOCK_PI). Control plane:
// `txbatch calibrate` runs it before its cells.

#include <algorithm>
#include <optional>
#include <vector>

struct rte_mempool;

namespace txbatch {

struct SchedulerProbe {
  unsigned cpus = 0;               // the CPUs txbatch may run on (the simulation's `cpus`)
  double futex = 0;                // TSC cycles of one futex call (FUTEX_WAKE, nobody waiting)
  double same_cpu_handoff = 0;     // one pass of the turn, both threads pinned to one CPU
  double cross_cpu_handoff = 0;    // one pass across two CPUs (0 with one CPU)
  double cross_cpu_wake_call = 0;  // its waker's FUTEX_WAKE call, the sleeper on the other CPU
  double line_pass = 0;  // a cache line written on one CPU and read on another (0 with one CPU)
  // Timers: the CPU a futex wait with a 20 us timeout that nobody wakes costs its thread (the
  // timer armed and fired, the switches), and the same-CPU pass with each sleeper's timer armed
  // (125 us, a condition variable's wait_for) and cancelled by the wake.
  double timed_wait = 0;
  double same_cpu_handoff_armed = 0;
  // What a thread spinning on a CPU loses to each 125 us timed wait of a SCHED_FIFO thread
  // beside it that its timer ends (the txirq's idle poll preempting a producer): the interrupt,
  // the switches, the waiter's return and next call; `preempting_measured` false (and it 0)
  // where a thread could not be pinned or SCHED_FIFO is not permitted.
  double preempting_wait = 0;
  bool preempting_measured = false;
  // The same spinner alone: TSC it lost a gap (its CPU's ticks, the host's; gaps over 1 ms, a
  // descheduling, left out), and TSC between them (0 where none was seen or it could not be
  // pinned).
  double tick_lost = 0;
  double tick_interval = 0;
  // A priority-inheriting mutex passed between two threads on two CPUs, each holding it 3000
  // cycles and trying again 300 after letting go (so the other always waits, spinning on its
  // running owner): the holder's unlock call (FUTEX_UNLOCK_PI with a waiter) and the time from
  // its start until the waiter's lock call returns (0 with one CPU).
  double pi_unlock = 0;
  double pi_handover = 0;
  // The host's halt (CostModel::halt_after): the pass across two CPUs with each thread spinning a
  // gap before its wake, so the sleeper's CPU has idled that long (and the waker's own wake-up,
  // a few us, more); the gaps (TSC cycles, 25 us to 1 ms), the median wake call at each, and
  // the pass at the longest less its gap (empty, 0 with one CPU).
  std::vector<double> idle_gaps;
  std::vector<double> idle_wake_calls;
  double long_idle_handoff = 0;
  // A pass is the waker's futex call (across CPUs: with the IPI, remote_wake), then (one CPU) a
  // switch to the woken thread or (two) the wake-up's latency, then the woken thread's return
  // from its own futex call.
  double context_switch() const;  // same_cpu_handoff less two futex calls, at least 0
  double remote_wake() const;     // cross_cpu_wake_call less a futex call, at least 0
  double wakeup() const;      // cross_cpu_handoff less two futex calls and remote_wake, at least 0
  double timer_arm() const;   // same_cpu_handoff_armed less same_cpu_handoff, at least 0
  double timer_wake() const;  // timed_wait
  // preempting_wait less timer_wake and two switches, at least 0: the timer's interrupt on a busy
  // CPU (on a guest, the exit to the host and back); 0 where it was not measured.
  double timer_irq() const;
  // Whether a CPU halts: the wake at the longest gap costs 1.5 times the one at none or more.
  bool halts() const;
  // Past the last gap whose wake cost less than halfway from the one at none to the one at the
  // longest, halfway to the next gap (0 where no CPU halts).
  double halt_after() const;
  // The wake call at the longest gap less a futex call; the pass there less two futex calls and
  // that (0 where no CPU halts).
  double remote_wake_halted() const;
  double wakeup_halted() const;
};

// The pool's recycling across two CPUs, for the simulation's `recycle` and `deliver_remote`: a
// thread allocates kRecycleBulk mbufs and writes each one's first 64 bytes of data (a frame's
// build), another reads those bytes and frees them (the sink), both registered with EAL (their
// mempool caches, as the engine's threads); on two CPUs (handed over through an rte_ring)
// against both on one thread. TSC cycles an mbuf.
struct RecycleProbe {
  double build_local = 0, build_remote = 0;      // allocate + write
  double receive_local = 0, receive_remote = 0;  // read + free
  double recycle() const { return std::max(0.0, build_remote - build_local); }
  double deliver_remote() const { return std::max(0.0, receive_remote - receive_local); }
};

// Medians over `rounds` (each 20000 bulks) with `pool` on the first two of `cpus`: nothing with
// fewer than two CPUs, where a thread cannot be pinned or registered, or the handover ring
// cannot be made.
std::optional<RecycleProbe> ProbeRecycle(rte_mempool* pool, const std::vector<int>& cpus,
                                         int rounds);

// Two threads on CPUs `a` and `b` spin on one cache line, each writing it in turn
// (`round_trips`, two passes each; the scheduler probe's 100000 take 5-50 ms here): TSC cycles
// a pass, the line's move from the writer's core to the reader's, timed from both threads on
// their CPUs. Also the guest's state: its vCPUs on near or far host cores (seen on this
// project's guest: 56-84 or 480-700 cycles).
double ProbeLinePass(int a, int b, int round_trips = 100000);

// Medians over `rounds` (each 2000 futex passes, 20000 futex calls, 100000 line passes, 2000
// timed waits, a spinner's 0.2 s alone and 0.2 s beside timed waits, 20000 passes of a
// priority-inheriting mutex) on `cpus` (the first one, and the first two for what crosses
// CPUs), at `tsc_hz`. Nothing where no CPU is given or a thread cannot be pinned to them.
std::optional<SchedulerProbe> ProbeScheduler(const std::vector<int>& cpus, int rounds,
                                             double tsc_hz);

}  // namespace txbatch
