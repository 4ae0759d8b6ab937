#pragma once
// The cell and its result, shared by both engines (real_engine.h runs a cell on threads,
// sim_engine.h on a virtual clock): what a cell is (CellConfig), what it measured (CellResult
// and its books), what both engines derive from a config (the queue's configuration, the pool,
// the drain budget, the producers' rate), and how a finished cell's counters become its result
// (CounterSnapshot, QueueTotals, CellRun, ResultOf).

#include <rte_mempool.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/cpu_times.h"
#include "batching/dql.h"
#include "batching/flush_policy.h"
#include "dataplane/frame.h"
#include "dataplane/gso.h"
#include "dataplane/histogram.h"
#include "dataplane/link_spec.h"
#include "dataplane/producer.h"
#include "dataplane/qdisc.h"
#include "dataplane/rx_sink.h"
#include "dataplane/tx_queue.h"
#include "drivers/factory.h"
#include "engine/cost_model.h"
#include "engine/emulator_check.h"

namespace txbatch {

// Where a cell runs: threads on the real clock, or the simulation engine's virtual clock
// (sim_engine.h).
enum class Engine : uint8_t { kReal, kSim };
std::string_view EngineName(Engine e);

struct CellConfig {
  std::string driver;  // as given, e.g. "emu:e1000"
  DriverSpec driver_spec;
  Proto proto = Proto::kTcp;
  PolicySpec policy;
  unsigned size = 65536;
  unsigned procs = 1;
  // --flows: the flows each producer sends (its sockets, each its own 5-tuple and sequence), a
  // write each in turn (ProducerFlows); producer i's are flows i x flows .. i x flows + flows - 1.
  unsigned flows = 1;
  // TX queues (--queues), each with its own qdisc, runner and txirq; producer i sends on queue
  // i mod queues (XPS); on emu their rings share one wire.
  unsigned queues = 1;
  unsigned mtu = 1500;
  // --offload: a TCP stream's large writes go as GSO frames, cut into MSS frames by the stack
  // before the driver (gso) or by the NIC (tso); none: the producer writes MSS frames (gso.h).
  Offload offload = Offload::kNone;
  // --tsq: TCP Small Queues' limit, bytes below each stream producer's socket (tsq.h); 0 = off.
  // Runs only where it applies (TsqActive).
  uint64_t tsq = 0;
  unsigned txqueuelen = kDefaultTxQueueLen;
  double duration_s = 1.0;
  double warmup_s = 0.1;
  RateSpec rate;
  bool stream = true;  // producers block on a full qdisc (stream) or drop (datagram)
  QueueShape shape;    // --qdisc, --sync, --runner
  // The empty-qdisc bypass (TxQueueConfig::bypass): KernelBypass of the policy and shape, off
  // with --no-bypass. A record without it ran without one.
  bool bypass = false;
  // --sync auto chose the synchronisation (KernelNolock): the cell is judged against batching
  // off in its grid's shape whichever sync each side got (config.sync_auto).
  bool sync_auto = false;
  // Frames carry TX stamps and the sink measures latency (off: --no-timing, throughput only).
  bool timing = true;
  // --latency-sample: one frame in this many of each producer carries a stamp (LatencySampler),
  // the probe's every one; latency is the sample's. 1: every frame.
  unsigned latency_sample = 1;
  // --per-flow: the sink keeps each flow's counts and latency (CellResult::flows; a second
  // histogram update a received frame).
  bool per_flow = false;
  // --probe: one more producer, of its own flow (the last: ProbeFlow), sending
  // kProbePayload-byte UDP datagrams at this rate beside the load: a latency probe, as Flent's
  // rrul pings beside its bulk flows (CellResult::probe). Unset: none.
  std::optional<RateSpec> probe;
  BqlBounds bql;  // --bql-limit-min/max, --bql-hold-time
  uint64_t seed = 1;
  std::optional<LinkSpec> link;  // --link: netem's impairments behind the emulated wire
  // --pool-size: mbufs in the packet pool; 0 sizes it so queueing alone never exhausts it (a
  // smaller pool is a fault to test against: producers then wait for mbufs, counted).
  unsigned pool_size = 0;
  Engine engine = Engine::kReal;  // --engine
  CostModel cost;                 // the simulation engine's CPU costs (--cost-model)
};

struct Books {
  uint64_t generated = 0, sent = 0, dropped = 0, queued = 0;
  // Of `dropped`, frames a qdisc dropped after it had queued them (fq_codel's CoDel and its
  // overflow batch): never sent, and the receiver counts their sequence gaps in `lost`.
  uint64_t dropped_queued = 0;
  uint64_t received = 0, lost = 0, duplicated = 0, in_flight = 0;
  uint64_t mbufs_in_use = 0;
  // With a link: frames of which no intact copy arrived (its own count), which with
  // `dropped_queued` must equal the receiver's sequence gaps (`lost`).
  std::optional<uint64_t> link_lost;
  bool rx_side = true;  // frames come back to a sink (emu, loopback ports); else the second
                        // equation does not apply and received/lost/duplicated/in_flight are null
  bool balanced = false;
};

// What the link (--link) did over the whole run, and what the receiver saw of it.
struct LinkResult {
  uint64_t offered = 0, lost = 0, dropped_limit = 0, duplicated = 0, corrupted = 0;
  uint64_t reordered = 0, dup_failed = 0, frames_lost = 0;
  uint64_t sink_reordered = 0;  // late frames that filled a gap at the receiver
  uint64_t sink_corrupt = 0;    // frames the receiver rejected (every one corrupted by the link)
};

// BQL over the run (policies that read it, on drivers that report completions).
struct BqlResult {
  uint64_t limit = 0;      // bytes, at the end of the run
  uint64_t limit_max = 0;  // the largest it reached
  uint64_t stops = 0;      // times it stopped the queue in the window (__QUEUE_STATE_STACK_XOFF)
};

// One TX queue's qdisc over the run, as `tc -s qdisc show` prints each child of an mq root:
// with --queues N > 1 the root is mq (Linux's default on a multi-queue device: mq_init gives
// each TX queue a child of the default qdisc), its children the cell's qdisc.
struct QdiscChildResult {
  unsigned queue = 0;            // the TX queue (tc's parent :N is queue + 1)
  uint64_t sent = 0;             // frames the queue's driver accepted (wire frames)
  uint64_t dropped = 0;          // the child's drops: a full band, and fq_codel's after queueing
  uint64_t requeues = 0;         // frames requeued at its head (tc's requeues, 4.x on)
  uint64_t backlog = 0;          // frames still queued at the end (0 once drained)
  uint64_t queue_stops = 0;      // the queue's driver stopped it (whole run)
  uint64_t queue_wakes = 0;      // and restarted it (restart_queue)
  std::optional<QdiscCountersOf<uint64_t>> fq_codel;  // its xstats, for fq_codel children
  bool operator==(const QdiscChildResult&) const = default;
};

struct ReceiverResult {
  double cycles_per_pkt = 0, cpu_ns_per_pkt = 0;
};

struct CellResult {
  // The wall-clock seconds the cell took to run or simulate, drain included (env.cell_wall_s:
  // not a result, it differs between identical simulations).
  double wall_s = 0;
  // Measured window
  double window_s = 0;
  uint64_t packets = 0;
  double mpps = 0, mb_per_s = 0, wire_gbps = 0;
  std::string counted_at;
  // TxDriver::link_layer(): "ib" or "roce_v2" on verbs, empty (null in the record) elsewhere.
  std::string link_layer;
  double avg_batch = 0;  // frames per handover to the driver (one call, or one xmit_more chain)
  std::map<unsigned, uint64_t> batch_hist;  // power-of-two bucket lower bound -> xmit calls
  // The qdisc's bulks by exact size (TxQueueCounters::dequeue_hist): size -> dequeues that took
  // that many packets, as Linux's qdisc:qdisc_dequeue reports them (no bypassed frame; a bulk a
  // stopped queue refused whole counted). Empty where nothing was dequeued (--qdisc none).
  std::map<unsigned, uint64_t> dequeue_sizes;
  double xmit_calls_per_pkt = 0;
  std::optional<double> doorbells_per_pkt;
  // The TX path alone, the receiver's share out: TSC of dequeue + handover a frame, and the
  // CPU time of the producers, the txirq and a dedicated runner a frame.
  double cycles_per_pkt = 0, cpu_ns_per_pkt = 0;
  // The emulated receiver (the sink, handed what the driver's calls delivered, after them, on
  // the same threads): TSC a frame and the same in ns (TSC time while it held its lock: what
  // cpu_ns_per_pkt leaves out); none where no frame reaches an in-process receiver.
  std::optional<ReceiverResult> receiver;
  // The completion role's reclaims in the window (those that freed something): frames and TSC
  // per reclaim; none for a driver that completes inside its xmit call.
  std::optional<double> completion_frames_per_call, completion_cycles_per_call;
  uint64_t requeues = 0, reschedules = 0;
  uint64_t requeued_frames = 0;  // frames those requeues put back
  // --sync nolock: enqueues that found the run flag taken and left it a note (MISSED), the
  // measure of how often producers would have contended for the root lock.
  uint64_t qdisc_missed = 0;
  // Frames that took the empty-qdisc bypass (CellConfig::bypass) in the window: sent without
  // an enqueue or a dequeue.
  uint64_t bypassed = 0;
  uint64_t queue_stops = 0;     // times the driver's queue stopped (ring full)
  uint64_t queue_wakes = 0;     // times the driver restarted it (Linux's restart_queue)
  uint64_t producer_waits = 0;  // times a stream producer blocked on a full band
  uint64_t tsq_waits = 0;       // times TCP Small Queues throttled a producer (over the run)
  // TCP Small Queues sampled in the window (TsqSampler); unset where TSQ did not run.
  std::optional<TsqSummary> tsq;
  std::map<std::string, uint64_t> drops;
  uint64_t drops_total = 0;
  std::optional<LatencySummary> latency;
  // The same frames' latency histogram, its bins that hold samples (empty where latency is
  // null): what CDFs are drawn from (results.latency_hist_ns, latency_hist.csv).
  std::vector<HistBin> latency_hist;
  std::optional<LinkResult> link;
  std::optional<BqlResult> bql;
  // fq_codel's counters over the run, as `tc -s qdisc show` prints them; unset on other qdiscs.
  std::optional<QdiscCountersOf<uint64_t>> fq_codel;
  // With --queues N > 1 (an mq root): each child qdisc over the run, queue by queue; else empty.
  std::vector<QdiscChildResult> mq;
  std::map<std::string, uint64_t> driver_counters;  // TxDriver::ExtraCounters (verbs)
  // Over the whole run: why batches went (producers' own batches under --qdisc none, a dedicated
  // runner's runs), indexed by FlushTrigger.
  std::array<uint64_t, kFlushTriggers> flush_triggers{};
  // Where it goes (frames carrying stage timestamps; null where nothing receives or none do):
  // before the driver — the qdisc wait, or under --qdisc none the producer's batch fill — the
  // driver and its ring, and the wire (null where no wire is modelled: then driver_ring runs to
  // receive).
  std::optional<LatencySummary> lat_before_driver, lat_driver_ring, lat_wire;
  bool before_driver_is_batch_fill = false;  // --qdisc none
  // Whole latency by position in the driver call: ("0", …), ("1", …), ("2-3", …), …
  std::vector<std::pair<std::string, LatencySummary>> lat_by_position;
  // With --per-flow where frames come back to a sink: each producer's flow (its id = the
  // producer's index), counted over the whole cell as the books are; latency of its frames in
  // the window.
  struct Flow {
    unsigned id = 0;
    FlowCounts counts;
    std::optional<LatencySummary> latency;
    // Wire frames its producer handed to the stack over the cell, those a full qdisc refused
    // included (generated - received - lost: what the qdisc refused or still held).
    uint64_t generated = 0;
  };
  std::vector<Flow> flows;
  // With --probe where frames come back: the probe's flow (as a --per-flow entry).
  std::optional<Flow> probe;
  // With more than one flow in the load (--procs, --flows) where frames come back: how evenly
  // the load's flows (the probe left out) were served — Jain's index over each flow's received
  // frames over the cell, (sum x)^2 / (n sum x^2): 1 when every flow got the same, 1/n when one
  // got all — and the least and most a flow received.
  struct Fairness {
    unsigned flows = 0;
    double jain = 0;
    uint64_t min_received = 0, max_received = 0;
  };
  std::optional<Fairness> fairness;
  Books books;
  std::optional<double> ceiling_mpps, ceiling_mb_per_s;
  std::optional<bool> link_bound;
  std::optional<double> link_utilisation;  // wire busy time / window
  // The emulator's self-check (emulator_check.h): whether txbatch's own threads, not the
  // modelled device or link, set the rate, and why (one sentence; empty where not); unset on the
  // simulation engine (its clock is virtual: nothing of the host's can set its rate).
  std::optional<bool> emulator_bound;
  std::string emulator_bound_why;
  // The paced producers' least achieved / offered rate in the window; unset where none is paced.
  std::optional<double> producer_rate_share;
  // Model checks against the real clock.
  double last_departure_s = 0;  // modelled departure of the last frame, from the run's start
  double drained_at_s = 0;      // wall time at which the drain was seen complete
  double stopped_at_s = 0;      // wall time at which generation stopped
  uint64_t arrival_before_tx = 0;
  double wire_max_idle_us = 0;  // longest the wire sat idle inside the window
  double wire_stalled_us = 0;   // idle stretches of kHostStallS or more in the window, summed
  double irq_max_late_us = 0;   // longest the txirq woke after its deadline, in the window
  // What the machine did to the run in its window beside the run itself: the hypervisor's steal
  // and the time that was neither idle, stolen nor the run's own threads' (other tasks,
  // interrupts, txbatch's main thread), each a share of the window's time on the CPUs the run may
  // use (/proc/stat, MachineOf). Unset on the simulation and where /proc/stat cannot be read.
  // calibrate --check leaves a round out where either is kDisturbedShare or more beyond what the
  // counters' ticks could make of nothing (DisturbedBy).
  struct Machine {
    double steal_share = 0, others_share = 0;
    unsigned cpus = 0;  // the CPUs they were counted on
  };
  std::optional<Machine> machine;
  uint64_t foreign = 0;
  uint64_t alloc_failures = 0;  // mbufs a producer could not get: never generated, not in the books
  // Context switches in the window, process-wide (the simulation: its actors'): a thread that
  // slept (a lock's futex, a condition variable, a timer) and one preempted (its turn spent, or
  // the SCHED_FIFO txirq).
  uint64_t voluntary_ctxsw = 0;
  uint64_t involuntary_ctxsw = 0;
  bool interrupted = false;
  bool txirq_realtime = false;
  unsigned unregistered_threads = 0;  // producers EAL gave no lcore id (no mempool cache)
};

// The books close (DESIGN.md Terms): generated = sent + dropped + queued, sent + duplicated =
// received + lost + in flight (where frames come back), and every mbuf is back in its pool.
bool Balanced(const Books& books);

// Where an explicit --sync put a kernel policy on a qdisc its kernel did not have — linux-2025
// (6.x) on the root-locked pfifo_fast of before 4.16, linux-2014 (3.18) or blist-2007 (2.6) on
// the lock-free one of 4.16 on — the sentence that says so (the run header, config.era_mix);
// empty where the two belong together (bql ran on both) or --sync auto chose.
std::string EraMix(const CellConfig& cfg);

// Whether a cell's TX lock (and its receiver's locks) inherits priority
// (TxQueueConfig::tx_lock_inherits), on `cpus` CPUs (0: not known). Inheritance lifts a holder
// that a sibling thread on its CPU preempted while the SCHED_FIFO txirq waits for the lock (that
// inversion left the e1000 ring idle for 3 ms); where every producer takes the lock for every
// bulk, its contended futex_lock_pi/futex_unlock_pi calls cost more than the inversion saves. So:
// not with --qdisc none (every producer, every batch: collapsed, measured); kept with a
// dedicated runner (producers rarely take it; the runner shares a CPU with producers); inline,
// only where producers outnumber the CPUs (each is pinned to a CPU of its own otherwise: no
// sibling to preempt a holder) — 2 inline producers on 2 CPUs sent 2.6x the frames at batch 1
// without it (0.44-0.47 -> 1.22-1.23 Mpps on emu:ixgbe udp 64 B, a 2-vCPU guest; doc/perf.md).
bool TxLockInherits(const CellConfig& cfg, size_t cpus);

// The TX queue's configuration for `cfg`'s shape (txqueuelen, qdisc, runner, sync, BQL), its
// txirq allowed on `cpus`. Stage tracking and the producers' blocking are the caller's.
TxQueueConfig QueueConfigFor(const CellConfig& cfg, double tsc_hz, const std::vector<int>& cpus);

// The probe's frames (--probe): UDP datagrams that carry the txbatch header alone (60 bytes).
inline constexpr unsigned kProbePayload = kTxbatchHeaderBytes;
// Jain's fairness index of `received` (CellResult::Fairness); empty input or all zero: 1.
double JainIndex(std::span<const uint64_t> received);

// CellResult::machine from /proc/stat's times on the run's `cpus` CPUs at the window's start
// (`a`) and end (`b`) and the run's own threads' CPU seconds between them: steal over the CPUs'
// time between the reads, and what was neither idle, stolen nor the run's own over it (never below
// 0: the kernel counts in whole ticks, the run's own to the nanosecond); none where no time
// passed or no CPU was read.
std::optional<CellResult::Machine> MachineOf(const CpuTimes& a, const CpuTimes& b, double own_cpu_s,
                                             size_t cpus);

// The producer threads of `cfg`: its procs, and the probe (index procs), where it has one.
inline unsigned Producers(const CellConfig& cfg) { return cfg.procs + (cfg.probe ? 1 : 0); }
// The flows of `cfg` (each its own source port and sequence): --flows for each of its procs, and
// the probe's, the last, where it has one.
inline unsigned Flows(const CellConfig& cfg) {
  return cfg.procs * cfg.flows + (cfg.probe ? 1 : 0);
}
// The load's flows, the probe's left out: flows 0 .. LoadFlows - 1.
inline unsigned LoadFlows(const CellConfig& cfg) { return cfg.procs * cfg.flows; }
// The probe's flow (where it has one): the last.
inline unsigned ProbeFlow(const CellConfig& cfg) { return LoadFlows(cfg); }
// Producer `i`'s flows: [first, first + count). The probe's is one.
struct FlowRange {
  unsigned first = 0, count = 1;
};
inline FlowRange ProducerFlows(const CellConfig& cfg, unsigned i) {
  return i < cfg.procs ? FlowRange{i * cfg.flows, cfg.flows} : FlowRange{ProbeFlow(cfg), 1};
}
// The producer that sends flow `f`.
inline unsigned ProducerOfFlow(const CellConfig& cfg, unsigned f) {
  return f < LoadFlows(cfg) ? f / cfg.flows : cfg.procs;
}
// The probe's frames a second: its rate, one given in bits turned into its frames on `wire`.
double ProbePps(const CellConfig& cfg, const WireSpec& wire);

// Frames a queue's qdisc may hold: txqueuelen (the producers' band), or fq_codel's limit (its
// memory_limit considered).
unsigned QdiscHolds(const CellConfig& cfg);

// Seconds a drain may take: the wire time and device costs of everything that can be queued,
// plus slack. Longer is a bug.
double DrainBudgetS(const CellConfig& cfg, const WireSpec& wire);

// Frames per second each producer offers under --rate (0: as fast as it can).
double PpsPerProducer(const CellConfig& cfg, const WireSpec& wire);

// Whether TCP Small Queues run in `cfg` (tsq.h): a limit, TCP stream producers, and a driver
// whose completions release the bytes (the emulated NIC's).
bool TsqActive(const CellConfig& cfg);
// TCP Small Queues' model for `cfg` (tsq.h): --tsq the cap, releases timed at `tsc_hz`, a GSO
// frame one skb a segment where the stack cuts it.
TsqModel TsqModelFor(const CellConfig& cfg, double tsc_hz);

// The mbufs one frame of `cfg`'s stack may hold: a GSO frame's slices (TCP's size goal over the
// MSS) with --offload gso or tso, else 1.
unsigned SlicesPerFrame(const CellConfig& cfg);

// Mbufs a pool must hold for `cfg` (qdisc bands + ring + frames in producers' hands + caches).
unsigned PoolSizeFor(const CellConfig& cfg, unsigned lcores);

// The counters a cell's result is computed from, read at one moment (the window's start or end):
// the drivers' and the queues' (every queue's, summed), the CPU time of the cell's threads and
// their context switches.
struct ContextSwitches {
  uint64_t voluntary = 0, involuntary = 0;
};
struct CounterSnapshot {
  DriverCounts d{};
  TxQueueCounts q{};
  ContextSwitches ctxsw{};
  double cpu_ns = 0;
  // Each producer's (the real engine's; the simulation leaves it empty: no self-check there).
  std::vector<ProducerWindow> producers;
};
CounterSnapshot TakeSnapshot(const DriverCounters& d, const TxQueueCounters& q, double cpu_ns,
                             ContextSwitches ctxsw);

// A cell's TX queues added up for its result: counters summed, what is still queued or in
// flight, BQL's largest limit.
struct QueueTotals {
  DriverCounters dc;
  TxQueueCounters qc;
  unsigned backlog = 0, in_flight = 0;
  std::optional<uint32_t> bql_limit;
  std::vector<QdiscChildResult> children;  // each queue's qdisc, in the order added
  // Adds one queue: its driver, its counters, the frames its qdisc still holds, its BQL limit.
  // Every thread has stopped: no lock is needed.
  void Add(const TxDriver& driver, const TxQueueCounters& q, unsigned queued,
           std::optional<uint32_t> bql);
};

// What a finished cell leaves behind, on either engine (every thread stopped, drained): the
// result is computed from it alone.
struct CellRun {
  const CellConfig& cfg;
  const TxDriver& driver;     // the first queue's: what every queue's driver shares (wire, kind)
  const QueueTotals& totals;  // every queue's
  RxSink& sink;               // every queue's, absorbed into one
  const std::vector<ProducerStats>& stats;
  CounterSnapshot a, b;  // at the window's start and end
  double tsc_hz = 0;
  Tsc run_start = 0, window_start = 0, window_end = 0, stopped_at = 0, drained_at = 0;
};

// The first steps and the last of a cell's life, the same on both engines.
// Each flow's first sequence number: `flow_seq`'s (may be null; missing entries 0).
std::vector<uint64_t> FirstSeqs(const CellConfig& cfg, const std::vector<uint64_t>* flow_seq);
// A queue's sink for `cfg`, its flows started at `first_seq`: a link's limit lets a late frame
// trail that many and more; headers checked where the link corrupts; latency per flow for
// --per-flow and the probe.
std::unique_ptr<RxSink> MakeCellSink(const CellConfig& cfg, const RunWindow& window,
                                     double tsc_hz, std::span<const uint64_t> first_seq);
// The books' last lines, once the queues and drivers are gone (a port gives back what its PMD
// held when stopped): the pool's mbufs still in use, and whether the books balance.
void CloseBooks(Books& books, rte_mempool* pool);

// Closes each queue's sink (producer i's flows are on sink i mod sinks.size()) and absorbs them
// all into sinks[0], which then holds the cell's receive side. Before ResultOf.
void CloseSinks(const CellConfig& cfg, std::span<RxSink* const> sinks,
                const std::vector<ProducerStats>& stats);

// The cell's result and books from `run`, except what needs the driver gone (mbufs_in_use,
// balanced): the caller frees the driver, then counts the pool. The sink must be closed
// (CloseSinks); `flow_seq` (may be null) is updated to where each flow ended.
CellResult ResultOf(const CellRun& run, std::vector<uint64_t>* flow_seq);

}  // namespace txbatch
