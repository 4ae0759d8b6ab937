#pragma once
// `txbatch lab up|down`: two network namespaces joined through the bridge, for ping, iperf3 or
// any application to run across the batched TX path and the link model. Control plane; runs
// iproute2 and ethtool, needs root.
//
//   PREFIX-a (10.77.0.1/24 on PREFIX-a0) ==veth== PREFIX-a1 [txbatch bridge] PREFIX-b1 ==veth==
//   PREFIX-b0 (10.77.0.2/24) in PREFIX-b
//
// The bridge runs in the background (its own session, under a watcher that reaps it and records
// how it ended) with its log under /run/txbatch-lab/PREFIX/. What `up` makes (namespaces, links,
// the bridge's pid, files) is recorded in PREFIX/state as each is made; `down` (root) stops the
// bridge, waiting for what its links hold, prints its books, ends the processes left in the
// lab's namespaces and removes exactly what the state names, also after a crash. A bridge that
// had ended before `down`: one sentence with how it ended, its log kept as bridge-PID.log, exit
// 1. Without a state it removes nothing (exit 2).
// SIGINT or SIGTERM during `up` undoes what it made and exits 128 + the signal.

#include <string>
#include <vector>

namespace txbatch {

struct LabArgs {
  std::string prefix = "txb";
  std::vector<std::string> bridge_args;  // passed to `txbatch bridge` (--link, --batch, …)
};

inline constexpr const char* kLabStateDir = "/run/txbatch-lab";
inline constexpr const char* kLabAddrA = "10.77.0.1";
inline constexpr const char* kLabAddrB = "10.77.0.2";

int LabUp(const LabArgs& args, const std::vector<std::string>& eal_args);
int LabDown(const std::string& prefix);

}  // namespace txbatch
