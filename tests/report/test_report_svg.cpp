// The SVG helpers of `singularity report` (cli/report_svg.h): tick choice, scaling, polyline
// points, and a chart's structure.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <regex>

#include "cli/report_svg.h"

namespace sg {

TEST_CASE("ticks are 1, 2 or 5 times a power of ten and span the data") {
  const Ticks unit = nice_ticks(0, 1, 5);
  CHECK(unit.step == doctest::Approx(0.2));
  REQUIRE(unit.values.size() == 6);
  CHECK(unit.values.front() == 0);
  CHECK(unit.values.back() == doctest::Approx(1.0));

  const Ticks loss = nice_ticks(3.27, 10.98, 5);  // range 7.7: raw step 1.5 -> 2
  CHECK(loss.step == doctest::Approx(2));
  CHECK(loss.values.front() == doctest::Approx(2));
  CHECK(loss.values.back() == doctest::Approx(12));

  const Ticks steps = nice_ticks(1, 20, 6);  // raw 3.17 -> 5
  CHECK(steps.step == doctest::Approx(5));
  CHECK(steps.values.front() == 0);
  CHECK(steps.values.back() == doctest::Approx(20));

  const Ticks lr = nice_ticks(6e-5, 6e-4, 5);  // raw 1.08e-4 -> 1e-4
  CHECK(lr.step == doctest::Approx(1e-4));
  CHECK(lr.values.front() == doctest::Approx(0));
  CHECK(lr.values.back() == doctest::Approx(6e-4));

  const Ticks negative = nice_ticks(-3, 7, 5);
  CHECK(negative.step == doctest::Approx(2));
  CHECK(negative.values.front() == doctest::Approx(-4));
  CHECK(negative.values.back() == doctest::Approx(8));
  CHECK(std::find(negative.values.begin(), negative.values.end(), 0.0) != negative.values.end());

  // A constant series gets a range around it; zero gets [-1, 1].
  const Ticks flat = nice_ticks(300, 300, 5);
  CHECK(flat.values.front() < 300);
  CHECK(flat.values.back() > 300);
  const Ticks zero = nice_ticks(0, 0, 5);
  CHECK(zero.values.front() == doctest::Approx(-1));
  CHECK(zero.values.back() == doctest::Approx(1));
}

TEST_CASE("tick labels use the step's precision") {
  CHECK(format_tick(0, 0.2) == "0");
  CHECK(format_tick(0.4, 0.2) == "0.4");
  CHECK(format_tick(12, 2) == "12");
  CHECK(format_tick(2.5, 0.5) == "2.5");
  CHECK(format_tick(0.05, 0.01) == "0.05");
  CHECK(format_tick(20000, 5000) == "20k");
  CHECK(format_tick(3e6, 1e6) == "3M");
  CHECK(format_tick(2e-4, 1e-4) == "2.0e-04");
}

TEST_CASE("a linear scale maps the domain onto the range, flipped for y") {
  const LinearScale x{0, 10, 100, 200};
  CHECK(x(0) == 100);
  CHECK(x(5) == 150);
  CHECK(x(10) == 200);
  const LinearScale y{0, 4, 300, 100};  // SVG's y grows downwards
  CHECK(y(0) == 300);
  CHECK(y(1) == 250);
  CHECK(y(4) == 100);
  const LinearScale flat{2, 2, 0, 10};
  CHECK(flat(2) == 5);
}

TEST_CASE("polyline points are pixels with one decimal; non-finite points are left out") {
  const LinearScale x{0, 10, 0, 100}, y{0, 1, 50, 0};
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK(polyline_points({{0, 0}, {5, 0.5}, {10, 1}}, x, y) == "0.0,50.0 50.0,25.0 100.0,0.0");
  CHECK(polyline_points({{1, 0.25}, {2, nan}, {3, 1}}, x, y) == "10.0,37.5 30.0,0.0");
  CHECK(polyline_points({}, x, y).empty());
}

TEST_CASE("a chart has axes, tick labels and one polyline per series") {
  Chart chart;
  chart.title = "loss & <friends>";
  chart.x_label = "step";
  chart.y_label = "loss";
  chart.series.push_back(
      {{{1, 4.0}, {2, 3.5}, {3, 3.0}}, series_colour(0), false, false, "0", "loss"});
  chart.series.push_back({{{3, 3.2}}, series_colour(1), true, true, "1", "val_loss"});
  const std::string svg = render_chart_svg(chart);
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("loss &amp; &lt;friends&gt;") != std::string::npos);
  CHECK(svg.find("<friends>") == std::string::npos);
  const std::regex polyline("<polyline [^>]*data-run=\"([01])\"[^>]*points=\"([^\"]*)\"");
  std::vector<std::pair<std::string, size_t>> found;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), polyline);
       it != std::sregex_iterator(); ++it) {
    const std::string points = (*it)[2];
    found.emplace_back((*it)[1], std::count(points.begin(), points.end(), ','));
  }
  REQUIRE(found.size() == 2);
  CHECK(found[0] == std::make_pair(std::string("0"), size_t{3}));
  CHECK(found[1] == std::make_pair(std::string("1"), size_t{1}));
  CHECK(svg.find("stroke-dasharray") != std::string::npos);
  CHECK(svg.find("<circle") != std::string::npos);
  CHECK(svg.find(">step</text>") != std::string::npos);
  CHECK(svg.find("class=\"tick\"") != std::string::npos);
  CHECK(svg.find("http") == std::string::npos);
  CHECK(series_colour(0) != series_colour(1));
  CHECK(escape_html("a\"b'c") == "a&quot;b&#39;c");
}

}  // namespace sg
