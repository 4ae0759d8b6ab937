#pragma once
// The simulation engine's CPU cost model (sim_engine.h): TSC cycles the software spends per
// frame, per driver call, per lock and per completion, at the TSC rate of the machine they came
// from. A device's own costs (doorbell, descriptor) stay with its model (emu's doorbell_ns,
// desc_ns), as on the real engine. `txbatch calibrate` fits these from real runs; the defaults
// below are its fit on this project's machine (doc/cost-model.json, doc/experiments.md), with
// the costs it cannot separate estimated from tx_path_bench's stage table (doc/perf.md).

#include <string>

namespace txbatch {

// The most CPUs a model may name (the simulation keeps a run queue for each).
inline constexpr unsigned kMaxModelCpus = 1024;

struct CostModel {
  double tsc_hz = 2.6e9;  // the clock the cycles were counted in (the virtual TSC's rate)
  // Producer side.
  double write = 20;    // per application write (the syscall's fixed part, segmentation)
  double frame = 69.5;  // per frame built: mbuf, headers, the TX stamp
  // The qdisc (root lock, pfifo_fast).
  double lock = 16;             // one uncontended acquisition + release (6.3 ns, spin lock)
  double lock_contended = 200;  // more when it was held: the line comes from another core
  double enqueue = 28.1;        // per frame enqueued
  double dequeue = 122.9;       // per bulk dequeue that finds frames
  double dequeue_frame = 3;     // per frame dequeued
  // Per bulk a qdisc run hands the driver, beyond the driver's call: the root lock let go and
  // the handover's bookkeeping, inside the TX path (a --qdisc none producer's call has neither).
  // `txbatch calibrate` fits it from the bypass's TX path; the built-in model has it in `dequeue`.
  double run_xmit = 0;
  // A frame that takes the empty-qdisc bypass (an inline runner, the qdisc empty and not
  // running): the run begun and ended around the frame in hand, beyond the root lock's look, the
  // handover (`run_xmit`), the driver call and the empty dequeue's lock — charged under the
  // look's hold, as `enqueue`.
  // `txbatch calibrate` fits it from one producer inline with the bypass as it fits `enqueue`
  // from one without. The real path saves little of what enqueue and dequeue cost (2026-12-04,
  // emu:null, one producer: 6.7-7.3 Mpps with the bypass, 6.7-6.8 without); the built-in model,
  // fitted before the bypass was measured, charges what the frame skips (enqueue + dequeue +
  // dequeue_frame).
  double bypass = 154;
  // The driver (its software side; the emu model adds its doorbell and descriptor costs).
  double xmit_call = 29.1;  // per driver call (an xmit_more chain: per frame)
  double xmit_frame = 25;   // per frame in a call
  // The completion role (TX interrupt + clean).
  double completion = 200;       // per wake
  double completion_frame = 15;  // per frame reclaimed
  // Per frame handed to the receiver (txbatch's sink: parse, sequence, latency histograms), where
  // the NIC model delivers: in the completion role, or inside the call on a wire-less NIC.
  double deliver = 215.9;
  // Per segment the stack cuts from a GSO frame before the driver (--offload gso: a header copy,
  // the IP checksum and the TCP fields, gso.h's SegmentGso), or the emulated NIC's TSO as the
  // txirq reclaims (the same code).
  double gso_segment = 40;
  // The machine (sim_engine.h, "CPUs and the scheduler"): threads share `cpus` CPUs as the real
  // engine places them. 0: every thread on a CPU of its own and no scheduler costs, the
  // built-in model's (it predates the scheduler); `txbatch calibrate` measures them here.
  unsigned cpus = 0;
  // A futex system call: a thread that finds a mutex held enters one to sleep, and its holder
  // one to wake it (glibc's lll_lock_wait / lll_unlock_wake).
  double futex = 0;
  // Switching a CPU from one thread to another (schedule(): the switch and the cold start after).
  double context_switch = 0;
  // From a wake-up to the woken thread running on another CPU (an IPI, and in a VM the host
  // waking the vCPU): time that passes, not CPU time spent.
  double wakeup = 0;
  // What the waker's futex call costs beyond `futex` when the thread it wakes sleeps on another
  // CPU: the inter-processor interrupt that reaches that CPU (on a guest, a VM exit and the host
  // kicking the vCPU; measured 32-39 thousand cycles, 12-15 us, on this project's 2-vCPU guest,
  // where a local futex call is 250). CPU time of the waker; `wakeup` is the wait after it.
  double remote_wake = 0;
  // A CPU that has idled `halt_after` cycles (every thread on it asleep) is halted — on a guest
  // the host takes the vCPU off its CPU once its halt-polling window (KVM's halt_poll_ns) runs
  // out; on bare metal a deep C-state — and a wake that reaches a sleeper there costs its waker
  // `remote_wake_halted` instead of `remote_wake`, and the sleeper runs `wakeup_halted` after
  // that call instead of `wakeup`. 0: no CPU is ever halted. `txbatch calibrate` scans the
  // cross-CPU wake at growing idle gaps: on this project's 2-vCPU guest (2026-12-04) the wake
  // call was 13 thousand cycles up to 140 us of idle and 40 thousand from 160 us, the sleeper's
  // return after it 10 and 60 thousand.
  double halt_after = 0;
  double remote_wake_halted = 0;
  double wakeup_halted = 0;
  // A timed sleep (a condition variable's wait_for, nanosleep: the txirq's to its completion
  // deadline or idle poll, a dedicated runner's idle poll, a paced producer's): `timer_arm` is
  // what arming its timer and cancelling it costs the sleeper where another thread's wake ends
  // the sleep first; `timer_wake` what the sleeper's CPU spends where the timer ends it — the
  // futex call, the timer armed, the switches out and back in, the return (a wait shorter than
  // timer_arm never switches out: it ends inside the call, busy). Measured 18 and 77 thousand
  // cycles on this project's 2-vCPU guest, where a timer is a VM exit each way (a same-CPU futex
  // handoff is 2.5 thousand).
  double timer_arm = 0;
  double timer_wake = 0;
  // What a timer's interrupt costs a CPU busy with another thread when it fires (on a guest, the
  // exit to the host and back): the running thread loses it. `txbatch calibrate` measures it as
  // what a thread spinning on a CPU loses to each 125 us timed wait of a SCHED_FIFO thread
  // beside it (the txirq's idle poll) less timer_wake and two switches: ~27 thousand cycles on
  // this project's 2-vCPU guest (2026-12-04: a wait cost the spinner ~57 thousand, 25 of them
  // timer_wake). On an idle CPU it is not charged (the wait is the host's, no thread's).
  double timer_irq = 0;
  // What else interrupts a busy CPU, the kernel's tick and the host's own (on a guest, an exit
  // each): `tick` lost every `tick_interval` (0: none). `txbatch calibrate` measures both from a
  // thread spinning alone on a CPU (the gaps between its clock reads): on this project's 2-vCPU
  // guest 2.3-6.5 % of it, in gaps of ~33-36 thousand cycles, 1 300-3 600 a second (2026-12-04;
  // gaps over a millisecond, a descheduling, left out). At most half of tick_interval, which is
  // at least 1000 (the simulation refuses others).
  double tick = 0;
  double tick_interval = 0;
  // A priority-inheriting mutex (the TX lock) handed from a holder to a waiter spinning on it on
  // another CPU: `pi_unlock` is the holder's FUTEX_UNLOCK_PI call with that waiter (the
  // pi_state's new owner, the rt_mutex's wake); `pi_handover` the time from that call's start
  // until the waiter returns from its FUTEX_LOCK_PI holding the lock. Measured 4.3-5.3 and
  // 5.4-6.6 thousand cycles on this project's 2-vCPU guest (a bare futex call is 250).
  double pi_unlock = 0;
  double pi_handover = 0;
  // The time slice of threads sharing a CPU (EEVDF's base slice, 0.75 ms x (1 + log2 CPUs) up to
  // 8 CPUs: 1.5 ms on 2) at tsc_hz.
  double slice = 3.9e6;
  // A frame that changes CPU on its way (built on one, dequeued on another): per frame, its
  // mbuf's and data's cache lines moving (`handover`); per bulk that holds one, the qdisc's own
  // lines its producers wrote (the band's ring and indices, the backlog: `handover_bulk`).
  // `txbatch calibrate` fits both from a dedicated runner against the same calls inline.
  double handover = 0;
  double handover_bulk = 0;
  // The pool's recycling across CPUs: an mbuf a producer allocates whose lines another CPU has
  // (it freed the frame, or wrote it: the handover's TxMeta on a dedicated runner's CPU) comes
  // through the pool's shared stack (`recycle`, the producer's; SimPoolCpus); a frame handed
  // to the receiver on another CPU than it was built on has its lines read from the builder's
  // cache and goes back to the pool from there (`deliver_remote`, beyond `deliver`). `txbatch
  // calibrate` measures both on two threads passing mbufs across two CPUs against one thread
  // (engine/sched_probe.h, ProbeRecycle).
  double recycle = 0;
  double deliver_remote = 0;
  // Where the numbers came from (doc/cost-model.json is this model, with calibrate's fit).
  std::string source =
      "txbatch calibrate --rounds 5 (real engine), 2026-11-30, on the project's machine: 2 vCPU "
      "AMD EPYC under KVM, TSC 2600 MHz, Debian 12, DPDK 22.11; fitted: frame, xmit_call, "
      "xmit_frame (net_null's), deliver, enqueue, dequeue; kept (estimates from tx_path_bench): "
      "write, lock, lock_contended, dequeue_frame, completion, completion_frame; bypass "
      "(2026-12-04): enqueue + dequeue + dequeue_frame, what a bypassed frame skips";
  bool operator==(const CostModel&) const = default;
};

}  // namespace txbatch
