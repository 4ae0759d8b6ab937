#include "tools/run_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>

#include "dataplane/frame.h"
#include "dataplane/qdisc_run.h"
#include "drivers/factory.h"
#include "engine/cost_model_file.h"
#include "engine/sim_engine.h"
#include "tools/stats_stream.h"

namespace txbatch {
namespace {

constexpr unsigned kMaxSize = 1u << 20;  // 1 MiB writes: well past lmbench's 256 KiB
constexpr unsigned kMaxProcs = 64;
constexpr unsigned kMaxQueues = 64;

}  // namespace

Result<EalMemory> ParseEalMemory(std::string_view text) {
  if (text == "auto") return EalMemory::kAuto;
  if (text == "no-huge") return EalMemory::kNoHuge;
  if (text == "in-memory") return EalMemory::kInMemory;
  return MakeError(EINVAL, fmt::format("--eal-memory '{}' is not valid; valid: auto, no-huge, "
                                       "in-memory",
                                       text));
}

void AddQueueOptions(CLI::App& cmd, RunArgs& a, std::string_view batch_default) {
  cmd.add_option("--batch", a.batch,
                 "Batch limits, comma-separated; N means --policy count:N, 1 is batching off "
                 "[default: " +
                     std::string(batch_default) + "]")
      ->check(NonEmpty(fmt::format("--batch needs a batch limit or a comma-separated list of "
                                   "them; valid: integers in 1..{} (e.g. --batch 1,32)",
                                   kMaxBatch)));
  cmd.add_option("--policy", a.policy,
                 "Batching policies, comma-separated: count:N (take at most N frames already "
                 "queued, never wait); buffer:N[:T] (accumulate N frames or T microseconds, DPDK "
                 "rte_eth_tx_buffer; --qdisc none or --runner dedicated); bql (frames while their "
                 "bytes fit Linux's dynamic queue limit, one driver call; emu drivers); "
                 "linux-2014 (Linux 3.18: bulk bounded by BQL only, one call per frame with "
                 "xmit_more so the doorbell rings once per bulk, a 64-packet run quota); "
                 "linux-2025 (6.x with 0345552a653c: each bulk also capped at 1 + the quota left, "
                 "requeued frames sent alone); blist-2007 (a list drained in "
                 "one driver call, as many frames as the driver has free slots). Not together "
                 "with --batch")
      ->check(NonEmpty("--policy needs a policy or a comma-separated list of them; valid: "
                       "count:N, buffer:N[:T], bql, linux-2014, linux-2025, blist-2007"));
  AddWholeNumberOption(cmd, "--mtu", a.mtu, "IP MTU (68..9000); TCP MSS = MTU-52");
  AddWholeNumberOption(cmd, "--txqueuelen", a.txqueuelen, "Frames per pfifo_fast band (1..100000)");
  AddOptionWithDefault(
      cmd, "--runner", a.runner,
      "Runner style: inline (a producer that finds the qdisc idle runs it, Linux) or "
      "dedicated (one runner thread per queue sends, producers only enqueue, DPDK)");
  AddOptionWithDefault(
      cmd, "--sync", a.sync,
      "Qdisc locking: rootlock (one lock around enqueue and dequeue, Linux before "
      "4.16), nolock (lock-free bands, an exclusive run flag and a private requeue "
      "slot, Linux 4.16 on: TCQ_F_NOLOCK) or auto (as the policy's kernel ran pfifo_fast: "
      "nolock for linux-2025 and bql, rootlock for the others and for pfifo). A kernel policy "
      "given another era's qdisc runs with a note saying so. --runner, --sync and --qdisc take "
      "comma-separated lists too: a grid axis");
  AddOptionWithDefault(cmd, "--qdisc", a.qdisc,
                       "Qdisc: pfifo_fast (3 bands, drop-tail, the device's default), pfifo (one "
                       "band, as installed by tc; rootlock only), fq_codel (Linux 6.x's "
                       "sch_fq_codel, Debian's default, rootlock only; tc's parameters after it, "
                       "quoted: 'fq_codel target 5ms interval 100ms limit 10240 quantum 1514 "
                       "flows 1024 memory_limit 32Mb drop_batch 64 ecn|noecn', these the "
                       "defaults, quantum the MTU + 14), or none (Linux noqueue: each producer "
                       "hands its own batches to the driver under the TX lock; refused frames "
                       "are dropped, counted as noqueue)");
  AddWholeNumberOption(cmd, "--bql-limit-min", a.bql_limit_min,
                       "BQL's lowest limit in bytes (sysfs byte_queue_limits/limit_min)");
  AddWholeNumberOption(cmd, "--bql-limit-max", a.bql_limit_max,
                       "BQL's highest limit in bytes (limit_max); set min = max for a fixed limit");
  AddTimeOption(cmd, "--bql-hold-time", a.bql_hold_ms,
                "How long slack must persist before BQL shrinks its limit (hold_time), 0..60s: "
                "a time (1s, 500ms) or a bare number of milliseconds",
                kMsNs, kBqlHoldMs);
  AddOptionWithDefault(
      cmd, "--eal-memory", a.eal_memory,
      "EAL memory without EAL args: auto (hugepages via --in-memory only if enough "
      "are free and ulimit -f holds a hugepage, else --no-huge), no-huge or in-memory");
}

namespace {

// What is timed: every frame, a sample or none, and each flow apart.
void AddTimingOptions(CLI::App& cmd, RunArgs& a) {
  cmd.add_flag("--no-timing", a.no_timing,
               "Throughput only: frames carry no TX stamp (no TSC read a frame where neither "
               "--rate nor a drain timer needs the clock) and the sink keeps no latency; records "
               "say `timing` false and their latency fields are null");
  AddWholeNumberOption(
      cmd, "--latency-sample", a.latency_sample,
      "Latency on a sample, as traffic generators measure it: one frame in N (1..65536) of each "
      "producer carries a TX stamp and is followed through every stage; the others carry none "
      "and read no clock of their own (the receiver still checks every frame's flow and "
      "sequence). The stamped frames take every offset within N in turn, so each position of a "
      "batch is sampled. Records say `latency_sample`; latency counts are the sample's; a "
      "--probe stays timed whole");
  cmd.add_flag("--per-flow", a.per_flow,
               "Where frames come back to a sink: each flow apart (a producer's, one of its "
               "--flows: frames, lost, "
               "duplicated, reordered, latency p50/p99) in records' results.per_flow and a "
               "table after the others (a second latency histogram update a frame)");
}

}  // namespace

void AddRunOptions(CLI::App& cmd, RunArgs& a) {
  cmd.add_flag("--no-bypass", a.no_bypass,
               "Turn off Linux's empty-qdisc bypass (TCQ_F_CAN_BYPASS: with an inline runner, a "
               "frame that finds the qdisc empty and not running goes straight to the driver, "
               "never enqueued; on wherever the kernel a policy names had it: not blist-2007, "
               "and on --sync nolock from 5.14, so not linux-2014). For A/B against today's "
               "path; records say `bypass` and count `bypassed` frames");
  AddTimingOptions(cmd, a);
  cmd.add_option(
         "--driver", a.drivers,
         "Driver spec; repeat for several (devargs contain commas): " + DriverForms() +
             " (the Drivers below) [default: emu:e1000]")
      ->check(NonEmpty("--driver needs a driver spec; valid: " + DriverForms()));
  AddQueueOptions(cmd, a, "1,32");
  AddOptionWithDefault(cmd, "--size", a.size,
                       "Bytes per application write, comma-separated (18..1048576)");
  AddOptionWithDefault(cmd, "--procs", a.procs,
                       "Producer threads sharing the TX queue, comma-separated "
                       "(1..64)");
  AddWholeNumberOption(
      cmd, "--flows", a.flows,
      "Flows each producer sends (1..4096 in all, the probe's included): a source port and a "
      "sequence each, one write each in turn (a TCP socket each: TCP Small Queues per flow), "
      "as pktgen's flows and udp_src_min/max; the sink counts each, records give Jain's index "
      "over them (results.fairness) and fq_codel hashes them apart");
  AddOptionWithDefault(cmd, "--queues", a.queues,
                       "TX queues, comma-separated (1..64): each its own qdisc, runner and txirq; "
                       "producer i sends on queue i mod queues (XPS); emu rings share one wire");
  AddTimeOption(cmd, "--duration", a.duration_s,
                "Measured window per cell, 10ms..3600s: a time (500ms, 2s) or a bare number of "
                "seconds",
                kSecondNs, kRunDurationS);
  AddTimeOption(cmd, "--warmup", a.warmup_s,
                "Warm-up before each window, 0..60s: a time (200ms) or a bare number of seconds",
                kSecondNs, kWarmupS);
  AddWholeNumberOption(
      cmd, "--rounds", a.rounds,
      "Interleaved rounds: the whole grid runs this many times, each cell once per "
      "round; tables show medians and, with two or more rounds, verdicts against "
      "batching off (1..1000; compare: rounds of A then B, 2..1000)");
  AddOptionWithDefault(cmd, "--proto", a.proto,
                       "Framing: tcp (one byte stream in full-MSS segments) or udp (a datagram per "
                       "write, split at MTU-28)");
  AddOptionWithDefault(cmd, "--offload", a.offload,
                       "Where a tcp stream is cut into MSS frames: none (the producer writes "
                       "them), gso (it hands the stack 64 KiB GSO frames, cut before the driver "
                       "on the CPU), tso (cut by the NIC on the wire: emu:e1000, emu:ixgbe) or "
                       "auto (tso where the driver has it, as Linux turns TSO on; else none)");
  AddWholeNumberOption(cmd, "--tsq", a.tsq,
                       "TCP Small Queues: bytes of TCP payload a stream producer keeps below its "
                       "socket (qdisc and ring, until the NIC completes them) before it waits, as "
                       "tcp_limit_output_bytes; by default each policy's kernel's (linux-2014 "
                       "131072, linux-2025 4 MiB, the others 1 MiB: Linux 5.0-6.15); 0 = off. Runs "
                       "with tcp stream producers on emu drivers (others' completions are not "
                       "seen): given above 0 with --proto udp, --producer datagram or no "
                       "emu driver it is refused; with emu and other drivers the header names the "
                       "drivers whose cells run without it")
      ->each([&a](const std::string&) { a.tsq_given = true; });
  AddOptionWithDefault(
      cmd, "--rate", a.rate,
      "Offered load: max, or frames/s (40000pps, 40kpps, 1mpps) or wire bit/s with "
      "Ethernet overhead (500mbit, 1gbit), split evenly over producers; a producer that makes "
      "less than 99 % of its share unheld marks the cell emulator-bound (doc/output.md)");
  cmd.add_option("--probe", a.probe,
                 "A latency probe beside the load: one more producer, of its own flow, sending "
                 "60-byte frames (UDP datagrams of the txbatch header alone) at this rate "
                 "(100pps, 1mbit), its latency and loss past the qdisc in results.probe and a "
                 "Probe table (Flent's rrul in miniature: how long a sparse flow waits behind "
                 "the bulk ones, under pfifo_fast or fq_codel)");
  AddOptionWithDefault(cmd, "--producer", a.producer,
                       "When the qdisc band is full: stream blocks (socket send buffer), datagram "
                       "drops and counts");
  cmd.add_option("--link", a.link,
                 "A link behind the emulated NIC's wire, in netem's words (tc-netem(8)): delay "
                 "TIME [JITTER [CORR%]] [distribution uniform|normal|pareto|paretonormal], loss "
                 "random P% [CORR%] | loss state p13 [p31 [p32 [p23 [p14]]]] | loss gemodel p [r "
                 "[1-h [1-k]]], duplicate P% [CORR%], reorder P% [CORR%] [gap N], corrupt P% "
                 "[CORR%], rate RATE [OVERHEAD], seed N, limit N (default 1000); e.g. \"delay 3ms "
                 "1ms 25% distribution normal loss random 1%\"")
      ->check(NonEmpty(kLinkNeedsWords));
  AddWholeNumberOption(cmd, "--seed", a.seed, "Random seed recorded with the results");
  AddWholeNumberOption(cmd, "--pool-size", a.pool_size,
                       "Mbufs in the packet pool (64..4194304); 0 sizes it so queueing alone never "
                       "exhausts it. Smaller makes producers wait for mbufs (counted as "
                       "alloc_failures): a fault to test against");
  AddOptionWithDefault(cmd, "--engine", a.engine,
                       "real (threads on the TSC) or sim (the same qdisc, policy and NIC code on a "
                       "virtual clock with a CPU cost model: deterministic, emu drivers, --sync "
                       "rootlock); comma-separated for both");
  cmd.add_option("--cost-model", a.cost_model,
                 "The simulation engine's CPU costs, a JSON file as `txbatch calibrate` writes "
                 "(default: built in, see doc/design.md)")
      ->check(NonEmpty("--cost-model needs a file name; valid: a JSON file as txbatch calibrate "
                       "writes (without --cost-model: the built-in costs)"));
  cmd.add_option("--cpus", a.cpus,
                 fmt::format("The simulated machine's CPUs (--engine sim): threads share them as "
                             "the real engine places them (producer i on CPU i mod N, queue q's "
                             "txirq on CPU q mod N, a dedicated runner where the fewest threads "
                             "are), with the cost model's "
                             "scheduler costs; 0 = a CPU per thread (0..{}; default: the cost "
                             "model's cpus)",
                             kMaxModelCpus))
      ->transform(WholeNumber("--cpus", 2));
  cmd.add_option("--json", a.json, "Write result records (schema_version 1) to this file")
      ->check(NonEmpty(kJsonNeedsName));
  AddStatsJsonOption(cmd, a.stats_json, "a cell event as each cell run finishes (its record)");
}

namespace {

// What BuildRunPlan's grid is made of, each option parsed and checked: the lists the grid
// crosses and the values every cell shares.
struct GridParts {
  std::vector<std::string> runners, syncs, qdiscs, engines;
  CostModel cost;
  Proto proto = Proto::kTcp;
  Offload offload = Offload::kNone;
  bool offload_auto = false;  // --offload auto: each driver's (AutoOffload)
  std::vector<unsigned> sizes, procs, queues;
  unsigned max_queues = 1;
  RateSpec rate;
  std::optional<RateSpec> probe;
  std::optional<LinkSpec> link;
  BqlBounds bql;
  std::vector<std::string> drivers;  // as given (emu:e1000 when none was)
  std::vector<DriverSpec> specs;     // drivers[i]'s
};

// --offload auto: TSO where the driver has it (Linux turns it on wherever the NIC offers it) for
// a TCP stream; nothing else cuts (no GSO by default: a DPDK port sends what it is given).
Offload AutoOffload(Proto proto, const DriverSpec& spec) {
  return proto == Proto::kTcp && spec.tso_bytes() > 0 ? Offload::kTso : Offload::kNone;
}

Status CheckChoice(std::string_view option, const std::string& v,
                   std::initializer_list<std::string_view> valid) {
  for (auto c : valid)
    if (v == c) return {};
  return MakeError(
      EINVAL, fmt::format("{} '{}' is not valid; valid: {}", option, v, fmt::join(valid, ", ")));
}

// --proto and --producer, the lists of --runner, --sync, --qdisc and --engine, --cost-model and
// --eal-memory.
Status ParseChoices(const RunArgs& a, GridParts& g, RunPlan& plan) {
  if (Status s = CheckChoice("--proto", a.proto, {"tcp", "udp"}); !s) return s;
  if (Status s = CheckChoice("--producer", a.producer, {"stream", "datagram"}); !s) return s;
  g.offload_auto = a.offload == "auto";
  if (!g.offload_auto) {
    auto offload = ParseOffload(a.offload);
    if (!offload)
      return MakeError(EINVAL, fmt::format("--offload '{}' is not valid; valid: auto, none, gso, "
                                           "tso",
                                           a.offload));
    g.offload = *offload;
  }
  if (g.offload != Offload::kNone && a.proto != "tcp")
    return MakeError(EINVAL, fmt::format("--offload {} cuts a TCP stream into MSS frames, and "
                                         "--proto {} has none; valid: --offload none with "
                                         "--proto udp, or --proto tcp",
                                         a.offload, a.proto));
  auto runners = ParseChoiceList("--runner", a.runner, {"inline", "dedicated"});
  if (!runners) return runners.error();
  g.runners = std::move(*runners);
  auto syncs = ParseChoiceList("--sync", a.sync, {"auto", "rootlock", "nolock"});
  if (!syncs) return syncs.error();
  g.syncs = std::move(*syncs);
  auto qdiscs = ParseQdiscList(a.qdisc);
  if (!qdiscs) return qdiscs.error();
  g.qdiscs = std::move(*qdiscs);
  auto engines = ParseChoiceList("--engine", a.engine, {"real", "sim"});
  if (!engines) return engines.error();
  g.engines = std::move(*engines);
  if (!a.cost_model.empty()) {
    auto loaded = LoadCostModel(a.cost_model);
    if (!loaded) return loaded.error();
    g.cost = *loaded;
  }
  if (a.cpus >= 0) {
    if (std::find(g.engines.begin(), g.engines.end(), "sim") == g.engines.end())
      return MakeError(EINVAL, fmt::format("--cpus {} sets the simulated machine's CPUs, and no "
                                           "cell runs on --engine sim; valid: --engine sim (or "
                                           "real,sim) with --cpus, or no --cpus",
                                           a.cpus));
    if (static_cast<unsigned>(a.cpus) > kMaxModelCpus)
      return MakeError(ERANGE, fmt::format("--cpus {} is out of range; valid: 0..{} (0: a CPU "
                                           "per thread)",
                                           a.cpus, kMaxModelCpus));
    g.cost.cpus = static_cast<unsigned>(a.cpus);
  }
  auto memory = ParseEalMemory(a.eal_memory);
  if (!memory) return memory.error();
  plan.eal_memory = *memory;
  return {};
}

// --batch or --policy into plan.policies, count:1 moved or added first where asked (sweep, tune).
Status ParsePolicies(const RunArgs& a, RunPlan& plan) {
  if (!a.batch.empty() && !a.policy.empty())
    return MakeError(EINVAL,
                     "--batch and --policy were both given; --batch N means --policy "
                     "count:N, so give one of them");
  if (a.policy.empty()) {
    auto batches = ParseUnsignedList("--batch", a.batch.empty() ? "1,32" : a.batch, 1, kMaxBatch);
    if (!batches) return batches.error();
    for (unsigned b : *batches) plan.policies.push_back({PolicyKind::kCount, uint16_t(b)});
  } else {
    for (std::string_view p : SplitList(a.policy)) {
      auto spec = ParsePolicySpec(p);
      if (!spec) return spec.error();
      plan.policies.push_back(*spec);
    }
    if (const PolicySpec* again = FirstRepeat(plan.policies))
      return Repeated("--policy", again->ToString());
  }
  if (a.batching_off_first) {
    const PolicySpec off{PolicyKind::kCount, 1};
    std::erase(plan.policies, off);
    plan.policies.insert(plan.policies.begin(), off);
  }
  return {};
}

// A --qdisc item's qdisc name (its first word) and tc's parameters after it.
std::pair<std::string_view, std::string_view> QdiscWords(std::string_view item) {
  const size_t space = item.find(' ');
  if (space == std::string_view::npos) return {item, {}};
  return {item.substr(0, space), item.substr(space + 1)};
}

// Every combination of the shape lists into plan.shapes, each checked on its own and against
// every policy.
Status BuildShapes(const RunArgs& a, const GridParts& g, RunPlan& plan) {
  for (const std::string& item : g.qdiscs)
    for (const std::string& r : g.runners)
      for (const std::string& y : g.syncs) {
        const auto [q, words] = QdiscWords(item);
        if (r == "dedicated" && q == "none")
          return MakeError(EINVAL,
                           "--runner dedicated runs a qdisc, and --qdisc none has none; valid: "
                           "--runner inline with --qdisc none, or a qdisc with either runner");
        if (y == "nolock" && q == "none")
          return MakeError(EINVAL,
                           "--sync nolock chooses how a qdisc is locked, and --qdisc none has "
                           "none; valid: --sync nolock or rootlock with --qdisc pfifo_fast");
        if (y == "nolock" && (q == "pfifo" || q == "fq_codel"))
          return MakeError(EINVAL,
                           fmt::format("--sync nolock is the lock-free pfifo_fast (TCQ_F_NOLOCK), "
                                       "and Linux runs {} under its root lock; valid: --qdisc {} "
                                       "with --sync rootlock or auto, or --qdisc pfifo_fast with "
                                       "either",
                                       q, q));
        // Each policy against this shape; the three checks need different shapes (--qdisc
        // none, an inline runner on a qdisc, a dedicated runner), so at most one applies.
        for (const PolicySpec& p : plan.policies) {
          if (p.needs_qdisc() && q == "none")
            return MakeError(EINVAL,
                             fmt::format("policy {} bulk-dequeues from a qdisc, and --qdisc none "
                                         "has none; valid with --qdisc none: count:N or "
                                         "buffer:N[:T]",
                                         p.ToString()));
          if (a.offload == "gso" && q == "none" && p.frames > kMaxGsoBulk)
            return MakeError(
                EINVAL, fmt::format("policy {} with --offload gso and --qdisc none batches "
                                    "up to {} GSO frames, and the stack cuts at most {} at "
                                    "once into segments (a batch of {} frames); valid: a "
                                    "batch of 1..{}",
                                    p.ToString(), p.frames, kMaxGsoBulk, kMaxBatch, kMaxGsoBulk));
          if (p.kind == PolicyKind::kBuffer && q != "none" && r != "dedicated")
            return MakeError(EINVAL,
                             fmt::format("policy {} waits for frames to accumulate, which needs "
                                         "--qdisc none or --runner dedicated (an inline runner "
                                         "never waits); valid with this shape: count:N",
                                         p.ToString()));
          if (p.kind == PolicyKind::kBuffer && r == "dedicated" && p.timeout_us == 0 &&
              p.frames > a.txqueuelen)
            return MakeError(EINVAL,
                             fmt::format("policy {} waits for {} frames, more than a band of "
                                         "--txqueuelen {} can hold, and has no drain timer: it "
                                         "would never send; valid: buffer:N:T, or N <= {}",
                                         p.ToString(), p.frames, a.txqueuelen, a.txqueuelen));
        }
        ShapeChoice choice;
        choice.shape.noqueue = q == "none";
        choice.shape.dedicated = r == "dedicated";
        choice.shape.nolock = y == "nolock";
        choice.shape.pfifo = q == "pfifo";
        if (q == "fq_codel") {
          std::string error;  // ParseQdiscList checked the words
          choice.shape.fq_codel = ParseFqCodel(words, &error);
        }
        // The era decides only where there is a lock-free form (pfifo_fast).
        choice.era_sync = y == "auto" && q == "pfifo_fast";
        // --qdisc none has no runner or sync: one shape, however many of those were listed.
        if (std::find(plan.shapes.begin(), plan.shapes.end(), choice) == plan.shapes.end())
          plan.shapes.push_back(choice);
      }
  return {};
}

// --mtu against the framing, the lists of --size, --procs and --queues, --duration, --rounds,
// --warmup, --txqueuelen, --rate and --pool-size.
Status ParseCellValues(const RunArgs& a, GridParts& g) {
  if (a.mtu < kMinMtu || a.mtu > kMaxMtu)
    return MakeError(
        ERANGE, fmt::format("--mtu {} is out of range; valid: {}..{}", a.mtu, kMinMtu, kMaxMtu));
  const Proto proto = a.proto == "tcp" ? Proto::kTcp : Proto::kUdp;
  if (MaxPayload(proto, a.mtu) < kTxbatchHeaderBytes)
    return MakeError(
        ERANGE,
        fmt::format("--mtu {} leaves no room for the {}-byte txbatch header "
                    "in a {} frame; valid: {}..{}",
                    a.mtu, kTxbatchHeaderBytes, a.proto,
                    kTxbatchHeaderBytes + kIpv4HeaderBytes + L4HeaderBytes(proto), kMaxMtu));
  g.proto = proto;
  auto sizes = ParseUnsignedList("--size", a.size, kTxbatchHeaderBytes, kMaxSize);
  if (!sizes) return sizes.error();
  g.sizes = std::move(*sizes);
  auto procs = ParseUnsignedList("--procs", a.procs, 1, kMaxProcs);
  if (!procs) return procs.error();
  g.procs = std::move(*procs);
  const unsigned most_procs = *std::max_element(g.procs.begin(), g.procs.end());
  const uint64_t flows = uint64_t{most_procs} * a.flows + (a.probe.empty() ? 0 : 1);
  if (a.flows < 1 || flows > kMaxFlows)
    return MakeError(ERANGE,
                     a.flows < 1 ? std::string("--flows 0 sends nothing; valid: 1 or more, at "
                                               "most 4096 flows in all")
                                 : fmt::format("--flows {} with --procs {}{} makes {} flows; valid: "
                                               "at most {} in all (--procs x --flows{})",
                                               a.flows, most_procs,
                                               a.probe.empty() ? "" : " and --probe", flows,
                                               kMaxFlows, a.probe.empty() ? "" : " + 1"));
  auto queues = ParseUnsignedList("--queues", a.queues, 1, kMaxQueues);
  if (!queues) return queues.error();
  g.queues = std::move(*queues);
  g.max_queues = *std::max_element(g.queues.begin(), g.queues.end());
  // Parsing refused these as typed already (TimeIn); a RunArgs filled in code is checked here.
  if (!kRunDurationS.Holds(a.duration_s))
    return MakeError(ERANGE, OutOfRange("--duration", fmt::format("{}", a.duration_s),
                                        kRunDurationS, TimeUnitWord(kSecondNs)));
  if (a.rounds < 1 || a.rounds > 1000)
    return MakeError(ERANGE, fmt::format("--rounds {} is out of range; valid: 1..1000", a.rounds));
  if (!kWarmupS.Holds(a.warmup_s))
    return MakeError(ERANGE, OutOfRange("--warmup", fmt::format("{}", a.warmup_s), kWarmupS,
                                        TimeUnitWord(kSecondNs)));
  if (a.txqueuelen < 1 || a.txqueuelen > 100000)
    return MakeError(
        ERANGE, fmt::format("--txqueuelen {} is out of range; valid: 1..100000", a.txqueuelen));
  auto rate = ParseRate(a.rate);
  if (!rate) return rate.error();
  g.rate = *rate;
  if (!a.probe.empty()) {
    auto probe = ParseRate(a.probe);
    if (!probe) return MakeError(EINVAL, "--probe " + probe.error().message);
    if (probe->unit == RateSpec::Unit::kMax)
      return MakeError(EINVAL, "--probe max would flood the wire with the probe itself; valid: "
                               "a rate such as 100pps or 1mbit");
    g.probe = *probe;
  }
  if (a.latency_sample < 1 || a.latency_sample > kMaxLatencySample)
    return MakeError(ERANGE, fmt::format("--latency-sample {} is out of range; valid: 1 (every "
                                         "frame)..{}",
                                         a.latency_sample, kMaxLatencySample));
  if (a.latency_sample > 1 && a.no_timing)
    return MakeError(EINVAL, fmt::format("--latency-sample {} with --no-timing: --no-timing "
                                         "stamps no frame to sample; valid: one of them",
                                         a.latency_sample));
  if (a.tsq > kMaxTsqBytes)
    return MakeError(ERANGE, fmt::format("--tsq {} is out of range; valid: 0 (off) or 1..{} bytes",
                                         a.tsq, kMaxTsqBytes));
  if (a.pool_size != 0 && (a.pool_size < 64 || a.pool_size > (1u << 22)))
    return MakeError(ERANGE, fmt::format("--pool-size {} is out of range; valid: 0 (sized for the "
                                         "cells) or 64..4194304 mbufs",
                                         a.pool_size));
  return {};
}

// --link (one that may hold a frame too long for a drain refused) and BQL's bounds.
Status ParseLinkAndBql(const RunArgs& a, GridParts& g) {
  if (!a.link.empty()) {
    auto l = ParseLinkSpec(a.link);
    if (!l) return l.error();
    if (l->Active()) g.link = *l;
  }
  // A run drains its link after each window: one that may hold a frame for hours is refused
  // now, not waited for (or reported as a wedged drain).
  const std::optional<LinkSpec>& link = g.link;
  if (link && link->MaxHoldS(a.mtu + kEthHeaderBytes) > kMaxLinkHoldS)
    return MakeError(ERANGE,
                     fmt::format("--link '{}' may hold a frame for {:.0f} s after the "
                                 "window closes (its delay and jitter, and {} frames "
                                 "queued ahead at its rate), and a run waits at most {:.0f} "
                                 "s for what its link holds; valid: {}",
                                 a.link, link->MaxHoldS(a.mtu + kEthHeaderBytes), link->limit,
                                 kMaxLinkHoldS, link->HoldAdvice(a.mtu + kEthHeaderBytes)));
  if (a.bql_limit_max > kDqlMaxLimit || a.bql_limit_min > a.bql_limit_max)
    return MakeError(ERANGE, fmt::format("--bql-limit-min {} and --bql-limit-max {} are out of "
                                         "range; valid: 0 <= min <= max <= {} bytes",
                                         a.bql_limit_min, a.bql_limit_max, kDqlMaxLimit));
  if (!kBqlHoldMs.Holds(a.bql_hold_ms))
    return MakeError(ERANGE, OutOfRange("--bql-hold-time", fmt::format("{}", a.bql_hold_ms),
                                        kBqlHoldMs, TimeUnitWord(kMsNs)));
  g.bql = BqlBounds{static_cast<uint32_t>(a.bql_limit_min), static_cast<uint32_t>(a.bql_limit_max),
                    a.bql_hold_ms / 1e3};
  return {};
}

// Each --driver's spec (emu:e1000 when none is given), checked against the policies, --mtu,
// --queues and --link, each driver once; then --link against several queues.
Status ParseDrivers(const RunArgs& a, const std::vector<PolicySpec>& policies, GridParts& g) {
  g.drivers = a.drivers;
  if (g.drivers.empty()) g.drivers.push_back("emu:e1000");
  const std::vector<std::string>& drivers = g.drivers;
  std::vector<DriverSpec>& specs = g.specs;
  for (const auto& d : drivers) {
    auto spec = ParseDriverSpec(d);
    if (!spec) return spec.error();
    for (const PolicySpec& p : policies)
      if (p.kind == PolicyKind::kBql && !spec->emulated())
        return MakeError(ENOTSUP,
                         fmt::format("policy bql needs a driver that reports completed bytes "
                                     "(BQL), and {} frees frames without telling (a DPDK PMD, "
                                     "an HCA's completions); valid: bql with emu:MODEL drivers, or "
                                     "linux-2014/linux-2025 (no bulking without BQL, as in "
                                     "Linux)",
                                     d));
    if (Status st = spec->CheckMtu(a.mtu); !st) return st;
    if (g.max_queues > 1 && !spec->limits().one_queue.empty())
      return MakeError(ENOTSUP, fmt::format("--queues {} on {}: {}; valid: --queues 1 with {}",
                                            g.max_queues, d, spec->limits().one_queue,
                                            spec->kind()));
    if (g.offload == Offload::kTso) {
      if (spec->tso_bytes() == 0)
        return MakeError(ENOTSUP,
                         fmt::format("--offload tso needs a NIC that cuts GSO frames on the wire, "
                                     "and {} has no TSO here; valid: --offload tso with emu:e1000 "
                                     "or emu:ixgbe, or --offload gso (cut by the stack) with any "
                                     "driver",
                                     d));
    }
    if (g.link && !spec->emulated())
      return MakeError(ENOTSUP,
                       fmt::format("--link puts a link behind the emulated NIC's wire, "
                                   "and {} is not an emulated NIC; valid: --link with emu:MODEL "
                                   "drivers (DPDK ports get links with the bridge)",
                                   d));
    for (size_t e = 0; e < specs.size(); ++e)
      if (specs[e].ToString() == spec->ToString())
        return d == drivers[e]
                   ? Repeated("--driver", d)
                   : MakeError(EINVAL, fmt::format("--driver '{}' and '{}' are the same driver "
                                                   "({}), which would run the same cells twice; "
                                                   "valid: each driver once (--rounds repeats "
                                                   "cells)",
                                                   drivers[e], d, spec->ToString()));
    specs.push_back(*spec);
  }
  if (g.link && g.max_queues > 1)
    return MakeError(ENOTSUP, fmt::format("--link with --queues {}: the link model sits behind one "
                                          "ring, not a wire shared by several; valid: --queues 1 "
                                          "with --link",
                                          g.max_queues));
  return {};
}

// An explicit --tsq above 0 where no cell can run TCP Small Queues (TsqActive): refused, saying
// why. Where some drivers can and others cannot, the cells run and the header names the drivers
// whose cells ran without them (PrintHeader).
Status CheckTsqApplies(const RunArgs& a, const GridParts& g) {
  if (!a.tsq_given || a.tsq == 0) return {};
  if (g.proto != Proto::kTcp)
    return MakeError(EINVAL, fmt::format("--tsq {} bounds the TCP payload a stream keeps below "
                                         "its socket, and --proto {} sends datagrams (no UDP "
                                         "send buffer is modelled); valid: --tsq with --proto "
                                         "tcp, or no --tsq",
                                         a.tsq, a.proto));
  if (a.producer != "stream")
    return MakeError(EINVAL, fmt::format("--tsq {} makes a stream producer wait for completions, "
                                         "and --producer {} never waits (it drops on a full "
                                         "qdisc); valid: --tsq with --producer stream, or no "
                                         "--tsq",
                                         a.tsq, a.producer));
  std::vector<std::string> unseen;  // drivers whose completions txbatch does not see
  for (size_t d = 0; d < g.specs.size(); ++d)
    if (!g.specs[d].emulated()) unseen.push_back(g.drivers[d]);
  if (unseen.size() == g.specs.size())
    return MakeError(
        ENOTSUP,
        fmt::format("--tsq {} waits for the NIC's completions to release a "
                    "stream's bytes, and txbatch sees completions on emu:MODEL "
                    "drivers only ({}); valid: --tsq with an emu:MODEL driver, or "
                    "no --tsq",
                    a.tsq,
                    unseen.size() == 1 ? unseen.front() + " is not one"
                                       : fmt::format("none of {} is", fmt::join(unseen, ", "))));
  return {};
}

// The cells in run order (RunPlan), each checked against the simulation engine where it runs
// there.
Status BuildCells(const RunArgs& a, const GridParts& g, RunPlan& plan) {
  for (unsigned nq : g.queues)
    for (unsigned p : g.procs)
      for (unsigned s : g.sizes)
        for (size_t d = 0; d < g.drivers.size(); ++d)
          for (const ShapeChoice& choice : plan.shapes)
            for (const std::string& engine : g.engines)
              for (const PolicySpec& pol : plan.policies) {
                QueueShape shape = choice.shape;
                if (choice.era_sync) shape.nolock = KernelNolock(pol, shape);
                CellConfig c;
                c.driver = g.drivers[d];
                c.driver_spec = g.specs[d];
                c.proto = g.proto;
                c.offload = g.offload_auto ? AutoOffload(g.proto, g.specs[d]) : g.offload;
                c.tsq = a.tsq_given ? a.tsq : EraTsqBytes(pol);
                c.policy = pol;
                c.size = s;
                c.procs = p;
                c.flows = a.flows;
                c.queues = nq;
                c.mtu = a.mtu;
                c.txqueuelen = a.txqueuelen;
                c.duration_s = a.duration_s;
                c.warmup_s = a.warmup_s;
                c.rate = g.rate;
                c.stream = a.producer == "stream";
                c.shape = shape;
                c.bypass = !a.no_bypass && KernelBypass(pol, shape);
                c.sync_auto = choice.era_sync;
                c.timing = !a.no_timing;
                c.latency_sample = a.latency_sample;
                c.per_flow = a.per_flow;
                c.probe = g.probe;
                c.bql = g.bql;
                c.seed = a.seed;
                c.link = g.link;
                c.engine = engine == "sim" ? Engine::kSim : Engine::kReal;
                c.pool_size = a.pool_size;
                c.cost = g.cost;
                // A dedicated runner waiting for N frames with no timer, behind streams that TCP
                // Small Queues stop short of N: nothing would ever be sent.
                if (TsqActive(c) && shape.dedicated && pol.kind == PolicyKind::kBuffer &&
                    pol.timeout_us == 0) {
                  const uint64_t frame = uint64_t{SlicesPerFrame(c)} * MaxPayload(c.proto, c.mtu);
                  const uint64_t most = uint64_t{(p + nq - 1) / nq} * (c.tsq / frame + 1);
                  if (pol.frames > most)
                    return MakeError(
                        EINVAL, fmt::format("policy {} waits for {} frames, and TCP Small Queues "
                                            "(--tsq {}) let {} producers keep at most {} queued "
                                            "at a runner: it would never send; valid: "
                                            "buffer:N:T, N <= {}, or --tsq 0",
                                            pol.ToString(), pol.frames, c.tsq, (p + nq - 1) / nq,
                                            most, most));
                }
                if (c.engine == Engine::kSim)
                  if (auto why = SimUnsupported(c)) return MakeError(ENOTSUP, *why);
                plan.cells.push_back(c);
              }
  return {};
}

}  // namespace

// The steps in the order their checks run: the first bad option is the one reported.
Result<RunPlan> BuildRunPlan(const RunArgs& a) {
  RunPlan plan;
  GridParts g;
  if (Status s = ParseChoices(a, g, plan); !s) return s.error();
  if (Status s = ParsePolicies(a, plan); !s) return s.error();
  if (Status s = BuildShapes(a, g, plan); !s) return s.error();
  if (Status s = ParseCellValues(a, g); !s) return s.error();
  if (Status s = ParseLinkAndBql(a, g); !s) return s.error();
  if (Status s = ParseDrivers(a, plan.policies, g); !s) return s.error();
  if (Status s = CheckTsqApplies(a, g); !s) return s.error();
  if (Status s = BuildCells(a, g, plan); !s) return s.error();
  plan.json_path = a.json;
  plan.stats_json_path = a.stats_json;
  plan.rounds = a.rounds;
  plan.axes = {{"--procs", g.procs.size()},
               {"--queues", g.queues.size()},
               {"--size", g.sizes.size()},
               {"--driver", g.drivers.size()},
               {"--qdisc/--runner/--sync", plan.shapes.size()},
               {"--batch/--policy", plan.policies.size()},
               {"--engine", g.engines.size()}};
  return plan;
}

}  // namespace txbatch
