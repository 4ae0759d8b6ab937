#include "tools/bridge_cmd.h"

#include <fmt/format.h>
#include <rte_mempool.h>
#include <sys/prctl.h>

#include <algorithm>
#include <array>
#include <memory>
#include <optional>

#include "dataplane/bridge.h"
#include "dataplane/eal.h"
#include "dataplane/link_spec.h"
#include "dataplane/mempool.h"
#include "drivers/ethdev/ethdev.h"
#include "drivers/ethdev/ring_size.h"
#include "tools/session.h"

namespace txbatch {
namespace {

// Empty polls in a row before the forwarding thread sleeps (then at most kIdleSleepNs at a time,
// or until the link's next arrival): a bridge at rest leaves the CPUs to the hosts around it.
constexpr unsigned kSpinPolls = 256;
constexpr double kIdleSleepNs = 20e3;
// How long the drain after a stop may take beyond the links' longest delay.
constexpr double kDrainS = 1.0;

std::string Lat(const std::optional<LatencySummary>& s, double LatencySummary::*field) {
  if (!s) return "-";
  const double ns = (*s).*field;
  return ns >= 1e6 ? fmt::format("{:.2f}ms", ns / 1e6) : fmt::format("{:.1f}us", ns / 1e3);
}

// About the longest a frame stays in `l`: the delay and four jitters (the tables' tails), and a
// full limit's worth of full-size frames behind the rate.
double LongestStayS(const LinkSpec& l) {
  double s = (l.delay_ns + 4 * l.jitter_ns) / 1e9;
  if (l.rate_bps > 0) s += l.limit * 1538.0 * 8 / l.rate_bps;
  return s;
}

Result<std::optional<LinkSpec>> ParseOneLink(const std::string& text) {
  if (text.empty()) return std::optional<LinkSpec>();
  auto l = ParseLinkSpec(text);
  if (!l) return l.error();
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
  fmt::print("{:7.1f}s {} rx {} tx {} drop {} avg batch {:.2f} calls/pkt {:.3f} bridge p50 {} p99 "
             "{}\n",
             t, d.name(), now.rx - before.rx, sent, now.dropped() - before.dropped(),
             handovers ? static_cast<double>(now.handed - before.handed) / handovers : 0.0,
             sent ? static_cast<double>(calls) / sent : 0.0, Lat(s, &LatencySummary::p50),
             Lat(s, &LatencySummary::p99));
}

void PrintSummary(BridgeDirection& d, const DirectionCounts& c, const LatencyHistogram& lat) {
  const auto s = lat.Summary();
  fmt::print("{}: received {} ({} bytes), sent {}, dropped {} (qdisc full {}, noqueue {}, lost on "
             "the link {}, link limit {}), duplicated {}, corrupted {}; avg batch {:.2f}, xmit "
             "calls per frame {:.3f}; time through the bridge p50 {} p99 {} max {}\n",
             d.name(), c.rx, c.rx_bytes, c.sent, c.dropped(), c.qdisc_full, c.noqueue, c.link_lost,
             c.link_limit, c.duplicated, c.corrupted,
             c.handovers ? static_cast<double>(c.handed) / c.handovers : 0.0,
             c.sent ? static_cast<double>(c.xmit_calls) / c.sent : 0.0,
             Lat(s, &LatencySummary::p50), Lat(s, &LatencySummary::p99),
             Lat(s, &LatencySummary::max));
  fmt::print("{} books: received {} + duplicated {} = sent {} + dropped {} + queued {} + in the "
             "link {} — {}\n",
             d.name(), c.rx, c.duplicated, c.sent, c.dropped(), c.queued, c.in_link,
             c.Balanced() ? "balanced" : "NOT BALANCED");
}

}  // namespace

void AddBridgeOptions(CLI::App& cmd, BridgeArgs& a) {
  cmd.add_option("--port-a", a.port_a,
                 "Port A: ethdev:DEVARGS or bare devargs (net_af_packet0,iface=veth-a, "
                 "net_tap0,iface=tap0, net_memif0,…) or ethdev:port=N")
      ->required();
  cmd.add_option("--port-b", a.port_b, "Port B, as --port-a")->required();
  cmd.add_option("--link", a.link,
                 "A link in netem's words (as txbatch run --link), the same both ways; each "
                 "direction draws its own fates");
  cmd.add_option("--link-ab", a.link_ab, "A link from A to B only (not with --link)");
  cmd.add_option("--link-ba", a.link_ba, "A link from B to A only (not with --link)");
  AddQueueOptions(cmd, a.queue, "32");
  cmd.add_option("--duration", a.duration_s,
                 "Stop after this many seconds (0: at SIGINT or SIGTERM)")
      ->capture_default_str();
  cmd.add_option("--stats", a.stats_s,
                 "Seconds between per-direction statistics lines (0: only the final summary)")
      ->capture_default_str();
}

int BridgeCommand(BridgeArgs a, const std::vector<std::string>& eal_args) {
  // The queue options, validated as `run` validates them: one policy and one qdisc shape.
  if (a.queue.batch.empty() && a.queue.policy.empty()) a.queue.batch = "32";
  a.queue.drivers = {"emu:null"};  // stands in for the ports, which are checked below
  a.queue.size = "1000";
  a.queue.procs = "1";
  auto plan = BuildRunPlan(a.queue);
  if (!plan) return Fail(kExitBadInput, plan.error());
  if (plan->policies.size() != 1 || plan->shapes.size() != 1)
    return Fail(kExitBadInput, Error{EINVAL, "the bridge runs one policy and one qdisc shape; "
                                             "valid: one value each for --batch/--policy, "
                                             "--qdisc, --sync and --runner"});
  const CellConfig& cell = plan->cells.front();
  if (!a.link.empty() && (!a.link_ab.empty() || !a.link_ba.empty()))
    return Fail(kExitBadInput,
                Error{EINVAL, "--link sets both directions and --link-ab/--link-ba one each; "
                              "valid: --link alone, or --link-ab and/or --link-ba"});
  auto link_ab = ParseOneLink(a.link.empty() ? a.link_ab : a.link);
  if (!link_ab) return Fail(kExitBadInput, link_ab.error());
  auto link_ba = ParseOneLink(a.link.empty() ? a.link_ba : a.link);
  if (!link_ba) return Fail(kExitBadInput, link_ba.error());
  if (link_ba->has_value() && !a.link.empty()) {
    // The same words both ways, but not the same fates: B to A draws from the next seed.
    (*link_ba)->seed += 1;
  }
  if (!(a.duration_s >= 0) || !(a.stats_s >= 0))
    return Fail(kExitBadInput, Error{ERANGE, "--duration and --stats are seconds >= 0"});
  auto port_a = ParsePort("--port-a", a.port_a);
  if (!port_a) return Fail(kExitBadInput, port_a.error());
  auto port_b = ParsePort("--port-b", a.port_b);
  if (!port_b) return Fail(kExitBadInput, port_b.error());

  // Mbufs: per direction the RX ring, the TX ring, the qdisc, the link's limit, a burst or batch
  // in hand; and the per-lcore caches.
  uint64_t frames = 4096;
  for (const auto* l : {&*link_ab, &*link_ba})
    frames += 2ull * ethdev::kRingSize + cell.txqueuelen + kMaxBatch + 64 +
              (l->has_value() ? (*l)->limit : 0);
  const unsigned pool_size = static_cast<unsigned>(std::min<uint64_t>(frames, 1u << 22));
  auto eal_plan = PlanEal(PoolBytes(pool_size, cell.mtu), eal_args, plan->eal_memory);
  if (!eal_plan) return Fail(kExitBadInput, eal_plan.error());
  auto eal = Eal::Start(*eal_plan);
  if (!eal) return Fail(kExitBadInput, eal.error());
  CatchStopSignals();
  const double tsc_hz = (*eal)->tsc_hz();
  int status = kExitOk;
  {
    auto pool = CreatePacketPool("txbatch_bridge", pool_size, cell.mtu);
    if (!pool) return Fail(kExitInternal, pool.error());
    auto pa = ethdev::OpenForwardingPort(*port_a, pool->get(), cell.mtu, tsc_hz);
    if (!pa) return Fail(kExitBadInput, pa.error());
    auto pb = ethdev::OpenForwardingPort(*port_b, pool->get(), cell.mtu, tsc_hz);
    if (!pb) return Fail(kExitBadInput, pb.error());

    TxQueueConfig qcfg;
    qcfg.txqueuelen = cell.txqueuelen;
    qcfg.irq_cpus = (*eal)->cpus();
    qcfg.noqueue = cell.noqueue;
    qcfg.dedicated = cell.dedicated;
    qcfg.nolock = cell.nolock;
    qcfg.pfifo = cell.pfifo;
    qcfg.bql = cell.bql;
    std::array<std::unique_ptr<BridgeDirection>, 2> dirs = {
        std::make_unique<BridgeDirection>("a>b", pa->id, *pb->tx, cell.policy, qcfg,
                                          link_ab->has_value() ? &**link_ab : nullptr, tsc_hz),
        std::make_unique<BridgeDirection>("b>a", pb->id, *pa->tx, cell.policy, qcfg,
                                          link_ba->has_value() ? &**link_ba : nullptr, tsc_hz)};
    const char* shape = cell.noqueue ? "qdisc none"
                        : cell.pfifo ? "pfifo"
                                     : "pfifo_fast";
    fmt::print("txbatch bridge: A = {}, B = {}; policy {}, {} ({} {} runner, txqueuelen {}), "
               "MTU {}\n",
               pa->tx->Describe(), pb->tx->Describe(), cell.policy.ToString(), shape,
               cell.nolock ? "nolock" : "rootlock", cell.dedicated ? "dedicated" : "inline",
               cell.txqueuelen, cell.mtu);
    fmt::print("link a>b: {}; link b>a: {}\n",
               link_ab->has_value() ? (*link_ab)->ToString() : "none",
               link_ba->has_value() ? (*link_ba)->ToString() : "none");
    fmt::print("EAL {} ({}): {}\n", eal_plan->mode, eal_plan->why,
               fmt::join(eal_plan->args.begin() + 1, eal_plan->args.end(), " "));
    fmt::print("forwarding; SIGINT or SIGTERM stops it{}\n",
               a.duration_s > 0 ? fmt::format(", or {:g} s", a.duration_s) : std::string());
    std::fflush(stdout);

    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    for (auto& d : dirs) d->Start();
    const Tsc start = Now();
    const Tsc end = a.duration_s > 0 ? start + static_cast<Tsc>(a.duration_s * tsc_hz) : kNever;
    const Tsc every = a.stats_s > 0 ? static_cast<Tsc>(a.stats_s * tsc_hz) : kNever;
    Tsc next_stats = every == kNever ? kNever : start + every;
    std::array<DirectionCounts, 2> last{};
    std::array<LatencyHistogram, 2> total;
    unsigned idle = 0;
    const auto next_arrival = [&] {
      return std::min(dirs[0]->NextArrival(), dirs[1]->NextArrival());
    };
    const auto sleep_idle = [&](Tsc now) {
      const Tsc due = next_arrival();
      double ns = kIdleSleepNs;
      if (due != kNever) ns = std::min(ns, due > now ? (due - now) * 1e9 / tsc_hz : 0.0);
      if (ns > 0) SleepNs(ns);
    };
    while (!StopRequested()) {
      const Tsc now = Now();
      if (now >= end) break;
      unsigned moved = 0;
      for (auto& d : dirs) moved += d->Poll(now);
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

    // Drain: nothing more is received; what the links hold arrives and the qdiscs empty out,
    // within the links' longest delay and a second.
    double longest_s = 0;
    for (const auto* l : {&*link_ab, &*link_ba})
      if (l->has_value()) longest_s = std::max(longest_s, LongestStayS(**l));
    const Tsc drain_end = Now() + static_cast<Tsc>((longest_s + kDrainS) * tsc_hz);
    while (Now() < drain_end && !(dirs[0]->Idle() && dirs[1]->Idle())) {
      const Tsc now = Now();
      unsigned moved = 0;
      for (auto& d : dirs) moved += d->Poll(now, /*receive=*/false);
      if (!moved) sleep_idle(now);
    }
    for (auto& d : dirs) d->Stop();
    fmt::print("\nstopped after {:.1f} s\n", static_cast<double>(Now() - start) / tsc_hz);
    bool balanced = true;
    for (size_t i = 0; i < dirs.size(); ++i) {
      const DirectionCounts c = dirs[i]->Counts();
      total[i].Merge(dirs[i]->TakeLatency());
      PrintSummary(*dirs[i], c, total[i]);
      balanced &= c.Balanced();
    }
    unsigned freed = 0;
    for (auto& d : dirs) freed += d->Purge();
    if (freed) fmt::print("{} frames still queued or in a link at exit were freed\n", freed);
    dirs = {};
    pa->tx.reset();  // stops and closes the ports: what their PMDs hold comes home
    pb->tx.reset();
    const unsigned in_use = rte_mempool_in_use_count(pool->get());
    fmt::print("mbufs in use at exit: {}\n", in_use);
    if (!balanced || in_use != 0) {
      std::fprintf(stderr, "txbatch: the bridge's books do not balance or mbufs were not "
                           "returned (see above): exit 3\n");
      status = kExitUnbalanced;
    }
  }
  return status;
}

}  // namespace txbatch
