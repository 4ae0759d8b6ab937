#include "results/plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace txbatch {
namespace {

constexpr double kWidth = 720, kHeight = 440;
constexpr double kLeft = 80, kRight = 200, kTop = 40, kBottom = 60;  // margins; legend right
constexpr std::array<const char*, 8> kColours = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                                 "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string Escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// A "nice" upper bound and tick step for [0, max].
std::pair<double, double> NiceScale(double max) {
  if (!(max > 0)) return {1, 0.25};
  const double raw = max / 4;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (raw <= m * mag) {
      step = m * mag;
      break;
    }
  return {std::ceil(max / step) * step, step};
}

std::string Header(const std::string& title) {
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<title>{2}</title>\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{3}\" y=\"24\" font-size=\"15\" text-anchor=\"middle\">{2}</text>\n",
      kWidth, kHeight, Escape(title), (kLeft + kWidth - kRight) / 2);
}

std::string YAxis(const std::string& label, double top, double step) {
  const double h = kHeight - kTop - kBottom;
  std::string s = fmt::format(
      "<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"black\"/>\n"
      "<text transform=\"translate(18 {3}) rotate(-90)\" text-anchor=\"middle\">{4}</text>\n",
      kLeft, kTop, kHeight - kBottom, kTop + h / 2, Escape(label));
  for (double v = 0; v <= top + step / 2; v += step) {
    const double y = kHeight - kBottom - v / top * h;
    s += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:.4g}</text>\n",
        kLeft, y, kWidth - kRight, kLeft - 6, y + 4, v);
  }
  return s;
}

}  // namespace

std::string LinePlotSvg(const std::string& title, const std::string& x_label,
                        const std::string& y_label, const std::vector<PlotSeries>& series,
                        bool log2_x, const std::string& empty_note) {
  double xmin = INFINITY, xmax = -INFINITY, ymax = 0;
  const auto fx = [&](double x) { return log2_x ? std::log2(std::max(x, 1e-9)) : x; };
  for (const auto& s : series)
    for (const auto& [x, y] : s.points) {
      xmin = std::min(xmin, fx(x));
      xmax = std::max(xmax, fx(x));
      ymax = std::max(ymax, y);
    }
  if (!std::isfinite(xmin)) xmin = 0, xmax = 1;
  if (xmax == xmin) xmax = xmin + 1;
  // Not a structured binding: clang before 16 cannot capture one in a lambda (the fuzz build).
  const auto scale = NiceScale(ymax);
  const double top = scale.first, step = scale.second;
  const double w = kWidth - kLeft - kRight, h = kHeight - kTop - kBottom;
  const auto px = [&](double x) { return kLeft + (fx(x) - xmin) / (xmax - xmin) * w; };
  const auto py = [&](double y) { return kHeight - kBottom - y / top * h; };

  std::string svg = Header(title) + YAxis(y_label, top, step);
  svg += fmt::format(
      "<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n"
      "<text x=\"{3}\" y=\"{4}\" text-anchor=\"middle\">{5}</text>\n",
      kLeft, kHeight - kBottom, kWidth - kRight, kLeft + w / 2, kHeight - 16, Escape(x_label));
  // x ticks at every distinct x of the data (batch sizes).
  std::vector<double> xs;
  for (const auto& s : series)
    for (const auto& p : s.points) xs.push_back(p.first);
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  for (double x : xs)
    svg += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"black\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
        px(x), kHeight - kBottom, kHeight - kBottom + 5, kHeight - kBottom + 18, x);
  if (series.empty())
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", kLeft + w / 2,
                       kTop + h / 2, Escape(empty_note));
  for (size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    const char* colour = kColours[i % kColours.size()];
    std::string pts;
    for (const auto& [x, y] : s.points) pts += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    svg += fmt::format(
        "<polyline data-series=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{} "
        "points=\"{}\"/>\n",
        Escape(s.name), colour, s.dashed ? " stroke-dasharray=\"6 4\"" : "", pts);
    for (const auto& [x, y] : s.points)
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3\" fill=\"{}\"/>\n", px(x),
                         py(y), colour);
    const double ly = kTop + 10 + 18 * static_cast<double>(i);
    svg += fmt::format(
        "<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"{3}\" "
        "stroke-width=\"2\"{4}/><text x=\"{5}\" y=\"{6:.1f}\">{7}</text>\n",
        kWidth - kRight + 12, ly, kWidth - kRight + 36, colour,
        s.dashed ? " stroke-dasharray=\"6 4\"" : "", kWidth - kRight + 42, ly + 4, Escape(s.name));
  }
  return svg + "</svg>\n";
}

std::string BarPlotSvg(const std::string& title, const std::string& y_label,
                       const std::vector<std::string>& bar_names,
                       const std::vector<BarGroup>& groups) {
  double ymax = 0;
  for (const auto& g : groups)
    for (double v : g.values) ymax = std::max(ymax, v);
  const auto [top, step] = NiceScale(ymax);
  const double w = kWidth - kLeft - kRight, h = kHeight - kTop - kBottom;
  std::string svg = Header(title) + YAxis(y_label, top, step);
  svg += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"black\"/>\n",
                     kLeft, kHeight - kBottom, kWidth - kRight);
  const double group_w = groups.empty() ? w : w / static_cast<double>(groups.size());
  const double bar_w = group_w * 0.8 / static_cast<double>(std::max<size_t>(1, bar_names.size()));
  for (size_t g = 0; g < groups.size(); ++g) {
    const double x0 = kLeft + group_w * static_cast<double>(g) + group_w * 0.1;
    svg += fmt::format("<g data-series=\"{}\">\n", Escape(groups[g].label));
    for (size_t b = 0; b < groups[g].values.size() && b < bar_names.size(); ++b) {
      const double v = groups[g].values[b];
      const double bh = v / top * h;
      svg += fmt::format(
          "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\">"
          "<title>{}: {:.4g}</title></rect>\n",
          x0 + bar_w * static_cast<double>(b), kHeight - kBottom - bh, bar_w * 0.95, bh,
          kColours[b % kColours.size()], Escape(bar_names[b]), v);
    }
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n</g>\n",
                       x0 + group_w * 0.4, kHeight - kBottom + 18, Escape(groups[g].label));
  }
  for (size_t b = 0; b < bar_names.size(); ++b) {
    const double ly = kTop + 10 + 18 * static_cast<double>(b);
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{:.1f}\" width=\"14\" height=\"10\" fill=\"{}\"/>"
        "<text x=\"{}\" y=\"{:.1f}\">{}</text>\n",
        kWidth - kRight + 12, ly - 8, kColours[b % kColours.size()], kWidth - kRight + 32, ly + 1,
        Escape(bar_names[b]));
  }
  return svg + "</svg>\n";
}

}  // namespace txbatch
