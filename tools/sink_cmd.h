#pragma once
// `txbatch sink`: the receive end of a two-host run (dataplane/rx_sink.h on one port), counting
// txbatch frames per flow. Control plane.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/eal.h"
#include "dataplane/histogram.h"
#include "dataplane/link_spec.h"
#include "dataplane/rx_sink.h"

namespace txbatch {

struct SinkArgs {
  std::string port, link, json;
  std::string stats_json;  // --stats-json: NDJSON events (stats_stream.h)
  std::string capture;     // --capture: pcapng of what the port received (capture_cmd.h)
  // Flow ids (the sender's flows: --procs x --flows, and its probe) it keeps sequence state for;
  // a flow's window is made at its first frame, so the most costs nothing unused.
  unsigned flows = kMaxFlows;
  unsigned mtu = 1500;
  std::string eal_memory = "auto";
  bool clocks_synchronised = false;
  bool per_flow = false;  // --per-flow: a table of each flow's counts after the summary
  double duration_s = 0;
  double stats_s = 1;
};

void AddSinkOptions(CLI::App& cmd, SinkArgs& args);

// What a sink counted, for its record.
struct SinkOutcome {
  SinkCounts counts;
  uint64_t link_lost = 0;                 // with a --link: the frames it lost
  double active_s = 0;                    // from the first frame to the last
  std::optional<LatencySummary> latency;  // with --clocks-synchronised and frames received
  // Each flow that received, lost or repeated anything, by id: its counts and (with
  // --clocks-synchronised) its one-way latency.
  struct Flow {
    unsigned id = 0;
    FlowCounts counts;
    std::optional<LatencySummary> latency;
  };
  std::vector<Flow> flows;
  // Why `latency` is empty, in one sentence (SinkLatencyWhyNone); empty where it has a value.
  std::string latency_why;
};

// Why a sink has no one-way latency to report, in one sentence: the clocks were not stated
// synchronised, nothing arrived, or nothing that arrived carried a TX stamp (a --no-timing
// sender stamps none: from 0 the receiver's uptime read as latency). Where it has one: empty.
std::string SinkLatencyWhyNone(bool clocks_synchronised, const SinkCounts& counts);

// The record `sink --json` writes (doc/bridge.md): `port` is the port as the sink's header line
// names it — an ethdev's spec, or a verbs receiver's description with the QP senders name.
nlohmann::json SinkRecord(const std::string& port, unsigned flows,
                          const std::optional<LinkSpec>& link, const SinkOutcome& outcome);
int SinkCommand(const SinkArgs& args, const EalUserArgs& eal_args);

}  // namespace txbatch
