#include "tools/sink_cmd.h"

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

#include "base/json_text.h"
#include "dataplane/bridge.h"
#include "dataplane/eal.h"
#include "dataplane/link_spec.h"
#include "dataplane/mempool.h"
#include "dataplane/responder.h"
#include "dataplane/rx_sink.h"
#include "dataplane/sink_loop.h"
#include "dataplane/telemetry.h"
#include "drivers/ethdev/ring_size.h"
#include "drivers/factory.h"
#include "results/latency_text.h"
#include "tools/capture_cmd.h"
#include "tools/command_outputs.h"
#include "tools/interval_output.h"
#include "tools/port_cmd.h"
#include "tools/reporter.h"
#include "tools/run_options.h"
#include "tools/session.h"

namespace txbatch {

using namespace port_cmd;  // NOLINT: the port commands' shared parts

void AddSinkOptions(CLI::App& cmd, SinkArgs& a) {
  AddPortOption(cmd, "--port", a.port, "The port",
                "net_memif0,role=client,socket=…, net_af_packet0,iface=eth1, …");
  AddWholeNumberOption(cmd, "--flows", a.flows,
                       "Flow ids to keep sequence state for: the sender's flows (its --procs x "
                       "--flows, and its probe) (1..4096)");
  cmd.add_option("--link", a.link,
                 "A link in netem's words frames cross before they are counted (its losses "
                 "show as sequence gaps)")
      ->check(NonEmpty(kLinkNeedsWords));
  cmd.add_flag("--clocks-synchronised", a.clocks_synchronised,
               "The sender's TSC and this one's agree (the same host, or PTP-disciplined): report "
               "one-way latency from each frame's TX stamp");
  cmd.add_flag("--per-flow", a.per_flow,
               "Also print each flow's counts (and one-way latency) after the summary; the "
               "--json record has them always");
  cmd.add_option("--json", a.json, "Write the receive side's record to this file")
      ->check(NonEmpty(kJsonNeedsName));
  AddWholeNumberOption(cmd, "--mtu", a.mtu, "IP MTU of the port (68..9000)");
  AddOptionWithDefault(cmd, "--eal-memory", a.eal_memory, "EAL memory: auto, no-huge or in-memory");
  AddStopOptions(cmd, a.duration_s, a.stats_s);
  AddStatsJsonOption(cmd, a.stats_json, "an interval event each --stats");
  AddCaptureOption(cmd, a.capture);
}

namespace {

nlohmann::json PerFlowJson(const SinkOutcome& o) {
  nlohmann::json out = nlohmann::json::array();
  for (const SinkOutcome::Flow& f : o.flows)
    out.push_back({{"flow", f.id},
                   {"received", f.counts.received},
                   {"lost", f.counts.lost},
                   {"duplicated", f.counts.duplicated},
                   {"reordered", f.counts.reordered},
                   {"latency_ns", LatencyJson(f.latency)}});
  return out;
}

// --per-flow: a row a flow, latency in one unit a column (tc's words).
void PrintFlows(const SinkOutcome& o, bool latency) {
  std::vector<std::optional<double>> p50s, p99s;
  for (const auto& f : o.flows) {
    p50s.push_back(f.latency ? std::optional(f.latency->p50) : std::nullopt);
    p99s.push_back(f.latency ? std::optional(f.latency->p99) : std::nullopt);
  }
  const LatencyUnit u50 = ColumnUnit(p50s), u99 = ColumnUnit(p99s);
  fmt::print("\n{:>6} {:>12} {:>10} {:>10} {:>10}{}\n", "flow", "received", "lost", "duplicated",
             "reordered", latency ? fmt::format(" {:>10} {:>10}", "p50", "p99") : std::string());
  for (size_t i = 0; i < o.flows.size(); ++i) {
    const auto& f = o.flows[i];
    fmt::print("{:>6} {:>12} {:>10} {:>10} {:>10}{}\n", f.id, f.counts.received, f.counts.lost,
               f.counts.duplicated, f.counts.reordered,
               latency ? fmt::format(" {:>10} {:>10}", LatencyText(p50s[i], u50),
                                     LatencyText(p99s[i], u99))
                       : std::string());
  }
  if (o.flows.empty()) fmt::print("{:>6}\n", "none");
}

}  // namespace

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
            {"latency_ns", LatencyJson(latency)},
            {"latency_why", latency || o.latency_why.empty() ? nlohmann::json(nullptr)
                                                             : nlohmann::json(o.latency_why)},
            {"unstamped", c.unstamped},
            {"per_flow", PerFlowJson(o)}}}};
}

