#pragma once
// The simulation engine (`--engine sim`, DESIGN.md "Deterministic mode"): one cell on a virtual
// clock, with the real qdisc (PfifoFast) and its run (QdiscRun, stepped by SimQueue: the real
// queues' code), flush policies, BQL and driver handover (NetdevQueue),
// the emulated NIC, wire and link, frame builder and sink — every frame a real mbuf — but no
// threads. Producers, the qdisc's runner and the TX-completion role are actors on simulated CPUs
// (the cost model's `cpus`, placed as the real engine places its threads; 0: a CPU each); the
// engine always steps the runnable actor whose clock is earliest (ties by index), one frame or
// one bulk per step, so the interleaving is per frame, never a batch as one event. Actors that
// share a CPU take turns (a time slice, a context switch); the SCHED_FIFO txirq preempts.
//
// CPU time comes from a cost model (cost_model.h): per write, per frame built, per lock taken
// (more when its last holder ran on another CPU), per frame enqueued, per bulk and per frame
// dequeued, per driver call and per frame in it, per completion wake and per frame reclaimed,
// and the scheduler's (a futex call, a context switch, a wake-up's latency, a frame's move
// between CPUs). The NIC's own costs (doorbell, descriptors) are the emu model's, as on the real
// engine. The root lock and the TX lock are futex mutexes: a held one is a sleep, and the step
// is tried again when its holder's release wakes the sleeper. The txirq sleeps until the NIC's
// next modelled completion or a kick, exactly as the real one (tx_queue.h), so rings, stops and
// restarts behave as on the real engine. doc/design.md, "The simulation engine", says what is
// not modelled.
//
// Same config and seed, same result, byte for byte (the `env` block aside). Supports the emu
// drivers, every policy, --qdisc pfifo_fast|pfifo|none, --runner inline|dedicated, --sync
// rootlock, --rate and --link.

#include <rte_mempool.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/error.h"
#include "engine/cell.h"

namespace txbatch {

// Where the simulation's threads run on `cpus` simulated CPUs, as the real engine's land (seen
// on this project's 2-vCPU guest with ps -L): producer i pinned to CPU i mod cpus; queue q's
// txirq on CPU q mod cpus — the main thread on the first CPU creates it there, and the kernel
// keeps a woken SCHED_FIFO thread on its CPU unless another real-time thread runs there
// (select_task_rq_rt), so it preempts the producers pinned to it (seen with one queue; that a
// second queue's txirq, woken while the first runs, settles on the next CPU is assumed); queue
// q's dedicated runner (CFS, allowed everywhere) where the fewest CFS threads are, then the
// fewest txirqs; among equals CPU cpus-1-(q mod cpus) where it is one, else the highest-numbered
// (the kernel's wake-up picks an idle CPU, not one a SCHED_FIFO thread takes from it).
// `cpus` 0: every thread on a CPU of its own (producers, runners, txirqs, numbered in order).
struct SimPlacement {
  std::vector<int> producers, runners, txirqs;  // runners: empty without dedicated
};
SimPlacement PlaceThreads(unsigned procs, unsigned queues, bool dedicated, unsigned cpus);

// Why `cfg` cannot run on the simulation engine (one sentence naming the valid choices), or
// nothing when it can.
std::optional<std::string> SimUnsupported(const CellConfig& cfg);

// Simulates one cell with cfg.cost on `pool` (frames are real mbufs; the pool is full again when
// it returns). `flow_seq` as RunCell. Fails when the cell is unsupported (EINVAL) or the drain
// does not finish within DrainBudgetS of virtual time (EIO: a bug).
Result<CellResult> SimulateCell(const CellConfig& cfg, rte_mempool* pool,
                                std::vector<uint64_t>* flow_seq = nullptr);

}  // namespace txbatch
