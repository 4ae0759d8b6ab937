#pragma once
// What the kernel counted on some CPUs (/proc/stat): their idle time and the time the hypervisor
// took from them (steal), each in USER_HZ ticks (10 ms): a difference of two reads is off by less
// than a tick a CPU and counter. Busy time is not read: the kernel samples it at its ticks. The
// real engine reads it around a cell's window to name what the machine, beside the run, did to it
// (CellResult::Machine).

#include <span>
#include <string_view>

#include "base/error.h"

namespace txbatch {

// Seconds since boot, summed over some CPUs, and when they were read.
struct CpuTimes {
  double idle_s = 0;   // idle and iowait: timed to the microsecond where the CPU stopped its tick
  double steal_s = 0;  // runnable while the hypervisor ran something else
  double at_s = 0;     // CLOCK_MONOTONIC at the read (0 from ParseCpuTimes)
};

// The `cpuN` lines of `text` (/proc/stat's layout) for the CPUs in `cpus`, at `ticks_per_s`
// (USER_HZ). An error where a CPU's line is missing or short (a kernel before 2.6.11 has no
// steal column).
Result<CpuTimes> ParseCpuTimes(std::string_view text, std::span<const int> cpus,
                               double ticks_per_s);
// The same from /proc/stat, at sysconf(_SC_CLK_TCK).
Result<CpuTimes> ReadCpuTimes(std::span<const int> cpus);

}  // namespace txbatch
