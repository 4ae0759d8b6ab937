#include "tools/bridge_cmd.h"

#include <fmt/format.h>
#include <rte_ethdev.h>
#include <rte_mempool.h>
#include <sys/prctl.h>

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <tuple>

#include "dataplane/bridge.h"
#include "dataplane/eal.h"
#include "dataplane/link_spec.h"
#include "dataplane/mempool.h"
#include "dataplane/responder.h"
#include "dataplane/rx_sink.h"
#include "drivers/ethdev/ethdev.h"
#include "drivers/ethdev/ring_size.h"
#include "drivers/verbs/verbs.h"
#include "engine/session.h"

namespace txbatch {
namespace {

// Empty polls in a row before the forwarding thread sleeps (then at most kIdleSleepNs at a time,
// or until the link's next arrival): a bridge at rest leaves the CPUs to the hosts around it.
constexpr unsigned kSpinPolls = 256;
constexpr double kIdleSleepNs = 20e3;
// How long the bridge and the sink wait for their ports' links (peers may start later).
constexpr double kPeerLinkWaitS = 60;
// How long the drain after a stop may take beyond the links' longest delay.
constexpr double kDrainS = 1.0;

std::string Lat(const std::optional<LatencySummary>& s, double LatencySummary::*field) {
  if (!s) return "-";
  const double ns = (*s).*field;
  return ns >= 1e6 ? fmt::format("{:.2f}ms", ns / 1e6) : fmt::format("{:.1f}us", ns / 1e3);
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
  auto o = ethdev::ParseEthdevSpec(text.starts_with("ethdev") ? text : "ethdev:" + text);
  if (!o) return MakeError(o.error().err, option + ": " + o.error().message);
  return *o;
}

// One line per direction since the last: frames, drops, batching and time through the bridge.
void PrintInterval(double t, BridgeDirection& d, const DirectionCounts& now,
                   const DirectionCounts& before, const LatencyHistogram& lat) {
  const uint64_t sent = now.sent - before.sent, calls = now.xmit_calls - before.xmit_calls;
  const uint64_t handovers = now.handovers - before.handovers;
  const auto s = lat.Summary();
  fmt::print(
      "{:7.1f}s {} rx {} tx {} drop {} avg batch {:.2f} calls/pkt {:.3f} bridge p50 {} p99 "
      "{}\n",
      t, d.name(), now.rx - before.rx, sent, now.dropped() - before.dropped(),
      handovers ? static_cast<double>(now.handed - before.handed) / handovers : 0.0,
      sent ? static_cast<double>(calls) / sent : 0.0, Lat(s, &LatencySummary::p50),
      Lat(s, &LatencySummary::p99));
}

std::string ShapeText(const CellConfig& cell) {
  const char* qdisc = cell.noqueue ? "qdisc none" : cell.pfifo ? "pfifo" : "pfifo_fast";
  return fmt::format("{} ({} {} runner, txqueuelen {}), MTU {}", qdisc,
                     cell.nolock ? "nolock" : "rootlock", cell.dedicated ? "dedicated" : "inline",
                     cell.txqueuelen, cell.mtu);
}

// The last lines before the loop starts: `lab up` and the tests wait for "forwarding" (the
// bridge, the responder) or "receiving" (the sink).
void PrintEalAndReady(const EalPlan& plan, double duration_s, const char* doing = "forwarding") {
  fmt::print("EAL {} ({}): {}\n", plan.mode, plan.why,
             fmt::join(plan.args.begin() + 1, plan.args.end(), " "));
  fmt::print("{}; SIGINT or SIGTERM stops it{}\n", doing,
             duration_s > 0 ? fmt::format(", or {:g} s", duration_s) : std::string());
  std::fflush(stdout);
}

void PrintSummary(BridgeDirection& d, const DirectionCounts& c, const LatencyHistogram& lat) {
  const auto s = lat.Summary();
  fmt::print(
      "{}: received {} ({} bytes), sent {}, dropped {} (qdisc full {}, noqueue {}, lost on "
      "the link {}, link limit {}, oversize {}), duplicated {}, corrupted {}; avg batch {:.2f}, "
      "xmit calls per frame {:.3f}; time through the bridge p50 {} p99 {} max {}\n",
      d.name(), c.rx, c.rx_bytes, c.sent, c.dropped(), c.qdisc_full, c.noqueue, c.link_lost,
      c.link_limit, c.oversize, c.duplicated, c.corrupted,
      c.handovers ? static_cast<double>(c.handed) / c.handovers : 0.0,
      c.sent ? static_cast<double>(c.xmit_calls) / c.sent : 0.0, Lat(s, &LatencySummary::p50),
      Lat(s, &LatencySummary::p99), Lat(s, &LatencySummary::max));
  fmt::print(
      "{} books: received {} + duplicated {} = sent {} + dropped {}{} + queued {} + in "
      "the link {} — {}\n",
      d.name(), c.rx, c.duplicated, c.sent, c.dropped(),
      c.filtered ? fmt::format(" + not answered {}", c.filtered) : std::string(), c.queued,
      c.in_link, c.Balanced() ? "balanced" : "NOT BALANCED");
}

// The longest --duration or --stats (~11.6 days): far beyond any run, and small enough that
// seconds times the TSC rate stay well inside a Tsc (inf, 1e400 or 1e10 s would overflow it).
inline constexpr double kMaxStopS = 1e6;

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
  AddDecimalOption(cmd, "--duration", duration_s,
                   "Stop after this many seconds, up to 1000000 (0: at SIGINT or SIGTERM)", 10);
  AddDecimalOption(cmd, "--stats", stats_s,
                   "Seconds between statistics lines, up to 1000000 (0: only the final summary)",
                   1);
}

// Both finite, 0 or up to kMaxStopS (NaN fails every comparison, so it is refused too).
Status CheckStopOptions(double duration_s, double stats_s) {
  for (const auto& [name, value, zero] :
       {std::tuple{"--duration", duration_s, "until SIGINT or SIGTERM"},
        std::tuple{"--stats", stats_s, "only the final summary"}})
    if (!(value >= 0 && value <= kMaxStopS))
      return MakeError(ERANGE, fmt::format("{} {:g} is out of range; valid: 0 ({}) or seconds up "
                                           "to {:.0f}",
                                           name, value, zero, kMaxStopS));
  return {};
}

}  // namespace

