#pragma once
// How txbatch writes a latency, everywhere it prints one: in tc's words (282.5us, 1.25ms: they
// read back through base/units.h), and in a table one unit for a whole column, so its rows line
// up and compare at a glance (a column holding 900us beside 1.20ms made the reader convert).

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

namespace txbatch {

enum class LatencyUnit { kUs, kMs };

// The unit a column of these latencies (ns; none ignored) reads in: milliseconds where the
// largest is kMsColumnNs or more, else microseconds. Milliseconds keep a microsecond's digit
// ("0.045ms"), so a small value in a column a congested cell turned to ms still reads.
inline constexpr double kMsColumnNs = 10e6;  // 10 ms: "10000.0us" is as wide as a column takes
LatencyUnit ColumnUnit(const std::vector<std::optional<double>>& ns);

// One latency in `unit` ("282.5us", "12.500ms"); "-" for none (nothing received).
std::string LatencyText(const std::optional<double>& ns, LatencyUnit unit);
// One latency alone, as a sentence says it: the unit a column of it alone would have.
std::string LatencyText(double ns);

}  // namespace txbatch
