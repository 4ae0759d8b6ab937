#include "tools/port_cmd.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include "dataplane/mempool.h"
#include "dataplane/telemetry.h"
#include "drivers/ethdev/ethdev.h"
#include "drivers/factory.h"
#include "results/latency_text.h"
#include "tools/session.h"

namespace txbatch::port_cmd {

std::string Lat(const std::optional<LatencySummary>& s, double LatencySummary::*field) {
  // Microseconds always: a live line's column cannot know the values still to come.
  return LatencyText(s ? std::optional((*s).*field) : std::nullopt, LatencyUnit::kUs);
}

void SayIntervalsNotWritten(uint64_t table, uint64_t stream, double stats_s) {
  for (const auto& [n, what] :
       {std::pair{table, "standard output"}, std::pair{stream, "the --stats-json file"}})
    if (n > 0)
      fmt::print(
          "{} of the --stats intervals ({:g} s each) were not written on their own to {}: what "
          "reads it did not keep up (each went with the next interval written; the ports were "
          "never held up for it)\n",
          n, stats_s, what);
}

// The largest frame a port of IP MTU `mtu` forwards: Ethernet header and a VLAN tag.
unsigned LargestFrame(unsigned mtu) { return mtu + kEthHeaderBytes + 4; }

// The longest a frame stays in `l` (LinkSpec::MaxHoldS for the largest frame of the MTU).
double LongestStayS(const LinkSpec& l, unsigned mtu) { return l.MaxHoldS(LargestFrame(mtu)); }

// A link that may hold a frame past kMaxLinkHoldS is refused, as run refuses it: the drain at a
// stop would wait that long.
Result<std::optional<LinkSpec>> ParseOneLink(const std::string& text, unsigned mtu) {
  if (text.empty()) return std::optional<LinkSpec>();
  auto l = ParseLinkSpec(text);
  if (!l) return l.error();
  if (const double hold = l->MaxHoldS(LargestFrame(mtu)); hold > kMaxLinkHoldS)
    return MakeError(ERANGE,
                     fmt::format("--link '{}' may hold a frame for {:.0f} s, and the "
                                 "drain at a stop waits at most {:.0f} s for what a "
                                 "link holds; valid: {}",
                                 text, hold, kMaxLinkHoldS, l->HoldAdvice(LargestFrame(mtu))));
  return l->Active() ? std::optional<LinkSpec>(*l) : std::nullopt;
}

Result<ethdev::EthdevOptions> ParsePort(const std::string& option, const std::string& text) {
  if (text.empty())
    return MakeError(EINVAL, fmt::format("{} is required; valid: ethdev:DEVARGS (e.g. "
                                         "net_af_packet0,iface=veth0) or ethdev:port=N",
                                         option));
  if (const NamedDriver d = DriverNamedBy(text);
      d.limits != nullptr && !d.limits->not_forwarding.empty())
    return MakeError(EINVAL, fmt::format("{} '{}': {} {}; valid: ethdev:DEVARGS (e.g. "
                                         "net_af_packet0,iface=veth0) or ethdev:port=N",
                                         option, text, d.name, d.limits->not_forwarding));
  auto o = ethdev::ParseEthdevSpec(text.starts_with("ethdev") ? text : "ethdev:" + text);
  if (!o) return MakeError(o.error().err, option + ": " + o.error().message);
  return *o;
}

// The last lines before the loop starts: `lab up` and the tests wait for "forwarding" (the
// bridge, the responder) or "receiving" (the sink).
void PrintEalAndReady(const std::string& about, const EalPlan& plan, double duration_s,
                      const char* doing) {
  fmt::print("{}\n", about);
  PublishTelemetryInfo({{"about", about},
                        {"pid", static_cast<uint64_t>(getpid())},
                        {"eal_mode", plan.mode},
                        {"duration_s", fmt::format("{:g}", duration_s)}});
  fmt::print("EAL {} ({}): {}\n", plan.mode, plan.why,
             fmt::join(plan.args.begin() + 1, plan.args.end(), " "));
  if (const std::string line = TelemetryLine(plan.args); !line.empty()) fmt::print("{}\n", line);
  fmt::print("{}; SIGINT or SIGTERM stops it{}\n", doing,
             duration_s > 0 ? fmt::format(", or {:g} s", duration_s) : std::string());
  std::fflush(stdout);
}

nlohmann::json LatencyJson(const std::optional<LatencySummary>& s) {
  if (!s) return nullptr;
  return {{"p50", s->p50}, {"p99", s->p99}, {"max", s->max}, {"count", s->count}};
}

void StartEvent(StatsStream& stream, const char* command, const std::string& about,
                double duration_s, double stats_s, const EalPlan& plan) {
  if (!stream) return;
  const std::string prefix = TelemetryPrefix(plan.args);
  stream.Event("start", {{"command", command},
                         {"about", about},
                         {"pid", getpid()},
                         {"eal_mode", plan.mode},
                         {"telemetry_prefix",
                          prefix.empty() ? nlohmann::json(nullptr) : nlohmann::json(prefix)},
                         {"duration_s", duration_s},
                         {"stats_s", stats_s}});
}

// A forwarding command's port (required): `what` names it in --help, `devargs` are examples of
// bare devargs for it.
void AddPortOption(CLI::App& cmd, const std::string& name, std::string& port, std::string_view what,
                   std::string_view devargs) {
  cmd.add_option(
         name, port,
         fmt::format("{}: ethdev:DEVARGS or bare devargs ({}) or ethdev:port=N", what, devargs))
      ->required();
}

// --duration and --stats, which every forwarding command takes.
void AddStopOptions(CLI::App& cmd, double& duration_s, double& stats_s) {
  AddTimeOption(cmd, "--duration", duration_s,
                "Stop after this long, up to 1000000s: a time (90s, 500ms) or a bare number of "
                "seconds (0: at SIGINT or SIGTERM)",
                kSecondNs, kStopDurationS);
  AddTimeOption(cmd, "--stats", stats_s,
                "Time between statistics lines, up to 1000000s: a time (1s, 250ms) or a bare "
                "number of seconds (0: only the final summary)",
                kSecondNs, kStatsEveryS);
}

// Parsing refused these as typed already (AddStopOptions); arguments filled in code are
// checked here. NaN fails every comparison, so it is refused too.
Status CheckStopOptions(double duration_s, double stats_s) {
  for (const auto& [name, value, range] : {std::tuple{"--duration", duration_s, kStopDurationS},
                                           std::tuple{"--stats", stats_s, kStatsEveryS}})
    if (!range.Holds(value))
      return MakeError(ERANGE,
                       OutOfRange(name, fmt::format("{}", value), range, TimeUnitWord(kSecondNs)));
  return {};
}

// `extra_bytes`: memory a port takes for itself besides the pool (a verbs port's receive buffers).
Result<Forwarding> StartForwarding(uint64_t frames, unsigned mtu, EalMemory memory,
                                   const EalUserArgs& eal_args, int* status, uint64_t extra_bytes) {
  const unsigned pool_size = static_cast<unsigned>(std::min<uint64_t>(frames + 4096, 1u << 22));
  const unsigned pool_mtu = ethdev::ForwardingPoolMtu(mtu);  // af_packet: whole ring frames
  auto eal_plan = PlanEal(PoolBytes(pool_size, pool_mtu) + extra_bytes, eal_args, memory);
  *status = kExitBadInput;
  if (!eal_plan) return eal_plan.error();
  // main() took the signals over already; this keeps a caller that did not (a test) as safe.
  // A signal from here on stops the loop below before it starts: EAL is torn down cleanly.
  CatchStopSignals();
  auto eal = Eal::Start(*eal_plan);
  if (!eal) return eal.error();
  auto pool = CreatePacketPool("txbatch_fwd", pool_size, pool_mtu);
  *status = kExitInternal;
  if (!pool) return pool.error();
  return Forwarding{std::move(*eal), std::move(*pool), std::move(*eal_plan)};
}

}  // namespace txbatch::port_cmd