void AddBridgeOptions(CLI::App& cmd, BridgeArgs& a) {
  AddPortOption(cmd, "--port-a", a.port_a, "Port A",
                "net_af_packet0,iface=veth-a, net_tap0,iface=tap0, net_memif0,…");
  cmd.add_option("--port-b", a.port_b, "Port B, as --port-a")->required();
  cmd.add_option("--link", a.link,
                 "A link in netem's words (as txbatch run --link), the same both ways; each "
                 "direction draws its own fates")
      ->check(NonEmpty(kLinkNeedsWords));
  cmd.add_option("--link-ab", a.link_ab, "A link from A to B only (not with --link)")
      ->check(NonEmpty("--link-ab needs netem words (e.g. --link-ab \"delay 3ms\"); valid: "
                       "leave --link-ab out for no link"));
  cmd.add_option("--link-ba", a.link_ba, "A link from B to A only (not with --link)")
      ->check(NonEmpty("--link-ba needs netem words (e.g. --link-ba \"delay 3ms\"); valid: "
                       "leave --link-ba out for no link"));
  AddQueueOptions(cmd, a.queue, "32");
  AddStopOptions(cmd, a.duration_s, a.stats_s);
  cmd.add_flag("--no-timing", a.no_timing,
               "Do not stamp frames at RX or time them through the bridge (p50/p99 then read "
               "'-'): the forwarding as fast as it goes; doc/perf.md has what timing costs");
}

