#pragma once
// `txbatch lab up|down`: two network namespaces joined through the bridge, for ping, iperf3 or
// any application to run across the batched TX path and the link model. Control plane; runs
// iproute2 and ethtool, needs root.
//
//   PREFIX-a (10.77.0.1/24 on PREFIX-a0) ==veth== PREFIX-a1 [txbatch bridge] PREFIX-b1 ==veth==
//   PREFIX-b0 (10.77.0.2/24) in PREFIX-b
//
// The bridge runs in the background (its own session) with a pid file and a log under
// /run/txbatch-lab/PREFIX/; `down` stops it by that pid and removes everything of the prefix's
// naming, also after a crash.

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
