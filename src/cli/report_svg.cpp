#include "cli/report_svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace sg {
namespace {

// Pixels around the plot area: tick labels on the left, title above, axis label below.
constexpr int kMarginLeft = 72, kMarginRight = 16, kMarginTop = 30, kMarginBottom = 44;

struct Extent {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool empty() const { return lo > hi; }
};

}  // namespace

Ticks nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) {
    lo = 0;
    hi = 1;
  }
  if (lo > hi) std::swap(lo, hi);
  if (lo == hi) {
    const double pad = lo == 0 ? 1 : std::abs(lo) * 0.05;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double normalised = raw / magnitude;
  const double nice = normalised < 1.5 ? 1 : normalised < 3 ? 2 : normalised < 7 ? 5 : 10;
  Ticks ticks;
  ticks.step = nice * magnitude;
  // A tick within a millionth of a step of the data counts as reaching it (rounding in lo / step).
  const long first = static_cast<long>(std::floor(lo / ticks.step + 1e-6));
  const long last = static_cast<long>(std::ceil(hi / ticks.step - 1e-6));
  for (long i = first; i <= last; ++i) {
    const double value = static_cast<double>(i) * ticks.step;
    ticks.values.push_back(std::abs(value) < ticks.step * 1e-9 ? 0.0 : value);
  }
  return ticks;
}

std::string format_tick(double value, double step) {
  if (value == 0) return "0";
  if (step < 1e-3) return fmt::format("{:.1e}", value);
  if (step >= 1e6 && std::abs(value) >= 1e6) return fmt::format("{:g}M", value / 1e6);
  if (step >= 1e3 && std::abs(value) >= 1e4) return fmt::format("{:g}k", value / 1e3);
  const int decimals = std::max(0, static_cast<int>(-std::floor(std::log10(step) + 1e-9)));
  return fmt::format("{:.{}f}", value, decimals);
}

double LinearScale::operator()(double value) const {
  if (domain_hi == domain_lo) return (range_lo + range_hi) / 2;
  return range_lo + (value - domain_lo) / (domain_hi - domain_lo) * (range_hi - range_lo);
}

std::string polyline_points(const Points& points, const LinearScale& x, const LinearScale& y) {
  std::string out;
  for (const auto& [px, py] : points) {
    if (!std::isfinite(px) || !std::isfinite(py)) continue;
    if (!out.empty()) out += ' ';
    out += fmt::format("{:.1f},{:.1f}", x(px), y(py));
  }
  return out;
}

std::string render_chart_svg(const Chart& chart) {
  Extent xs, ys;
  for (const ChartSeries& s : chart.series) {
    for (const auto& [x, y] : s.points) {
      if (!std::isfinite(x) || !std::isfinite(y)) continue;
      xs.add(x);
      ys.add(y);
    }
  }
  if (xs.empty()) xs = ys = Extent{0, 1};  // no data: an empty frame
  const Ticks x_ticks = nice_ticks(xs.lo, xs.hi, 6);
  const Ticks y_ticks = nice_ticks(ys.lo, ys.hi, 5);
  const double left = kMarginLeft, right = chart.width - kMarginRight;
  const double top = kMarginTop, bottom = chart.height - kMarginBottom;
  const LinearScale x{x_ticks.values.front(), x_ticks.values.back(), left, right};
  const LinearScale y{y_ticks.values.front(), y_ticks.values.back(), bottom, top};

  std::string svg = fmt::format(
      "<svg class=\"chart\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" role=\"img\" "
      "aria-label=\"{2}\">\n",
      chart.width, chart.height, escape_html(chart.title));
  svg += fmt::format("<text class=\"title\" x=\"{}\" y=\"18\">{}</text>\n", left,
                     escape_html(chart.title));
  // Grid lines and tick labels, then the axes over them.
  for (const double value : y_ticks.values) {
    const double py = y(value);
    svg += fmt::format(
        "<line class=\"grid\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>"
        "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n",
        left, py, right, py, left - 6, py + 4, format_tick(value, y_ticks.step));
  }
  for (const double value : x_ticks.values) {
    const double px = x(value);
    svg += fmt::format(
        "<line class=\"grid\" x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"/>"
        "<text class=\"tick\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{}</text>\n",
        px, top, px, bottom, px, bottom + 16, format_tick(value, x_ticks.step));
  }
  svg += fmt::format("<path class=\"axis\" d=\"M{:.1f},{:.1f} V{:.1f} H{:.1f}\"/>\n", left, top,
                     bottom, right);
  svg +=
      fmt::format("<text class=\"label\" x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                  (left + right) / 2, chart.height - 8, escape_html(chart.x_label));
  svg += fmt::format(
      "<text class=\"label\" x=\"14\" y=\"{0:.1f}\" text-anchor=\"middle\" "
      "transform=\"rotate(-90 14 {0:.1f})\">{1}</text>\n",
      (top + bottom) / 2, escape_html(chart.y_label));
  for (const ChartSeries& s : chart.series) {
    svg += fmt::format(
        "<polyline class=\"series\" data-run=\"{}\" data-metric=\"{}\" fill=\"none\" "
        "stroke=\"{}\" stroke-width=\"1.5\"{} points=\"{}\"/>\n",
        escape_html(s.run), escape_html(s.metric), s.colour,
        s.dashed ? " stroke-dasharray=\"6 3\"" : "", polyline_points(s.points, x, y));
    if (!s.markers) continue;
    for (const auto& [px, py] : s.points) {
      if (!std::isfinite(px) || !std::isfinite(py)) continue;
      svg += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"2.5\" fill=\"{}\"/>", x(px),
                         y(py), s.colour);
    }
    svg += '\n';
  }
  return svg + "</svg>\n";
}

const char* series_colour(size_t n) {
  static const char* const kColours[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return kColours[n % std::size(kColours)];
}

std::string escape_html(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
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
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace sg
