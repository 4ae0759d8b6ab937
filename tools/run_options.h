#pragma once
// `txbatch run` options: parsed and validated up front into a grid of cells. Control plane only.

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/units.h"
#include "dataplane/eal.h"
#include "dataplane/tsq.h"
#include "engine/cell.h"
#include "tools/option_checks.h"

namespace txbatch {

// --latency-sample's largest N: one stamped frame in 65536.
inline constexpr unsigned kMaxLatencySample = 65536;

// Raw option values as CLI11 fills them (lists still comma-separated text).
struct RunArgs {
  std::vector<std::string> drivers;
  std::string batch;
  std::string policy;
  std::string size = "4096,16384,65536,131072,262144";
  std::string procs = "1,8";
  std::string queues = "1";  // TX queues (XPS: producer i on queue i mod queues), a grid axis
  // Short windows, repeated: three interleaved rounds of 0.3 s say more about noise than one
  // of 1 s, and keep the default experiment under 30 s.
  double duration_s = 0.3;
  double warmup_s = 0.1;
  int rounds = 3;
  // sweep: every cell is judged against batching off, so count:1 runs first in each cell (added
  // if the policies lack it, moved to the front if it is elsewhere).
  bool batching_off_first = false;
  std::string proto = "tcp";
  // --offload: auto, none, gso or tso (gso.h); auto: tso where the emulated NIC has it.
  std::string offload = "auto";
  uint64_t tsq = kDefaultTsqBytes;  // --tsq: TCP Small Queues' bytes a stream socket (tsq.h)
  // --tsq was on the command line: above 0 it is refused where no cell can run TCP Small Queues
  // (the default is used where they can run and left out where they cannot).
  bool tsq_given = false;
  unsigned mtu = 1500;
  std::string rate = "max";
  std::string probe;  // --probe RATE: a latency probe beside the load (CellConfig::probe)
  unsigned flows = 1;  // --flows N: the flows each producer sends (CellConfig::flows)
  std::string producer = "stream";
  unsigned txqueuelen = kDefaultTxQueueLen;
  std::string runner = "inline";
  std::string sync = "auto";  // auto: each policy on its kernel's qdisc (KernelNolock)
  std::string qdisc = "pfifo_fast";
  bool no_timing = false;  // --no-timing: throughput only (no TX stamp read a frame, no latency)
  unsigned latency_sample = 1;  // --latency-sample N (CellConfig::latency_sample)
  bool per_flow = false;   // --per-flow: each flow's counts and latency (CellConfig::per_flow)
  bool no_bypass = false;  // --no-bypass: every frame enqueued and dequeued (no TCQ_F_CAN_BYPASS)
  uint64_t seed = 1;
  std::string json;
  std::string stats_json;  // --stats-json: NDJSON events as cells finish (stats_stream.h)
  std::string eal_memory = "auto";
  std::string link;  // netem words, behind the emulated wire
  // BQL's bounds (policies bql, linux-2014, linux-2025), as sysfs byte_queue_limits names them.
  uint64_t bql_limit_min = 0;
  uint64_t bql_limit_max = kDqlMaxLimit;
  double bql_hold_ms = 1000;
  unsigned pool_size = 0;       // --pool-size; 0 = sized for the cells
  std::string engine = "real";  // real, sim, or both (a grid axis)
  std::string cost_model;       // the simulation engine's cost file; empty = built-in defaults
  int cpus = -1;                // --cpus: the simulated machine's CPUs; -1 = the cost model's
};

// The validated plan: every cell in run order (interleaved: for each procs, size, driver and
// qdisc shape the policies follow each other, so drift hits batching off and on alike).
// A qdisc shape as the options gave it: with `era_sync` (--sync auto) each policy gets the
// synchronisation its kernel ran the qdisc with (KernelNolock), decided cell by cell.
struct ShapeChoice {
  QueueShape shape;
  bool era_sync = false;
  bool operator==(const ShapeChoice&) const = default;
};

struct RunPlan {
  std::vector<CellConfig> cells;
  std::vector<PolicySpec> policies;
  std::vector<ShapeChoice> shapes;
  // Each grid axis (option name) and how many values it was given: compare needs exactly one
  // with two values.
  std::vector<std::pair<std::string, size_t>> axes;
  EalMemory eal_memory = EalMemory::kAuto;
  std::string json_path;
  std::string stats_json_path;
  int rounds = 1;
};

// run's --duration and --warmup (seconds) and --bql-hold-time (ms), as parsing and
// BuildRunPlan check them.
inline constexpr ValueRange kRunDurationS{0.01, 3600};
inline constexpr ValueRange kWarmupS{0, 60};
inline constexpr ValueRange kBqlHoldMs{0, 60000};

// What an empty --json or --link says (every command that takes them).
inline constexpr const char* kJsonNeedsName = "--json needs a file name (or - for standard output)";
inline constexpr const char* kLinkNeedsWords =
    "--link needs netem words (e.g. --link \"delay 3ms loss random 1%\"); valid: leave --link "
    "out for no link";

// Registers the run options on `cmd`, with their defaults in --help.
void AddRunOptions(CLI::App& cmd, RunArgs& args);
// The options of the TX path alone (--batch/--policy, --mtu, the qdisc shape, BQL, EAL memory),
// shared with the bridge; `batch_default` is what --help says --batch defaults to.
void AddQueueOptions(CLI::App& cmd, RunArgs& args, std::string_view batch_default);

// --eal-memory's value; one sentence for anything but auto, no-huge, in-memory.
Result<EalMemory> ParseEalMemory(std::string_view text);

// Validates everything; bad input gets one sentence naming the problem and the valid choices.
Result<RunPlan> BuildRunPlan(const RunArgs& args);

}  // namespace txbatch
