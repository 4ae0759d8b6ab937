#pragma once
// SVG plots written by txbatch itself (nothing fetched, no plotting package needed): line plots
// of a metric against batch size, and grouped bars. Standalone SVG 1.1 documents; every series
// is a <polyline> (or bars a <g>) carrying its name in a data-series attribute, so tests and
// scripts can find it.

#include <string>
#include <utility>
#include <vector>

namespace txbatch {

struct PlotSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y), x ascending
  bool dashed = false;
};

// x on a log2 axis when `log2_x` (batch sizes 1, 2, 4 …), else linear; y linear from 0. With no
// series, the plot says `empty_note` in its middle instead.
std::string LinePlotSvg(const std::string& title, const std::string& x_label,
                        const std::string& y_label, const std::vector<PlotSeries>& series,
                        bool log2_x, const std::string& empty_note = "no data");

struct BarGroup {
  std::string label;           // the group's name under the axis
  std::vector<double> values;  // one per bar name
};

std::string BarPlotSvg(const std::string& title, const std::string& y_label,
                       const std::vector<std::string>& bar_names,
                       const std::vector<BarGroup>& groups);

}  // namespace txbatch