std::string SinkLatencyWhyNone(bool clocks_synchronised, const SinkCounts& c) {
  if (!clocks_synchronised)
    return "the clocks were not stated synchronised (--clocks-synchronised); txbatch respond "
           "gives round trips";
  if (c.window_frames == 0) return "no txbatch frame arrived";
  if (c.unstamped == c.window_frames)
    return fmt::format(
        "none of the {} frames carried a TX stamp (their sender ran with "
        "--no-timing, which stamps none), so there is nothing to measure it from",
        c.unstamped);
  return "";
}

namespace {

// The sink's options, checked before anything opens: the port of any driver with an RX half (a
// DPDK port, a verbs queue pair: IPoIB datagrams, two-host runs), and the link in front of the
// count.
struct SinkPlan {
  EalMemory memory{};
  std::optional<LinkSpec> link;
  std::optional<DriverSpec> port;
};

Result<SinkPlan> PlanSink(const SinkArgs& a) {
  if (a.flows < 1 || a.flows > kMaxFlows)
    return Error{ERANGE,
                 fmt::format("--flows {} is out of range; valid: 1..{}", a.flows, kMaxFlows)};
  if (a.mtu < kMinMtu || a.mtu > kMaxMtu)
    return Error{ERANGE,
                 fmt::format("--mtu {} is out of range; valid: {}..{}", a.mtu, kMinMtu, kMaxMtu)};
  SinkPlan plan;
  auto memory = ParseEalMemory(a.eal_memory);
  if (!memory) return memory.error();
  plan.memory = *memory;
  auto link = ParseOneLink(a.link, a.mtu);
  if (!link) return link.error();
  plan.link = *link;
  if (Status st = CheckStopOptions(a.duration_s, a.stats_s); !st) return st.error();
  auto port = ParseReceiverSpec("--port", a.port);
  if (!port) return port.error();
  if (!a.capture.empty() && !port->limits().captured)
    return Error{EINVAL, fmt::format("--capture records DPDK ports, and a {} port is none; valid: "
                                     "--capture with an ethdev port",
                                     port->kind())};
  plan.port = std::move(*port);
  return plan;
}

// The port the sink counts from, open (a DPDK port has waited for its link), with what it
// captures.
struct SinkPort {
  ReceivePort port;
  std::unique_ptr<Capture> capture;  // declared after the port: stopped before it closes
};

Result<SinkPort> OpenSinkPort(const SinkArgs& a, const SinkPlan& plan, const Forwarding& fwd,
                              CaptureFile& capture_file, CaptureReserve& capture_pool) {
  // A sink waits for its sender (a memif peer, a cable being plugged); a verbs queue pair is
  // connectionless: senders name it (printed with the port).
  const ReceiveContext context{
      .pool = fwd.pool.get(),
      .mtu = a.mtu,
      .tsc_hz = fwd.eal->tsc_hz(),
      .held = plan.link ? plan.link->limit : 0,
      .link_wait_s = kPeerLinkWaitS,
      .before_wait =
          [](const std::string& port) {
            fmt::print("waiting up to {:g} s for the link of {}\n", kPeerLinkWaitS, port);
            std::fflush(stdout);
          },
      .give_up = StopRequested};
  auto port = OpenReceiver(*plan.port, context);
  if (!port) return port.error();
  SinkPort out;
  out.port = std::move(*port);
  if (plan.port->limits().captured) {
    auto c = StartCapture(capture_file, capture_pool);
    if (!c) return c.error();
    out.capture = std::move(*c);
  }
  return out;
}

// What the counting loop saw, and the intervals its outputs could not write.
struct SinkReceived {
  SinkOutcome outcome;
  uint64_t link_in_flight = 0;
  uint64_t table_not_written = 0, intervals_not_written = 0;
};

// Counts frames from `port` through the link model until --duration or a signal, printing and
// streaming an interval each --stats and publishing the counts on telemetry; then drains the link.
SinkReceived Receive(const SinkArgs& a, const SinkPlan& plan, const SinkPort& port,
                     const Forwarding& fwd, StatsStream& stream) {
  const double tsc_hz = fwd.eal->tsc_hz();
  const std::optional<LinkSpec>& link = plan.link;
  SinkReceived out;
  RunWindow window;
  window.start.store(0);  // every frame counts
  RxSink sink(window, tsc_hz, a.flows, link ? uint64_t{4} * link->limit : 0,
              /*verify_headers=*/true, /*timing=*/true,
              /*flow_latency=*/a.clocks_synchronised);
  std::optional<LinkModel> model;
  if (link) model.emplace(*link, tsc_hz);
  const std::string about = fmt::format(
      "txbatch sink: {} counts txbatch frames of flows 0..{}{}; link {}", port.port.describe,
      a.flows - 1, a.clocks_synchronised ? ", one-way latency from their TX stamps" : "",
      link ? link->ToString() : "none");
  PrintEalAndReady(about, fwd.plan, a.duration_s, "receiving");
  StartEvent(stream, "sink", about, a.duration_s, a.stats_s, fwd.plan);
  prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
  // The table on stdout and the --stats-json stream, each written by a reporter of its own
  // (a reader that stalls one holds up neither the port nor the other), and where each one's
  // last interval written ended: one it had no room for is written with the next it takes.
  using Output = IntervalOutput<SinkCounts>;
  Output table([](const Output::Interval& t) {
    const SinkCounts& s = t.now;
    fmt::print("{:7.1f}s received {} lost {} duplicated {} reordered {} foreign {}\n", t.at_s,
               s.received - t.before.received, s.lost, s.duplicated, s.reordered, s.foreign);
    std::fflush(stdout);
  });
  Output events([stream = &stream](const Output::Interval& t) {
    const SinkCounts& s = t.now;
    const double interval_s = t.at_s - t.from_s;
    const uint64_t received = s.received - t.before.received;
    stream->Event("interval", {{"at_s", t.at_s},
                               {"interval_s", interval_s},
                               {"received", received},
                               {"pps", interval_s > 0 ? received / interval_s : 0.0},
                               {"received_total", s.received},
                               {"lost", s.lost},
                               {"duplicated", s.duplicated},
                               {"reordered", s.reordered},
                               {"foreign", s.foreign},
                               {"payload_bytes", s.window_payload_bytes}});
  });
  std::vector<Output*> outputs = {&table};
  if (stream) outputs.push_back(&events);
  const Tsc start = Now();
  const Tsc end = a.duration_s > 0 ? start + static_cast<Tsc>(a.duration_s * tsc_hz) : kNever;
  const Tsc every = a.stats_s > 0 ? static_cast<Tsc>(a.stats_s * tsc_hz) : kNever;
  Tsc next_stats = every == kNever ? kNever : start + every;
  const Tsc publish_every = static_cast<Tsc>(kTelemetryPublishS * tsc_hz);
  Tsc next_publish = start;
  // /txbatch/stats: the sink's counts so far.
  const auto publish = [&](Tsc now, const char* state, bool wait) {
    const SinkCounts c = sink.counts();
    PublishTelemetryStats(
        {{"state", std::string(state)},
         {"at_s", fmt::format("{:.3f}", static_cast<double>(now - start) / tsc_hz)},
         {"received", c.received},
         {"lost", c.lost},
         {"duplicated", c.duplicated},
         {"reordered", c.reordered},
         {"foreign", c.foreign},
         {"payload_bytes", c.window_payload_bytes}},
        wait);
  };
  // The interval up to `now`, handed to each output (not `droppable`: the last, to those whose
  // latest intervals were not written).
  const auto take = [&](Tsc now, bool droppable) {
    const SinkCounts s = sink.counts();
    const double at_s = static_cast<double>(now - start) / tsc_hz;
    for (Output* o : outputs)
      if (droppable || o->behind()) o->Post(at_s, s, droppable);
  };
  SinkLoop loop(*port.port.rx, sink, model ? &*model : nullptr, kSpinPolls, kIdleSleepNs);
  loop.Run(end, StopRequested, [&](Tsc now) {
    if (now >= next_publish) {
      publish(now, "running", /*wait=*/false);
      next_publish = now + publish_every;
    }
    if (now >= next_stats) {
      take(now, /*droppable=*/true);
      // Past ticks a stall skipped are not caught up (each would be an interval of
      // microseconds).
      while (next_stats <= now) next_stats += every;
    }
  });
  if (model)
    loop.DrainLink(Now() + static_cast<Tsc>((LongestStayS(*link, a.mtu) + kDrainS) * tsc_hz));
  // An output whose last intervals were not written gets one more, up to the stop.
  if (std::any_of(outputs.begin(), outputs.end(), [](Output* o) { return o->behind(); }))
    take(Now(), /*droppable=*/false);
  for (Output* o : outputs) o->reporter().Finish();  // written before the summary
  out.table_not_written = table.reporter().dropped();
  out.intervals_not_written = events.reporter().dropped();
  publish(Now(), "stopped", /*wait=*/true);
  SinkOutcome& o = out.outcome;
  o.counts = sink.counts();
  o.link_lost = loop.link_lost();
  out.link_in_flight = loop.link_in_flight();
  const Tsc first = loop.first(), last = loop.last();
  o.active_s = last > first ? static_cast<double>(last - first) / tsc_hz : 0;
  if (a.clocks_synchronised) o.latency = sink.latency().Summary();
  const std::vector<FlowCounts> per_flow = sink.flow_counts();
  for (unsigned f = 0; f < per_flow.size(); ++f) {
    const FlowCounts& fc = per_flow[f];
    if (fc.received + fc.lost + fc.duplicated > 0)
      o.flows.push_back({f, fc, sink.flow_latency(f)});
  }
  o.latency_why = o.latency ? "" : SinkLatencyWhyNone(a.clocks_synchronised, o.counts);
  return out;
}

// The summary after the count: the totals, what the link lost and still held, the latency.
void PrintSinkSummary(const SinkReceived& r) {
  const SinkOutcome& o = r.outcome;
  const SinkCounts& c = o.counts;
  fmt::print(
      "\nreceived {} txbatch frames ({:.4f} Mpps, {:.2f} MB/s of payload over the {:.3f} s "
      "from the first to the last); lost {} (sequence gaps; frames lost after a flow's "
      "last arrival show no gap), duplicated {}, reordered {}; foreign {} (not txbatch's, "
      "failing their header checks, or a sequence over 2^32 ahead of its flow's)\n",
      c.received, o.active_s > 0 ? c.received / o.active_s / 1e6 : 0.0,
      o.active_s > 0 ? c.window_payload_bytes / o.active_s / 1e6 : 0.0, o.active_s, c.lost,
      c.duplicated, c.reordered, c.foreign);
  if (o.link_lost || r.link_in_flight)
    fmt::print(
        "the link lost {} frames (the gaps above include them); {} still in it at exit "
        "were freed\n",
        o.link_lost, r.link_in_flight);
  const std::optional<LatencySummary>& latency = o.latency;
  fmt::print(
      "one-way latency: {}{}\n",
      latency ? fmt::format("p50 {} p99 {} max {}", Lat(latency, &LatencySummary::p50),
                            Lat(latency, &LatencySummary::p99), Lat(latency, &LatencySummary::max))
              : "not reported: " + o.latency_why,
      latency && c.unstamped > 0
          ? fmt::format(" ({} frames without a TX stamp, from a --no-timing sender or "
                        "out of a --latency-sample sender's sample, left out)",
                        c.unstamped)
          : std::string());
}

}  // namespace

