#pragma once
// What the port commands (bridge, respond: bridge_cmd.cc; sink: sink_cmd.cc) share: their
// common options and checks, the start of EAL and the pool, and the forwarding loop's constants.

#include <CLI/CLI.hpp>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "dataplane/eal.h"
#include "dataplane/histogram.h"
#include "dataplane/link_spec.h"
#include "dataplane/mempool.h"
#include "drivers/ethdev/ethdev.h"
#include "tools/run_options.h"
#include "tools/stats_stream.h"

namespace txbatch::port_cmd {

// Empty polls in a row before the forwarding thread sleeps (then at most kIdleSleepNs at a time,
// or until the link's next arrival): a bridge at rest leaves the CPUs to the hosts around it.
constexpr unsigned kSpinPolls = 256;
constexpr double kIdleSleepNs = 20e3;
// How long the bridge and the sink wait for their ports' links (peers may start later).
constexpr double kPeerLinkWaitS = 60;
// How long the drain after a stop may take beyond the links' longest delay.
constexpr double kDrainS = 1.0;

// The longest --duration or --stats (~11.6 days): far beyond any run, and small enough that
// seconds times the TSC rate stay well inside a Tsc (inf, 1e400 or 1e10 s would overflow it).
inline constexpr double kMaxStopS = 1e6;
// --duration and --stats: 0 for none, else up to kMaxStopS seconds.
inline constexpr ValueRange kStopDurationS{0, kMaxStopS, "until SIGINT or SIGTERM"};
inline constexpr ValueRange kStatsEveryS{0, kMaxStopS, "only the final summary"};

// A latency summary as the port commands' JSON gives it ({p50, p99, max, count} in ns; null when
// nothing was measured): sink records, per-flow entries, --stats-json directions.
nlohmann::json LatencyJson(const std::optional<LatencySummary>& s);

// One latency field of `s` for a table ("-" when nothing was measured).
std::string Lat(const std::optional<LatencySummary>& s, double LatencySummary::*field);

// After a forwarding or counting loop: how many of its --stats intervals (`stats_s` apart) the
// table on standard output and the --stats-json stream did not get because their readers did not
// keep up (Reporter; each was written with the next one they took); nothing where none.
void SayIntervalsNotWritten(uint64_t table, uint64_t stream, double stats_s);

// The largest frame a port of IP MTU `mtu` forwards: Ethernet header and a VLAN tag.
unsigned LargestFrame(unsigned mtu);

// The longest a frame stays in `l` (LinkSpec::MaxHoldS for the largest frame of the MTU).
double LongestStayS(const LinkSpec& l, unsigned mtu);

// A link that may hold a frame past kMaxLinkHoldS is refused, as run refuses it: the drain at a
// stop would wait that long.
Result<std::optional<LinkSpec>> ParseOneLink(const std::string& text, unsigned mtu);

// `option`'s port spec (ethdev:DEVARGS or bare devargs), or a sentence.
Result<ethdev::EthdevOptions> ParsePort(const std::string& option, const std::string& text);

// The last lines before the loop starts: `about` (what the command forwards or counts, also
// /txbatch/info's), EAL's, telemetry's, then "forwarding" (the bridge, the responder) or
// "receiving" (the sink), which `lab up` and the tests wait for.
void PrintEalAndReady(const std::string& about, const EalPlan& plan, double duration_s,
                      const char* doing = "forwarding");

// --stats-json's start event of a forwarding command: `about` (the header's first lines), the
// pid, EAL's mode and the telemetry file prefix, --duration and --stats.
void StartEvent(StatsStream& stream, const char* command, const std::string& about,
                double duration_s, double stats_s, const EalPlan& plan);

// A forwarding command's port (required): `what` names it in --help, `devargs` are examples of
// bare devargs for it.
void AddPortOption(CLI::App& cmd, const std::string& name, std::string& port, std::string_view what,
                   std::string_view devargs);

// --duration and --stats, which every forwarding command takes.
void AddStopOptions(CLI::App& cmd, double& duration_s, double& stats_s);

// Both finite, 0 or up to kMaxStopS (NaN fails every comparison, so it is refused too).
Status CheckStopOptions(double duration_s, double stats_s);

// EAL (memory for `frames` mbufs) and the pool: the start of every forwarding command.
struct Forwarding {
  std::unique_ptr<Eal> eal;
  PoolPtr pool;  // freed before EAL (declared after it)
  EalPlan plan;
};

// `extra_bytes`: memory a port takes for itself besides the pool (a verbs port's receive buffers).
// `*status` is the exit status to give if it fails.
Result<Forwarding> StartForwarding(uint64_t frames, unsigned mtu, EalMemory memory,
                                   const EalUserArgs& eal_args, int* status,
                                   uint64_t extra_bytes = 0);

}  // namespace txbatch::port_cmd
