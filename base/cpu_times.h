#pragma once
// What the kernel counted on some CPUs (/proc/stat): their busy time and the time the hypervisor
// took from them (steal). The real engine reads it around a cell's window to name what the
// machine, beside the run, did to it (CellResult::Machine).

#include <span>
#include <string_view>

#include "base/error.h"

namespace txbatch {

// Seconds since boot, summed over some CPUs.
struct CpuTimes {
  double busy_s = 0;   // user, nice, system, irq and softirq (guest time is inside user)
  double steal_s = 0;  // runnable while the hypervisor ran something else
};

// The `cpuN` lines of `text` (/proc/stat's layout) for the CPUs in `cpus`, at `ticks_per_s`
// (USER_HZ). An error where a CPU's line is missing or short (a kernel before 2.6.11 has no
// steal column).
Result<CpuTimes> ParseCpuTimes(std::string_view text, std::span<const int> cpus,
                               double ticks_per_s);
// The same from /proc/stat, at sysconf(_SC_CLK_TCK).
Result<CpuTimes> ReadCpuTimes(std::span<const int> cpus);

}  // namespace txbatch