int SinkCommand(const SinkArgs& a, const EalUserArgs& eal_args) {
  auto plan = PlanSink(a);
  if (!plan) return Fail(kExitBadInput, plan.error());
  auto outputs = OpenOutputs(
      {.json = a.json, .stats_json = a.stats_json, .capture = a.capture, .capture_mtu = a.mtu});
  if (!outputs) return Fail(kExitBadInput, outputs.error());
  StatsStream& stream = outputs->stream;
  CaptureFile& capture_file = outputs->capture;

  int status = kExitOk;
  const uint64_t held = plan->link ? plan->link->limit : 0;
  const uint64_t frames = 2ull * ethdev::kRingSize + 64 + held;
  // A verbs port's receive buffers, and what a link in front of the sink holds of them.
  const uint64_t receive_bytes = plan->port->receiver_pool_bytes(static_cast<unsigned>(held));
  auto fwd = StartForwarding(frames, a.mtu, plan->memory, eal_args, &status,
                             receive_bytes + capture_file.pool_bytes());
  if (!fwd) return Fail(status, fwd.error());
  auto capture_pool = ReserveCapture(capture_file);
  if (!capture_pool) return Fail(kExitBadInput, capture_pool.error());
  auto port = OpenSinkPort(a, *plan, *fwd, capture_file, *capture_pool);
  if (!port) return Fail(kExitBadInput, port.error());
  SinkReceived received = Receive(a, *plan, *port, *fwd, stream);
  const bool captured = FinishCapture(port->capture, capture_file);
  port->port.rx.reset();  // the RX half before the TX half that closes its port
  port->port.owner.reset();
  PrintSinkSummary(received);
  const SinkOutcome& outcome = received.outcome;
  if (a.per_flow) PrintFlows(outcome, a.clocks_synchronised);
  const nlohmann::json doc = SinkRecord(port->port.record, a.flows, plan->link, outcome);
  const unsigned in_use = rte_mempool_in_use_count(fwd->pool.get());
  if (stream) {
    nlohmann::json end = doc;
    end["state"] = StopRequested() ? "stopped by a signal" : "duration reached";
    end["mbufs_in_use_at_exit"] = in_use;
    end["intervals_not_written"] = received.intervals_not_written;
    stream.Event("end", std::move(end));
  }
  if (const std::optional<OutputFile>& json = outputs->json) {
    if (Status s = json->Write(DumpDocument(doc)); !s) return Fail(kExitBadInput, s.error());
  }
  SayIntervalsNotWritten(received.table_not_written, received.intervals_not_written, a.stats_s);
  fmt::print("mbufs in use at exit: {}\n", in_use);
  const int done = stream.Finish(in_use == 0 ? kExitOk : kExitUnbalanced);
  return done == kExitOk && !captured ? kExitBadInput : done;
}

}  // namespace txbatch