namespace {

// The TX path's options (--batch/--policy, --qdisc, …), validated as `run` validates them: one
// policy and one qdisc shape. `what` names the command in the sentence.
Result<CellConfig> QueuePlan(RunArgs q, std::string_view what, EalMemory* memory) {
  if (q.batch.empty() && q.policy.empty()) q.batch = "32";
  q.drivers = {"emu:null"};  // stands in for the ports, which are checked when opened
  q.size = "1000";
  q.procs = "1";
  auto plan = BuildRunPlan(q);
  if (!plan) return plan.error();
  if (plan->policies.size() != 1 || plan->shapes.size() != 1)
    return MakeError(EINVAL, fmt::format("{} runs one policy and one qdisc shape; valid: one "
                                         "value each for --batch/--policy, --qdisc, --sync and "
                                         "--runner",
                                         what));
  *memory = plan->eal_memory;
  return plan->cells.front();
}

// Mbufs one direction may hold: the RX ring, the TX ring, the qdisc, the link's limit, a burst
// or batch in hand.
uint64_t DirectionFrames(const CellConfig& cell, const std::optional<LinkSpec>& link) {
  return 2ull * ethdev::kRingSize + cell.txqueuelen + kMaxBatch + 64 + (link ? link->limit : 0);
}

// EAL (memory for `frames` mbufs) and the pool: the start of every forwarding command.
struct Forwarding {
  std::unique_ptr<Eal> eal;
  PoolPtr pool;  // freed before EAL (declared after it)
  EalPlan plan;
};

// `extra_bytes`: memory a port takes for itself besides the pool (a verbs port's receive buffers).
Result<Forwarding> StartForwarding(uint64_t frames, unsigned mtu, EalMemory memory,
                                   const std::vector<std::string>& eal_args, int* status,
                                   uint64_t extra_bytes = 0) {
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

// Polls `dirs` until a signal or `duration_s`, a line per direction every `stats_s`; then drains
// (nothing more received; links deliver within `longest_s` and a second), stops them, prints
// each one's summary and books, frees what is left. Returns whether every book balanced.
bool Forward(std::vector<BridgeDirection*> dirs, double duration_s, double stats_s,
             double longest_s, double tsc_hz) {
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  for (auto* d : dirs) d->Start();
  const Tsc start = Now();
  const Tsc end = duration_s > 0 ? start + static_cast<Tsc>(duration_s * tsc_hz) : kNever;
  const Tsc every = stats_s > 0 ? static_cast<Tsc>(stats_s * tsc_hz) : kNever;
  Tsc next_stats = every == kNever ? kNever : start + every;
  std::vector<DirectionCounts> last(dirs.size());
  std::vector<LatencyHistogram> total(dirs.size());
  const auto sleep_idle = [&](Tsc now) {
    Tsc due = kNever;
    for (auto* d : dirs) due = std::min(due, d->NextArrival());
    double ns = kIdleSleepNs;
    if (due != kNever) ns = std::min(ns, due > now ? (due - now) * 1e9 / tsc_hz : 0.0);
    if (ns > 0) SleepNs(ns);
  };
  unsigned idle = 0;
  while (!StopRequested()) {
    const Tsc now = Now();
    if (now >= end) break;
    unsigned moved = 0;
    for (auto* d : dirs) moved += d->Poll(now);
    if (now >= next_stats) {
      for (size_t i = 0; i < dirs.size(); ++i) {
        const DirectionCounts c = dirs[i]->Counts();
        const LatencyHistogram lat = dirs[i]->TakeLatency();
        PrintInterval(static_cast<double>(now - start) / tsc_hz, *dirs[i], c, last[i], lat);
        total[i].Merge(lat);
        last[i] = c;
      }
      std::fflush(stdout);
      next_stats += every;
    }
    idle = moved ? 0 : idle + 1;
    if (idle > kSpinPolls) sleep_idle(now);
  }
  const Tsc drain_end = Now() + static_cast<Tsc>((longest_s + kDrainS) * tsc_hz);
  // Said before the wait, so whoever stopped it (`lab down`) knows how long to give it.
  uint64_t held = 0;
  for (auto* d : dirs) {
    const DirectionCounts c = d->Counts();
    held += c.in_link + c.queued;
  }
  if (held > 0) {
    fmt::print("\nstopping: waiting up to {:.1f} s for the {} frames the links and queues hold\n",
               longest_s + kDrainS, held);
    std::fflush(stdout);
  }
  const auto all_idle = [&] {
    return std::all_of(dirs.begin(), dirs.end(), [](BridgeDirection* d) { return d->Idle(); });
  };
  while (Now() < drain_end && !all_idle()) {
    const Tsc now = Now();
    unsigned moved = 0;
    for (auto* d : dirs) moved += d->Poll(now, /*receive=*/false);
    if (!moved) sleep_idle(now);
  }
  for (auto* d : dirs) d->Stop();
  fmt::print("\nstopped after {:.1f} s\n", static_cast<double>(Now() - start) / tsc_hz);
  bool balanced = true;
  unsigned freed = 0;
  for (size_t i = 0; i < dirs.size(); ++i) {
    const DirectionCounts c = dirs[i]->Counts();
    total[i].Merge(dirs[i]->TakeLatency());
    PrintSummary(*dirs[i], c, total[i]);
    balanced &= c.Balanced();
    freed += dirs[i]->Purge();
  }
  if (freed) fmt::print("{} frames still queued or in a link at exit were freed\n", freed);
  return balanced;
}

// What the port itself counted: frames it could not take in (its RX ring full, no mbuf, bad)
// never reach the books above; frames it failed to send are in `sent` (it took them).
void PrintPortStats(const ethdev::ForwardingPort& p) {
  rte_eth_stats st{};
  if (rte_eth_stats_get(p.id, &st) != 0) return;
  fmt::print(
      "{} (the PMD's own counters): received {}, missed {}, RX errors {}, no mbuf {}; "
      "sent {}, TX errors {}\n",
      p.name, st.ipackets, st.imissed, st.ierrors, st.rx_nombuf, st.opackets, st.oerrors);
}

// The end of every forwarding command: the ports are closed (what their PMDs hold comes home)
// and the pool counted.
int Finish(bool balanced, rte_mempool* pool) {
  const unsigned in_use = rte_mempool_in_use_count(pool);
  fmt::print("mbufs in use at exit: {}\n", in_use);
  if (balanced && in_use == 0) return kExitOk;
  std::fprintf(stderr,
               "txbatch: the books do not balance or mbufs were not returned (see "
               "above): exit 3\n");
  return kExitUnbalanced;
}

}  // namespace

int BridgeCommand(BridgeArgs a, const std::vector<std::string>& eal_args) {
  EalMemory memory{};
  auto cell = QueuePlan(a.queue, "the bridge", &memory);
  if (!cell) return Fail(kExitBadInput, cell.error());
  if (!a.link.empty() && (!a.link_ab.empty() || !a.link_ba.empty()))
    return Fail(kExitBadInput,
                Error{EINVAL,
                      "--link sets both directions and --link-ab/--link-ba one each; "
                      "valid: --link alone, or --link-ab and/or --link-ba"});
  auto link_ab = ParseOneLink(a.link.empty() ? a.link_ab : a.link, a.queue.mtu);
  if (!link_ab) return Fail(kExitBadInput, link_ab.error());
  auto link_ba = ParseOneLink(a.link.empty() ? a.link_ba : a.link, a.queue.mtu);
  if (!link_ba) return Fail(kExitBadInput, link_ba.error());
  if (link_ba->has_value() && !a.link.empty()) {
    // The same words both ways, but not the same fates: B to A draws from the next seed.
    (*link_ba)->seed += 1;
  }
  if (Status st = CheckStopOptions(a.duration_s, a.stats_s); !st)
    return Fail(kExitBadInput, st.error());
  auto port_a = ParsePort("--port-a", a.port_a);
  if (!port_a) return Fail(kExitBadInput, port_a.error());
  auto port_b = ParsePort("--port-b", a.port_b);
  if (!port_b) return Fail(kExitBadInput, port_b.error());
  const auto device = [](const ethdev::EthdevOptions& o) {
    return o.port >= 0 ? o.ToString() : o.devargs.substr(0, o.devargs.find(','));
  };
  if (device(*port_a) == device(*port_b))
    return Fail(kExitBadInput,
                Error{EINVAL, fmt::format("--port-a and --port-b are the same port ({}), and a "
                                          "bridge forwards between two; valid: two different "
                                          "ports",
                                          device(*port_a))});

  int status = kExitOk;
  auto fwd = StartForwarding(DirectionFrames(*cell, *link_ab) + DirectionFrames(*cell, *link_ba),
                             cell->mtu, memory, eal_args, &status);
  if (!fwd) return Fail(status, fwd.error());
  const double tsc_hz = fwd->eal->tsc_hz();
  auto pa = ethdev::OpenForwardingPort(*port_a, fwd->pool.get(), cell->mtu, tsc_hz);
  if (!pa) return Fail(kExitBadInput, pa.error());
  auto pb = ethdev::OpenForwardingPort(*port_b, fwd->pool.get(), cell->mtu, tsc_hz);
  if (!pb) return Fail(kExitBadInput, pb.error());
  // Peers may connect after the bridge (memif clients, a cable being plugged): both ports are
  // there before the wait.
  fmt::print("waiting up to {:g} s for the links of {} and {}\n", kPeerLinkWaitS, pa->name,
             pb->name);
  std::fflush(stdout);
  for (const auto* p : {&*pa, &*pb})
    if (Status st = ethdev::AwaitLink(*p, kPeerLinkWaitS, StopRequested); !st)
      return Fail(kExitBadInput, st.error());
  TxQueueConfig qcfg = QueueConfigFor(*cell, tsc_hz, fwd->eal->cpus());
  qcfg.time_handover = !a.no_timing;
  bool balanced;
  {
    // Frames longer than the bridge's MTU or the out-port's are dropped, counted oversize.
    const unsigned mtu_a = std::min(cell->mtu, pa->mtu), mtu_b = std::min(cell->mtu, pb->mtu);
    BridgeDirection ab("a>b", *pa->rx, *pb->tx, cell->policy, qcfg,
                       link_ab->has_value() ? &**link_ab : nullptr, tsc_hz, mtu_b);
    BridgeDirection ba("b>a", *pb->rx, *pa->tx, cell->policy, qcfg,
                       link_ba->has_value() ? &**link_ba : nullptr, tsc_hz, mtu_a);
    fmt::print("txbatch bridge: A = {} (MTU {}), B = {} (MTU {}); policy {}, {}\n",
               pa->tx->Describe(), mtu_a, pb->tx->Describe(), mtu_b, cell->policy.ToString(),
               ShapeText(*cell));
    fmt::print("link a>b: {}; link b>a: {}\n",
               link_ab->has_value() ? (*link_ab)->ToString() : "none",
               link_ba->has_value() ? (*link_ba)->ToString() : "none");
    PrintEalAndReady(fwd->plan, a.duration_s);
    double longest_s = 0;
    for (const auto* l : {&*link_ab, &*link_ba})
      if (l->has_value()) longest_s = std::max(longest_s, LongestStayS(**l, a.queue.mtu));
    balanced = Forward({&ab, &ba}, a.duration_s, a.stats_s, longest_s, tsc_hz);
  }
  PrintPortStats(*pa);
  PrintPortStats(*pb);
  pa->tx.reset();
  pb->tx.reset();
  return Finish(balanced, fwd->pool.get());
}

namespace {

// The responder as a direction's filter: answered frames go on, the rest are counted by why.
class ResponderFilter final : public FrameFilter {
 public:
  ResponderFilter(rte_ether_addr mac, uint32_t ip, uint16_t udp_port)
      : responder_(mac, ip, udp_port) {}
  bool Keep(rte_mbuf* m) override {
    Ignored why{};
    if (responder_.Answer(m, &why)) return true;
    ++ignored_[static_cast<size_t>(why)];
    return false;
  }
  const Responder& responder() const { return responder_; }
  uint64_t ignored(Ignored why) const { return ignored_[static_cast<size_t>(why)]; }

