#pragma once
// The forwarding commands. `txbatch bridge`: two DPDK ports, forwarding both ways through the
// link model, a qdisc and the batched TX path (dataplane/bridge.h). `txbatch respond`: one port
// answering ARP, ICMP echo and UDP echo (dataplane/responder.h) through the same path. Both run
// until SIGINT/SIGTERM or --duration, then print their books. Control plane. (`txbatch sink`:
// sink_cmd.h.)

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "dataplane/histogram.h"
#include "dataplane/link_spec.h"
#include "tools/run_options.h"

namespace txbatch {

struct BridgeArgs {
  std::string port_a, port_b;
  std::string link, link_ab, link_ba;  // netem words: both ways, or one way
  RunArgs queue;  // --batch/--policy, --qdisc, --sync, --runner, --txqueuelen, --bql-*, --mtu
  double duration_s = 0;   // 0: until a signal
  double stats_s = 1;      // a line per direction this often; 0: only the summary
  bool no_timing = false;  // no RX stamp, no time through the bridge (the fastest forwarding)
  std::string stats_json;  // --stats-json: NDJSON events (stats_stream.h)
  std::string capture;     // --capture: pcapng of both ports (capture_cmd.h)
};

void AddBridgeOptions(CLI::App& cmd, BridgeArgs& args);

struct RespondArgs {
  std::string port, ip, link;
  unsigned udp_echo = 0;  // 0: no UDP echo
  RunArgs queue;
  double duration_s = 0;
  double stats_s = 1;
  std::string stats_json;
  std::string capture;
};

void AddRespondOptions(CLI::App& cmd, RespondArgs& args);
int RespondCommand(RespondArgs args, const EalUserArgs& eal_args);

// Runs the bridge; returns the exit status (0, 2 bad input or missing device, 3 books that do not
// balance or mbufs not returned).
int BridgeCommand(BridgeArgs args, const EalUserArgs& eal_args);

}  // namespace txbatch
