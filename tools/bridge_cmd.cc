#include "tools/bridge_cmd.h"

#include <fmt/format.h>
#include <rte_ethdev.h>
#include <rte_mempool.h>
#include <sys/prctl.h>

#include <algorithm>
#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <tuple>

#include "dataplane/bridge.h"
#include "dataplane/eal.h"
#include "dataplane/link_spec.h"
#include "dataplane/mempool.h"
#include "dataplane/responder.h"
#include "dataplane/rx_sink.h"
#include "dataplane/telemetry.h"
#include "drivers/ethdev/ethdev.h"
#include "drivers/ethdev/ring_size.h"
#include "drivers/verbs/verbs.h"
#include "engine/cell.h"
#include "tools/capture_cmd.h"
#include "tools/command_outputs.h"
#include "tools/interval_output.h"
#include "tools/port_cmd.h"
#include "tools/reporter.h"
#include "tools/session.h"
#include "tools/stats_stream.h"

namespace txbatch {

using namespace port_cmd;  // NOLINT: the port commands' shared parts

namespace {

// One line per direction since the last: frames, drops, batching and time through the bridge.
void PrintInterval(double t, const BridgeDirection& d, const DirectionCounts& now,
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
  const std::string qdisc = cell.shape.noqueue    ? "qdisc none"
                            : cell.shape.fq_codel ? "fq_codel " + DescribeFqCodel(*cell.shape.fq_codel)
                                                  : QdiscName(cell.shape);
  return fmt::format("{} ({} {} runner, txqueuelen {}), MTU {}", qdisc,
                     cell.shape.nolock ? "nolock" : "rootlock",
                     cell.shape.dedicated ? "dedicated" : "inline", cell.txqueuelen, cell.mtu);
}

void PrintSummary(BridgeDirection& d, const DirectionCounts& c, const LatencyHistogram& lat) {
  const auto s = lat.Summary();
  fmt::print(
      "{}: received {} ({} bytes), sent {}, dropped {} (before the PMD {}, qdisc full {}, "
      "by the qdisc after queueing {}, noqueue {}, lost on the link {}, link limit {}, oversize "
      "{}), duplicated {}, corrupted "
      "{}; avg batch {:.2f}, xmit calls per frame {:.3f}; time through the bridge p50 {} p99 {} "
      "max {}\n",
      d.name(), c.rx, c.rx_bytes, c.sent, c.dropped(), c.rx_missed, c.qdisc_full,
      c.qdisc_dropped, c.noqueue,
      c.link_lost,
      c.link_limit, c.oversize, c.duplicated, c.corrupted,
      c.handovers ? static_cast<double>(c.handed) / c.handovers : 0.0,
      c.sent ? static_cast<double>(c.xmit_calls) / c.sent : 0.0, Lat(s, &LatencySummary::p50),
      Lat(s, &LatencySummary::p99), Lat(s, &LatencySummary::max));
  fmt::print(
      "{} books: arrived {} (received {} + dropped before the PMD {}) + duplicated {} = sent {} "
      "+ dropped {}{} + queued {} + in the link {} — {}\n",
      d.name(), c.arrived(), c.rx, c.rx_missed, c.duplicated, c.sent, c.dropped(),
      c.filtered ? fmt::format(" + not answered {}", c.filtered) : std::string(), c.queued,
      c.in_link, c.Balanced() ? "balanced" : "NOT BALANCED");
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
  AddStatsJsonOption(cmd, a.stats_json, "an interval event each --stats (per direction)");
  AddCaptureOption(cmd, a.capture);
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
  return 2ull * ethdev::kRingSize + QdiscHolds(cell) + kMaxBatch + 64 +
         (link ? link->limit : 0);
}

// A direction's counters by name, as telemetry and --stats-json give them.
std::array<std::pair<const char*, uint64_t>, 19> CounterList(const DirectionCounts& c) {
  return {{{"rx", c.rx},
           {"rx_bytes", c.rx_bytes},
           {"rx_missed", c.rx_missed},
           {"sent", c.sent},
           {"dropped", c.dropped()},
           {"link_lost", c.link_lost},
           {"link_limit", c.link_limit},
           {"qdisc_full", c.qdisc_full},
           {"qdisc_dropped", c.qdisc_dropped},
           {"noqueue", c.noqueue},
           {"oversize", c.oversize},
           {"duplicated", c.duplicated},
           {"corrupted", c.corrupted},
           {"filtered", c.filtered},
           {"queued", c.queued},
           {"in_link", c.in_link},
           {"handovers", c.handovers},
           {"handed", c.handed},
           {"xmit_calls", c.xmit_calls}}};
}

// /txbatch/stats of a forwarding command: each direction's counters, keyed by its name
// ("a>b" as a_b_rx, a_b_sent, ...).
void PublishDirections(const std::vector<BridgeDirection*>& dirs, double at_s, const char* state,
                       bool wait) {
  TelemetryDict d{{"state", std::string(state)}, {"at_s", fmt::format("{:.3f}", at_s)}};
  for (auto* dir : dirs) {
    std::string key = dir->name();
    for (char& ch : key)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    for (const auto& [name, v] : CounterList(dir->Counts())) d.emplace_back(key + "_" + name, v);
  }
  PublishTelemetryStats(std::move(d), wait);
}

// A direction in a --stats-json event: its counters so far, and with `before` what changed over
// the `interval_s` since (rates per second); `lat`: time through the bridge (the interval's, or
// the whole run's).
nlohmann::json DirectionJson(const BridgeDirection& d, const DirectionCounts& c,
                             const DirectionCounts* before, double interval_s,
                             const LatencyHistogram& lat) {
  nlohmann::json j = {{"name", d.name()}};
  for (const auto& [name, v] : CounterList(c)) j[name] = v;
  j["balanced"] = c.Balanced();
  if (before != nullptr) {
    const double per_s = interval_s > 0 ? 1 / interval_s : 0;
    const uint64_t sent = c.sent - before->sent, handovers = c.handovers - before->handovers;
    j["interval"] = {
        {"rx", c.rx - before->rx},
        {"sent", sent},
        {"dropped", c.dropped() - before->dropped()},
        {"rx_pps", (c.rx - before->rx) * per_s},
        {"tx_pps", sent * per_s},
        {"rx_bits_per_s", (c.rx_bytes - before->rx_bytes) * 8 * per_s},
        {"avg_batch", handovers ? static_cast<double>(c.handed - before->handed) / handovers : 0.0},
        {"xmit_calls_per_frame",
         sent ? static_cast<double>(c.xmit_calls - before->xmit_calls) / sent : 0.0}};
  }
  j["latency_ns"] = LatencyJson(lat.Summary());
  return j;
}

// The table's and the stream's interval outputs of the directions: each direction's totals, and
// its latency since the last interval written.
using DirectionsOutput =
    IntervalOutput<std::vector<DirectionCounts>, std::vector<LatencyHistogram>>;

// Sleeps while no direction has work: up to kIdleSleepNs, or until a link's next arrival.
void SleepIdle(const std::vector<BridgeDirection*>& dirs, Tsc now, double tsc_hz) {
  Tsc due = kNever;
  for (auto* d : dirs) due = std::min(due, d->NextArrival());
  double ns = kIdleSleepNs;
  if (due != kNever) ns = std::min(ns, due > now ? (due - now) * 1e9 / tsc_hz : 0.0);
  if (ns > 0) SleepNs(ns);
}

// After a stop: nothing more received; what the links and queues hold is sent within
// `longest_s` and kDrainS (said first on the table's reporter, so whoever stopped the bridge,
// `lab down`, knows how long to give it).
void Drain(const std::vector<BridgeDirection*>& dirs, double longest_s, double tsc_hz,
           DirectionsOutput& table) {
  const Tsc drain_end = Now() + static_cast<Tsc>((longest_s + kDrainS) * tsc_hz);
  // Said before the wait, so whoever stopped it (`lab down`) knows how long to give it.
  uint64_t held = 0;
  for (auto* d : dirs) {
    const DirectionCounts c = d->Counts();
    held += c.in_link + c.queued;
  }
  if (held > 0) {
    table.reporter().Post(
        [wait_s = longest_s + kDrainS, held] {
          fmt::print(
              "\nstopping: waiting up to {:.1f} s for the {} frames the links and queues hold\n",
              wait_s, held);
          std::fflush(stdout);
        },
        /*droppable=*/false);
  }
  const auto all_idle = [&] {
    return std::all_of(dirs.begin(), dirs.end(), [](BridgeDirection* d) { return d->Idle(); });
  };
  while (Now() < drain_end && !all_idle()) {
    const Tsc now = Now();
    unsigned moved = 0;
    for (auto* d : dirs) moved += d->Poll(now, /*receive=*/false);
    if (!moved) SleepIdle(dirs, now, tsc_hz);
  }
}

// Each direction's summary and books, and the stream's end event; frees what is left (the
// intervals the table and the stream did not write said last). Whether every book balanced.
bool Summarise(const std::vector<BridgeDirection*>& dirs, std::vector<LatencyHistogram>& total,
               double stopped_s, double stats_s, StatsStream& stream, uint64_t table_not_written,
               uint64_t intervals_not_written) {
  fmt::print("\nstopped after {:.1f} s\n", stopped_s);
  bool balanced = true;
  unsigned freed = 0;
  nlohmann::json last_event = {
      {"at_s", stopped_s},
      {"state", StopRequested() ? "stopped by a signal" : "duration reached"},
      {"directions", nlohmann::json::array()}};
  for (size_t i = 0; i < dirs.size(); ++i) {
    const DirectionCounts c = dirs[i]->Counts();
    total[i].Merge(dirs[i]->TakeLatency());
    PrintSummary(*dirs[i], c, total[i]);
    if (stream)
      last_event["directions"].push_back(DirectionJson(*dirs[i], c, nullptr, 0, total[i]));
    balanced &= c.Balanced();
    freed += dirs[i]->Purge();
  }
  last_event["balanced"] = balanced;
  last_event["freed_at_exit"] = freed;
  last_event["intervals_not_written"] = intervals_not_written;
  stream.Event("end", std::move(last_event));
  if (freed) fmt::print("{} frames still queued or in a link at exit were freed\n", freed);
  SayIntervalsNotWritten(table_not_written, intervals_not_written, stats_s);
  return balanced;
}

// Polls `dirs` until a signal or `duration_s`, a line per direction every `stats_s`; then drains
// (nothing more received; links deliver within `longest_s` and a second), stops them, prints
// each one's summary and books, frees what is left. Returns whether every book balanced.
bool Forward(std::vector<BridgeDirection*> dirs, double duration_s, double stats_s,
             double longest_s, double tsc_hz, StatsStream& stream) {
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  for (auto* d : dirs) d->Start();
  const Tsc start = Now();
  const Tsc end = duration_s > 0 ? start + static_cast<Tsc>(duration_s * tsc_hz) : kNever;
  const Tsc every = stats_s > 0 ? static_cast<Tsc>(stats_s * tsc_hz) : kNever;
  Tsc next_stats = every == kNever ? kNever : start + every;
  const Tsc publish_every = static_cast<Tsc>(kTelemetryPublishS * tsc_hz);
  Tsc next_publish = start;
  std::vector<LatencyHistogram> total(dirs.size());
  // The table on stdout and the --stats-json stream, each written by a reporter of its own: a
  // reader that stalls one holds up neither the ports nor the other.
  // (Each direction's totals, and its latency since the last interval written.) Only the
  // directions' names are read on the reporters' threads, which never change.
  using Output = DirectionsOutput;
  const std::vector<DirectionCounts> zero(dirs.size());
  const std::vector<LatencyHistogram> none(dirs.size());
  Output table(
      [&dirs](const Output::Interval& t) {
        for (size_t i = 0; i < dirs.size(); ++i)
          PrintInterval(t.at_s, *dirs[i], t.now[i], t.before[i], t.unwritten[i]);
        std::fflush(stdout);
      },
      zero, none);
  Output events(
      [&dirs, &stream](const Output::Interval& t) {
        nlohmann::json event = {{"at_s", t.at_s}, {"directions", nlohmann::json::array()}};
        for (size_t i = 0; i < dirs.size(); ++i)
          event["directions"].push_back(
              DirectionJson(*dirs[i], t.now[i], &t.before[i], t.at_s - t.from_s, t.unwritten[i]));
        event["interval_s"] = t.at_s - t.from_s;
        stream.Event("interval", std::move(event));
      },
      zero, none);
  std::vector<Output*> outputs = {&table};
  if (stream) outputs.push_back(&events);
  // Each interval's counts and latency, taken here and handed to each output (not `droppable`:
  // the last, to those whose latest intervals were not written).
  const auto take = [&](Tsc now, bool droppable) {
    std::vector<DirectionCounts> counts;
    for (size_t i = 0; i < dirs.size(); ++i) {
      const LatencyHistogram lat = dirs[i]->TakeLatency();
      total[i].Merge(lat);
      for (Output* o : outputs) o->unwritten()[i].Merge(lat);
      counts.push_back(dirs[i]->Counts());
    }
    const double at_s = static_cast<double>(now - start) / tsc_hz;
    for (Output* o : outputs)
      if (droppable || o->behind()) o->Post(at_s, counts, droppable);
  };
  unsigned idle = 0;
  while (!StopRequested()) {
    const Tsc now = Now();
    if (now >= end) break;
    unsigned moved = 0;
    for (auto* d : dirs) moved += d->Poll(now);
    if (now >= next_publish) {
      PublishDirections(dirs, static_cast<double>(now - start) / tsc_hz, "running",
                        /*wait=*/false);
      next_publish = now + publish_every;
    }
    if (now >= next_stats) {
      take(now, /*droppable=*/true);
      // Past ticks a stall skipped are not caught up (each would be an interval of microseconds).
      while (next_stats <= now) next_stats += every;
    }
    idle = moved ? 0 : idle + 1;
    if (idle > kSpinPolls) SleepIdle(dirs, now, tsc_hz);
  }
  // An output whose last intervals were not written gets one more, from its last to the stop,
  // so what it wrote still adds up to the totals.
  if (std::any_of(outputs.begin(), outputs.end(), [](Output* o) { return o->behind(); }))
    take(Now(), /*droppable=*/false);
  Drain(dirs, longest_s, tsc_hz, table);
  for (auto* d : dirs) d->Stop();
  const double stopped_s = static_cast<double>(Now() - start) / tsc_hz;
  PublishDirections(dirs, stopped_s, "stopped", /*wait=*/true);
  for (Output* o : outputs) o->reporter().Finish();  // written before the summary
  return Summarise(dirs, total, stopped_s, stats_s, stream, table.reporter().dropped(),
                   events.reporter().dropped());
}

// What the port itself counted: frames it missed (its RX ring full) are in the books above as
// dropped before the PMD, beside those an af_packet socket's kernel ring dropped, which this
// line's `missed` leaves out (22.11's PMD never reads them); no mbuf or bad frames never reach
// the books; frames it failed to send are in `sent` (it took them).
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

int BridgeCommand(BridgeArgs a, const EalUserArgs& eal_args) {
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
  auto outputs =
      OpenOutputs({.stats_json = a.stats_json, .capture = a.capture, .capture_mtu = cell->mtu});
  if (!outputs) return Fail(kExitBadInput, outputs.error());
  StatsStream& stream = outputs->stream;
  CaptureFile& capture_file = outputs->capture;

  int status = kExitOk;
  auto fwd = StartForwarding(DirectionFrames(*cell, *link_ab) + DirectionFrames(*cell, *link_ba),
                             cell->mtu, memory, eal_args, &status, capture_file.pool_bytes());
  if (!fwd) return Fail(status, fwd.error());
  auto capture_pool = ReserveCapture(capture_file);
  if (!capture_pool) return Fail(kExitBadInput, capture_pool.error());
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
  auto capture = StartCapture(capture_file, *capture_pool);
  if (!capture) return Fail(kExitBadInput, capture.error());
  TxQueueConfig qcfg = QueueConfigFor(*cell, tsc_hz, fwd->eal->cpus());
  qcfg.time_handover = !a.no_timing;
  // TxLockInherits reasons about run's producers, each pinned to a CPU; the bridge's forwarders
  // are not: their TX locks inherit priority as before (not with --qdisc none).
  qcfg.tx_lock_inherits = !cell->shape.noqueue;
  bool balanced;
  {
    // Frames longer than the bridge's MTU or the out-port's are dropped, counted oversize.
    const unsigned mtu_a = std::min(cell->mtu, pa->mtu), mtu_b = std::min(cell->mtu, pb->mtu);
    BridgeDirection ab("a>b", *pa->rx, *pb->tx, cell->policy, qcfg,
                       link_ab->has_value() ? &**link_ab : nullptr, tsc_hz, mtu_b);
    BridgeDirection ba("b>a", *pb->rx, *pa->tx, cell->policy, qcfg,
                       link_ba->has_value() ? &**link_ba : nullptr, tsc_hz, mtu_a);
    const std::string about = fmt::format(
        "txbatch bridge: A = {} (MTU {}), B = {} (MTU {}); policy {}, {}\nlink a>b: "
        "{}; link b>a: {}",
        pa->tx->Describe(), mtu_a, pb->tx->Describe(), mtu_b, cell->policy.ToString(),
        ShapeText(*cell), link_ab->has_value() ? (*link_ab)->ToString() : "none",
        link_ba->has_value() ? (*link_ba)->ToString() : "none");
    PrintEalAndReady(about, fwd->plan, a.duration_s);
    StartEvent(stream, "bridge", about, a.duration_s, a.stats_s, fwd->plan);
    double longest_s = 0;
    for (const auto* l : {&*link_ab, &*link_ba})
      if (l->has_value()) longest_s = std::max(longest_s, LongestStayS(**l, a.queue.mtu));
    balanced = Forward({&ab, &ba}, a.duration_s, a.stats_s, longest_s, tsc_hz, stream);
  }
  const bool captured = FinishCapture(*capture, capture_file);
  PrintPortStats(*pa);
  PrintPortStats(*pb);
  pa->tx.reset();
  pb->tx.reset();
  const int done = stream.Finish(Finish(balanced, fwd->pool.get()));
  return done == kExitOk && !captured ? kExitBadInput : done;
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
  AddStatsJsonOption(cmd, a.stats_json, "an interval event each --stats");
  AddCaptureOption(cmd, a.capture);
}

int RespondCommand(RespondArgs a, const EalUserArgs& eal_args) {
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
  auto outputs =
      OpenOutputs({.stats_json = a.stats_json, .capture = a.capture, .capture_mtu = cell->mtu});
  if (!outputs) return Fail(kExitBadInput, outputs.error());
  StatsStream& stream = outputs->stream;
  CaptureFile& capture_file = outputs->capture;

  int status = kExitOk;
  auto fwd = StartForwarding(DirectionFrames(*cell, *link), cell->mtu, memory, eal_args, &status,
                             capture_file.pool_bytes());
  if (!fwd) return Fail(status, fwd.error());
  auto capture_pool = ReserveCapture(capture_file);
  if (!capture_pool) return Fail(kExitBadInput, capture_pool.error());
  const double tsc_hz = fwd->eal->tsc_hz();
  auto p = ethdev::OpenForwardingPort(*port, fwd->pool.get(), cell->mtu, tsc_hz);
  if (!p) return Fail(kExitBadInput, p.error());
  if (Status st = ethdev::AwaitLink(*p, 0, StopRequested); !st)
    return Fail(kExitBadInput, st.error());
  auto capture = StartCapture(capture_file, *capture_pool);
  if (!capture) return Fail(kExitBadInput, capture.error());
  rte_ether_addr mac{};
  (void)rte_eth_macaddr_get(p->id, &mac);
  bool balanced, captured;
  {
    ResponderFilter filter(mac, *ip, static_cast<uint16_t>(a.udp_echo));
    TxQueueConfig qcfg = QueueConfigFor(*cell, tsc_hz, fwd->eal->cpus());
    qcfg.time_handover = true;
    qcfg.tx_lock_inherits = !cell->shape.noqueue;  // as the bridge's: not run's producers
    BridgeDirection dir("replies", *p->rx, *p->tx, cell->policy, qcfg,
                        link->has_value() ? &**link : nullptr, tsc_hz, std::min(cell->mtu, p->mtu),
                        &filter);
    char mac_text[RTE_ETHER_ADDR_FMT_SIZE];
    rte_ether_format_addr(mac_text, sizeof mac_text, &mac);
    const std::string about = fmt::format(
        "txbatch respond: {} answers for {} at {} (ARP, ICMP echo{}); replies: policy {}, {}; "
        "link {}",
        p->tx->Describe(), a.ip, mac_text,
        a.udp_echo ? fmt::format(", UDP echo on port {}", a.udp_echo) : std::string(),
        cell->policy.ToString(), ShapeText(*cell),
        link->has_value() ? (*link)->ToString() : "none");
    PrintEalAndReady(about, fwd->plan, a.duration_s);
    StartEvent(stream, "respond", about, a.duration_s, a.stats_s, fwd->plan);
    balanced = Forward({&dir}, a.duration_s, a.stats_s,
                       link->has_value() ? LongestStayS(**link, a.queue.mtu) : 0, tsc_hz, stream);
    PrintPortStats(*p);
    const Responder& r = filter.responder();
    fmt::print(
        "answered: ARP {}, ICMP echo {}, UDP echo {}; not answered: malformed {}, not for "
        "us {}, nothing to answer {}\n",
        r.arp(), r.icmp(), r.udp(), filter.ignored(Ignored::kMalformed),
        filter.ignored(Ignored::kNotForUs), filter.ignored(Ignored::kUnanswered));
  }
  // After the replies' queue is gone (its txirq, which transmits, joined): nothing on the data
  // path can still hold the capture.
  captured = FinishCapture(*capture, capture_file);
  p->tx.reset();
  const int done = stream.Finish(Finish(balanced, fwd->pool.get()));
  return done == kExitOk && !captured ? kExitBadInput : done;
}

}  // namespace txbatch
