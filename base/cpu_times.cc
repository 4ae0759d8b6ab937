#include "base/cpu_times.h"

#include <fmt/format.h>
#include <time.h>
#include <unistd.h>

#include <array>
#include <charconv>
#include <fstream>
#include <iterator>
#include <string>

namespace txbatch {

Result<CpuTimes> ParseCpuTimes(std::string_view text, std::span<const int> cpus,
                               double ticks_per_s) {
  CpuTimes t;
  for (const int cpu : cpus) {
    const std::string name = fmt::format("cpu{} ", cpu);
    size_t at = text.starts_with(name) ? 0 : text.find("\n" + name);
    if (at == std::string_view::npos)
      return MakeError(ENOENT, fmt::format("/proc/stat has no line for CPU {}", cpu));
    if (at != 0) ++at;
    std::string_view line = text.substr(at + name.size());
    line = line.substr(0, line.find('\n'));
    // user nice system idle iowait irq softirq steal (guest and guest_nice follow: inside user)
    std::array<uint64_t, 8> f{};
    for (uint64_t& v : f) {
      while (line.starts_with(' ')) line.remove_prefix(1);
      const auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), v);
      if (ec != std::errc())
        return MakeError(EINVAL, fmt::format("/proc/stat's line for CPU {} has fewer than 8 "
                                             "counts (no steal time)",
                                             cpu));
      line.remove_prefix(static_cast<size_t>(end - line.data()));
    }
    t.idle_s += static_cast<double>(f[3] + f[4]) / ticks_per_s;
    t.steal_s += static_cast<double>(f[7]) / ticks_per_s;
  }
  return t;
}

Result<CpuTimes> ReadCpuTimes(std::span<const int> cpus) {
  std::ifstream in("/proc/stat");
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  if (text.empty()) return MakeError(ENOENT, "/proc/stat cannot be read");
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  auto t = ParseCpuTimes(text, cpus, static_cast<double>(sysconf(_SC_CLK_TCK)));
  if (t) t->at_s = static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
  return t;
}

}  // namespace txbatch