 private:
  Responder responder_;
  std::array<uint64_t, kIgnoredReasons> ignored_{};
};

}  // namespace

void AddRespondOptions(CLI::App& cmd, RespondArgs& a) {
  AddPortOption(cmd, "--port", a.port, "The port",
                "net_af_packet0,iface=veth1, net_tap0,iface=tap0, …");
  cmd.add_option("--ip", a.ip, "The IPv4 address it answers for (ARP, ICMP echo)")->required();
  AddWholeNumberOption(cmd, "--udp-echo", a.udp_echo,
                       "Also echo UDP datagrams to this port (0: none)", 7u);
  cmd.add_option("--link", a.link,
                 "A link in netem's words the replies go through (as txbatch run --link)")
      ->check(NonEmpty(kLinkNeedsWords));
  AddQueueOptions(cmd, a.queue, "32");
  AddStopOptions(cmd, a.duration_s, a.stats_s);
}

int RespondCommand(RespondArgs a, const std::vector<std::string>& eal_args) {
  EalMemory memory{};
  auto cell = QueuePlan(a.queue, "the responder", &memory);
  if (!cell) return Fail(kExitBadInput, cell.error());
  auto ip = ParseIpv4(a.ip);
  if (!ip) return Fail(kExitBadInput, Error{EINVAL, "--ip " + ip.error().message});
  if (a.udp_echo > 65535)
    return Fail(kExitBadInput, Error{ERANGE, fmt::format("--udp-echo {} is out of range; valid: "
                                                         "0 (none) or 1..65535",
                                                         a.udp_echo)});
  auto link = ParseOneLink(a.link, a.queue.mtu);
  if (!link) return Fail(kExitBadInput, link.error());
  if (Status st = CheckStopOptions(a.duration_s, a.stats_s); !st)
    return Fail(kExitBadInput, st.error());
  auto port = ParsePort("--port", a.port);
  if (!port) return Fail(kExitBadInput, port.error());

  int status = kExitOk;
  auto fwd = StartForwarding(DirectionFrames(*cell, *link), cell->mtu, memory, eal_args, &status);
  if (!fwd) return Fail(status, fwd.error());
  const double tsc_hz = fwd->eal->tsc_hz();
  auto p = ethdev::OpenForwardingPort(*port, fwd->pool.get(), cell->mtu, tsc_hz);
  if (!p) return Fail(kExitBadInput, p.error());
  if (Status st = ethdev::AwaitLink(*p, 0, StopRequested); !st)
    return Fail(kExitBadInput, st.error());
  rte_ether_addr mac{};
  (void)rte_eth_macaddr_get(p->id, &mac);
  bool balanced;
  {
    ResponderFilter filter(mac, *ip, static_cast<uint16_t>(a.udp_echo));
    TxQueueConfig qcfg = QueueConfigFor(*cell, tsc_hz, fwd->eal->cpus());
    qcfg.time_handover = true;
    BridgeDirection dir("replies", *p->rx, *p->tx, cell->policy, qcfg,
                        link->has_value() ? &**link : nullptr, tsc_hz, std::min(cell->mtu, p->mtu),
                        &filter);
    char mac_text[RTE_ETHER_ADDR_FMT_SIZE];
    rte_ether_format_addr(mac_text, sizeof mac_text, &mac);
    fmt::print(
        "txbatch respond: {} answers for {} at {} (ARP, ICMP echo{}); replies: policy {}, "
        "{}; link {}\n",
        p->tx->Describe(), a.ip, mac_text,
        a.udp_echo ? fmt::format(", UDP echo on port {}", a.udp_echo) : std::string(),
        cell->policy.ToString(), ShapeText(*cell),
        link->has_value() ? (*link)->ToString() : "none");
    PrintEalAndReady(fwd->plan, a.duration_s);
    balanced = Forward({&dir}, a.duration_s, a.stats_s,
                       link->has_value() ? LongestStayS(**link, a.queue.mtu) : 0, tsc_hz);
    PrintPortStats(*p);
    const Responder& r = filter.responder();
    fmt::print(
        "answered: ARP {}, ICMP echo {}, UDP echo {}; not answered: malformed {}, not for "
        "us {}, nothing to answer {}\n",
        r.arp(), r.icmp(), r.udp(), filter.ignored(Ignored::kMalformed),
        filter.ignored(Ignored::kNotForUs), filter.ignored(Ignored::kUnanswered));
  }
  p->tx.reset();
  return Finish(balanced, fwd->pool.get());
}

void AddSinkOptions(CLI::App& cmd, SinkArgs& a) {
  AddPortOption(cmd, "--port", a.port, "The port",
                "net_memif0,role=client,socket=…, net_af_packet0,iface=eth1, …");
  AddWholeNumberOption(cmd, "--flows", a.flows,
                       "Flow ids to keep sequence state for: the sender's producers (1..1024)");
  cmd.add_option("--link", a.link,
                 "A link in netem's words frames cross before they are counted (its losses "
                 "show as sequence gaps)")
      ->check(NonEmpty(kLinkNeedsWords));
  cmd.add_flag("--clocks-synchronised", a.clocks_synchronised,
               "The sender's TSC and this one's agree (the same host, or PTP-disciplined): report "
               "one-way latency from each frame's TX stamp");
  cmd.add_option("--json", a.json, "Write the receive side's record to this file")
      ->check(NonEmpty(kJsonNeedsName));
  AddWholeNumberOption(cmd, "--mtu", a.mtu, "IP MTU of the port (68..9000)");
  AddOptionWithDefault(cmd, "--eal-memory", a.eal_memory, "EAL memory: auto, no-huge or in-memory");
  AddStopOptions(cmd, a.duration_s, a.stats_s);
}

nlohmann::json SinkRecord(const std::string& port, unsigned flows,
                          const std::optional<LinkSpec>& link, const SinkOutcome& o) {
  const SinkCounts& c = o.counts;
  const auto& latency = o.latency;
  return {{"schema_version", 1},
          {"kind", "sink"},
          {"port", port},
          {"flows", flows},
          {"link", link ? nlohmann::json(link->ToString()) : nlohmann::json(nullptr)},
          {"results",
           {{"received", c.received},
            {"lost", c.lost},
            {"duplicated", c.duplicated},
            {"reordered", c.reordered},
            {"foreign", c.foreign},
            {"link_lost", link ? nlohmann::json(o.link_lost) : nlohmann::json(nullptr)},
            {"active_s", o.active_s},
            {"mpps", o.active_s > 0 ? c.received / o.active_s / 1e6 : 0.0},
            {"payload_bytes", c.window_payload_bytes},
            {"latency_ns", latency ? nlohmann::json{{"p50", latency->p50},
                                                    {"p99", latency->p99},
                                                    {"max", latency->max},
                                                    {"count", latency->count}}
                                   : nlohmann::json(nullptr)}}}};
}

int SinkCommand(const SinkArgs& a, const std::vector<std::string>& eal_args) {
  if (a.flows < 1 || a.flows > 1024)
    return Fail(kExitBadInput, Error{ERANGE, fmt::format("--flows {} is out of range; valid: "
                                                         "1..1024",
                                                         a.flows)});
  if (a.mtu < kMinMtu || a.mtu > kMaxMtu)
    return Fail(kExitBadInput, Error{ERANGE, fmt::format("--mtu {} is out of range; valid: {}..{}",
                                                         a.mtu, kMinMtu, kMaxMtu)});
  auto memory = ParseEalMemory(a.eal_memory);
  if (!memory) return Fail(kExitBadInput, memory.error());
  auto link = ParseOneLink(a.link, a.mtu);
  if (!link) return Fail(kExitBadInput, link.error());
  if (Status st = CheckStopOptions(a.duration_s, a.stats_s); !st)
    return Fail(kExitBadInput, st.error());
  // The port: a DPDK port, or an InfiniBand queue pair (IPoIB datagrams, two-host runs).
  const bool over_verbs = a.port.starts_with("verbs:");
  std::optional<ethdev::EthdevOptions> port;
  std::optional<verbs::VerbsOptions> vport;
  if (over_verbs) {
    auto v = verbs::ParseVerbsSpec(a.port, /*peer_required=*/false);
    if (!v) return Fail(kExitBadInput, Error{v.error().err, "--port: " + v.error().message});
    if (!verbs::Available())
      return Fail(kExitBadInput, Error{ENOTSUP, fmt::format("--port {} cannot open: {}", a.port,
                                                            verbs::UnavailableReason())});
    vport = *v;
  } else {
    auto e = ParsePort("--port", a.port);
    if (!e) return Fail(kExitBadInput, e.error());
    port = *e;
  }
  auto json = PrepareOutput(a.json);
  if (!json) return Fail(kExitBadInput, json.error());

  int status = kExitOk;
  const uint64_t frames = 2ull * ethdev::kRingSize + 64 + (*link ? (*link)->limit : 0);
  // A verbs port's receive buffers, and what a link in front of the sink holds of them.
  const uint64_t receive_bytes =
      vport ? verbs::ReceivePoolBytes(*vport, *link ? (*link)->limit : 0) : 0;
  auto fwd = StartForwarding(frames, a.mtu, *memory, eal_args, &status, receive_bytes);
  if (!fwd) return Fail(status, fwd.error());
  const double tsc_hz = fwd->eal->tsc_hz();
  std::optional<ethdev::ForwardingPort> p;
  std::unique_ptr<verbs::VerbsReceiver> receiver;
  RxPort* in = nullptr;  // the receiver's, or the port's
  std::string describe, record_port;
  if (over_verbs) {
    // Connectionless: no link to wait for; senders name this QP (printed below).
    auto r = verbs::OpenVerbsReceiver(*vport, fwd->pool.get(), a.mtu, tsc_hz,
                                      *link ? (*link)->limit : 0);
    if (!r) return Fail(kExitBadInput, r.error());
    receiver = std::move(*r);
    describe = receiver->Describe();
    record_port = describe;  // the options alone lack the QP number senders name
    in = receiver.get();
  } else {
    // A sink waits for its sender: a memif peer, a cable being plugged.
    fmt::print("waiting up to {:g} s for the link of {}\n", kPeerLinkWaitS, port->ToString());
    std::fflush(stdout);
    auto e = ethdev::OpenForwardingPort(*port, fwd->pool.get(), a.mtu, tsc_hz);
    if (!e) return Fail(kExitBadInput, e.error());
    if (Status st = ethdev::AwaitLink(*e, kPeerLinkWaitS, StopRequested); !st)
      return Fail(kExitBadInput, st.error());
    p = std::move(*e);
    describe = p->tx->Describe();
    record_port = port->ToString();
    in = p->rx.get();
  }
  SinkCounts c;
  Tsc first = kNever, last = 0;
  std::optional<LatencySummary> latency;
  uint64_t link_lost = 0, link_in_flight = 0;
  {
    RunWindow window;
    window.start.store(0);  // every frame counts
    RxSink sink(window, tsc_hz, a.flows, *link ? uint64_t{4} * (*link)->limit : 0,
                /*verify_headers=*/true);
    std::optional<LinkModel> model;
    if (*link) model.emplace(**link, tsc_hz);
    fmt::print("txbatch sink: {} counts txbatch frames of flows 0..{}{}; link {}\n", describe,
               a.flows - 1, a.clocks_synchronised ? ", one-way latency from their TX stamps" : "",
               *link ? (*link)->ToString() : "none");
    PrintEalAndReady(fwd->plan, a.duration_s, "receiving");
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    const Tsc start = Now();
    const Tsc end = a.duration_s > 0 ? start + static_cast<Tsc>(a.duration_s * tsc_hz) : kNever;
    const Tsc every = a.stats_s > 0 ? static_cast<Tsc>(a.stats_s * tsc_hz) : kNever;
    Tsc next_stats = every == kNever ? kNever : start + every;
    uint64_t last_received = 0;
    unsigned idle = 0;
    std::array<rte_mbuf*, 32> rx;
    std::array<Tsc, 32> at;
    const auto receive = [&](std::span<rte_mbuf*> frames, std::span<Tsc> times) {
      if (frames.empty()) return;
      first = std::min(first, times.front());
      last = std::max(last, times.back());
      sink.Receive(frames, times);
    };
    while (!StopRequested()) {
      const Tsc now = Now();
      if (now >= end) break;
      const uint16_t k = in->Receive(rx);
      for (uint16_t i = 0; i < k; ++i) at[i] = now;
      unsigned moved = k;
      if (model) {
        for (uint16_t i = 0; i < k; ++i) model->Offer(rx[i], now);
        while (const unsigned n = model->Deliver(now, rx, at)) {
          receive({rx.data(), n}, {at.data(), n});
          moved += n;
        }
      } else {
        receive({rx.data(), k}, {at.data(), k});
      }
      if (now >= next_stats) {
        const SinkCounts s = sink.counts();
        fmt::print("{:7.1f}s received {} lost {} duplicated {} reordered {} foreign {}\n",
                   static_cast<double>(now - start) / tsc_hz, s.received - last_received, s.lost,
                   s.duplicated, s.reordered, s.foreign);
        std::fflush(stdout);
        last_received = s.received;
        next_stats += every;
      }
      idle = moved ? 0 : idle + 1;
      if (idle > kSpinPolls) SleepNs(kIdleSleepNs);
    }
    if (model) {
      // What the link still holds arrives (it was sent); then nothing is left in it.
      const Tsc drain_end =
          Now() + static_cast<Tsc>((LongestStayS(**link, a.mtu) + kDrainS) * tsc_hz);
      while (model->InFlight() > 0 && Now() < drain_end) {
        const unsigned n = model->Deliver(Now(), rx, at);
        receive({rx.data(), n}, {at.data(), n});
        if (n == 0) SleepNs(kIdleSleepNs);
      }
      link_in_flight = model->Purge();
      link_lost = model->counters().frames_lost.Get();
    }
    c = sink.counts();
    if (a.clocks_synchronised) latency = sink.latency().Summary();
  }
  p.reset();
  receiver.reset();
  const double active_s = last > first ? static_cast<double>(last - first) / tsc_hz : 0;
  fmt::print(
      "\nreceived {} txbatch frames ({:.4f} Mpps, {:.2f} MB/s of payload over the {:.3f} s "
      "from the first to the last); lost {} (sequence gaps; frames lost after a flow's "
      "last arrival show no gap), duplicated {}, reordered {}; foreign {} (not txbatch's, "
      "or failing their header checks)\n",
      c.received, active_s > 0 ? c.received / active_s / 1e6 : 0.0,
      active_s > 0 ? c.window_payload_bytes / active_s / 1e6 : 0.0, active_s, c.lost, c.duplicated,
      c.reordered, c.foreign);
  if (link_lost || link_in_flight)
    fmt::print(
        "the link lost {} frames (the gaps above include them); {} still in it at exit "
        "were freed\n",
        link_lost, link_in_flight);
  fmt::print("one-way latency: {}\n",
             !a.clocks_synchronised ? "not reported (the clocks were not stated synchronised: "
                                      "--clocks-synchronised; txbatch respond gives round trips)"
             : latency ? fmt::format("p50 {} p99 {} max {}", Lat(latency, &LatencySummary::p50),
                                     Lat(latency, &LatencySummary::p99),
                                     Lat(latency, &LatencySummary::max))
                       : std::string("none received"));
  if (*json) {
    const nlohmann::json doc =
        SinkRecord(record_port, a.flows, *link, SinkOutcome{c, link_lost, active_s, latency});
    if (Status s = (*json)->Write(doc.dump(2) + "\n"); !s) return Fail(kExitBadInput, s.error());
  }
  const unsigned in_use = rte_mempool_in_use_count(fwd->pool.get());
  fmt::print("mbufs in use at exit: {}\n", in_use);
  return in_use == 0 ? kExitOk : kExitUnbalanced;
}

}  // namespace txbatch
