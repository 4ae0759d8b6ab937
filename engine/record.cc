#include "engine/record.h"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <rte_version.h>
#include <sys/utsname.h>

#include <chrono>
#include <fstream>

namespace txbatch {
namespace {

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("model name")) return line.substr(line.find(':') + 2);
  return "unknown";
}

}  // namespace

RunEnv CollectEnv(int argc, char** argv) {
  RunEnv env;
  env.dpdk_version = rte_version();
  utsname u{};
  if (uname(&u) == 0) env.kernel = fmt::format("{} {} {}", u.sysname, u.release, u.machine);
  env.cpu = CpuModel();
  for (int i = 0; i < argc; ++i) {
    if (i > 0) env.command_line += ' ';
    env.command_line += argv[i];
  }
  env.started_at = fmt::format(
      "{:%Y-%m-%dT%H:%M:%SZ}",
      fmt::gmtime(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())));
  return env;
}

}  // namespace txbatch
