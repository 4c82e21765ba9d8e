#pragma once
// Line charts as inline SVG for `singularity report`: nice tick values, a linear scale from data
// to pixels, polylines, axes with ticks and labels. Pure functions of their inputs, no fonts
// measured and no JavaScript: the page is drawn by any browser as it stands.
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sg {

// Tick values 1, 2 or 5 x 10^k apart, about `target` of them, from a multiple of the step at or
// below lo to one at or above hi (so the ticks span the data). lo == hi is widened around it.
struct Ticks {
  double step = 1;
  std::vector<double> values;  // ascending; front() <= lo, back() >= hi
};
Ticks nice_ticks(double lo, double hi, int target = 5);
// A tick's label: as many decimals as the step needs; 12k for thousands, 1.5e-04 for the tiny.
std::string format_tick(double value, double step);

// Maps [domain_lo, domain_hi] onto [range_lo, range_hi] (range_lo > range_hi flips the axis, as
// SVG's y grows downwards). A zero-width domain maps everything to the middle of the range.
struct LinearScale {
  double domain_lo = 0, domain_hi = 1, range_lo = 0, range_hi = 1;
  double operator()(double value) const;
};

using Points = std::vector<std::pair<double, double>>;  // (x, y) in data units

// "x,y x,y ..." in pixels with one decimal, for <polyline points="...">; non-finite points are
// left out.
std::string polyline_points(const Points& points, const LinearScale& x, const LinearScale& y);

struct ChartSeries {
  Points points;
  std::string colour;  // CSS colour
  bool dashed = false;
  bool markers = false;     // a dot on every point (sparse series such as evaluations)
  std::string run, metric;  // written as data-run / data-metric attributes
};

struct Chart {
  std::string title, x_label, y_label;
  std::vector<ChartSeries> series;
  int width = 560, height = 320;
};

// <svg ...> with a title, axes, grid lines, tick labels, axis labels and one <polyline> per
// series (on a line of its own). The domains are the ticks spanning every series' finite points.
std::string render_chart_svg(const Chart& chart);

// The n-th of ten distinguishable colours (Tableau 10), cycling.
const char* series_colour(size_t n);
// Text made safe inside HTML/SVG elements and attribute values.
std::string escape_html(std::string_view text);

}  // namespace sg
