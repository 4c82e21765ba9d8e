// `singularity report RUN_DIR... [-o report.html]`: one self-contained HTML page (inline CSS and
// SVG, no scripts, nothing fetched) with every run's metrics.jsonl plotted against the step and a
// summary table. A sweep's directory stands for its points.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>

#include "cli/commands.h"
#include "cli/report_svg.h"
#include "cli/sweep_summary.h"
#include "util/error.h"

namespace sg {
namespace {

namespace fs = std::filesystem;

struct ReportRun {
  std::string name;  // the directory as given, or <sweep dir>/<point>
  std::vector<MetricsLine> lines;
  PointMetrics summary;
  std::optional<PointRecord> record;  // a sweep point's: its wall time
};

// A sweep point's directory is <dir>/<N>-<overrides> (sweep_spec.h); -1 for any other name.
long point_index(const std::string& name) {
  size_t digits = 0;
  while (digits < name.size() && std::isdigit(static_cast<unsigned char>(name[digits]))) ++digits;
  if (digits == 0 || digits > 9 || digits >= name.size() || name[digits] != '-') return -1;
  return std::stol(name.substr(0, digits));
}

// The run directories the arguments name: each that holds metrics.jsonl, else (a sweep's
// directory) its points that do, in point order.
std::vector<std::string> expand_run_dirs(const std::vector<std::string>& args) {
  std::vector<std::string> dirs;
  for (const std::string& arg : args) {
    std::string dir = fs::path(arg).lexically_normal().string();
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (fs::is_regular_file(dir + "/metrics.jsonl")) {
      dirs.push_back(dir);
      continue;
    }
    std::vector<std::pair<long, std::string>> points;
    std::error_code error;
    if (fs::is_directory(dir)) {
      for (const auto& entry : fs::directory_iterator(dir, error)) {
        const std::string name = entry.path().filename().string();
        const long index = point_index(name);
        if (index >= 0 && fs::is_regular_file(entry.path() / "metrics.jsonl"))
          points.emplace_back(index, dir + "/" + name);
      }
    }
    if (points.empty()) {
      const bool sweep = fs::is_regular_file(dir + "/summary.csv");
      throw SpecError(
          sweep ? arg +
                      ": a sweep directory none of whose points has a metrics.jsonl yet; run "
                      "the sweep first"
                : arg +
                      ": no metrics.jsonl; give a run directory (the job's log.dir) or a "
                      "sweep's directory");
    }
    std::sort(points.begin(), points.end());
    for (auto& point : points) dirs.push_back(std::move(point.second));
  }
  return dirs;
}

// The (step, value * scale) of every line holding `key`.
Points series_of(const ReportRun& run, const std::string& key, double scale = 1) {
  Points points;
  for (const MetricsLine& line : run.lines)
    if (const auto value = line.value(key)) points.emplace_back(line.step, *value * scale);
  return points;
}

// "tokens_per_s" or "images_per_s": the run's throughput key; empty when it has no steps.
std::string throughput_key(const ReportRun& run) {
  return run.summary.throughput.empty() ? std::string() : run.summary.throughput.front().first;
}

std::optional<double> lowest(const Points& points) {
  std::optional<double> best;
  for (const auto& [step, value] : points)
    if (std::isfinite(value) && (!best || value < *best)) best = value;
  return best;
}

std::optional<double> median(const Points& points) {
  std::vector<double> values;
  for (const auto& [step, value] : points)
    if (std::isfinite(value)) values.push_back(value);
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  return values[(values.size() - 1) / 2];
}

// Evaluation metrics other than val_loss (val_top1, ...), in order of first appearance.
std::vector<std::string> eval_metric_names(const std::vector<ReportRun>& runs) {
  std::vector<std::string> names;
  for (const ReportRun& run : runs)
    for (const MetricsLine& line : run.lines)
      if (line.is_eval())
        for (const auto& [key, value] : line.values)
          if (key != "val_loss" && std::find(names.begin(), names.end(), key) == names.end())
            names.push_back(key);
  return names;
}

struct PlotLine {
  std::string key;  // metrics.jsonl's key; "*_per_s" stands for each run's throughput key
  double scale = 1;
  bool dashed = false, markers = false;
};

// One chart: each run's series for each line, in the run's colour. Empty when no run has data.
std::string chart_figure(const std::vector<ReportRun>& runs, const std::string& plot,
                         const std::string& title, const std::string& y_label,
                         const std::vector<PlotLine>& lines) {
  Chart chart;
  chart.title = title;
  chart.x_label = "step";
  chart.y_label = y_label;
  for (size_t r = 0; r < runs.size(); ++r) {
    for (const PlotLine& line : lines) {
      const std::string key = line.key == "*_per_s" ? throughput_key(runs[r]) : line.key;
      if (key.empty()) continue;
      ChartSeries series;
      series.points = series_of(runs[r], key, line.scale);
      if (series.points.empty()) continue;
      series.colour = series_colour(r);
      series.dashed = line.dashed;
      series.markers = line.markers;
      series.run = std::to_string(r);
      series.metric = key;
      chart.series.push_back(std::move(series));
    }
  }
  if (chart.series.empty()) return "";
  return fmt::format("<figure data-plot=\"{}\">\n{}</figure>\n", escape_html(plot),
                     render_chart_svg(chart));
}

std::string throughput_label(const std::vector<ReportRun>& runs) {
  std::string unit;
  for (const ReportRun& run : runs) {
    const std::string key = throughput_key(run);
    if (key.empty()) continue;
    const std::string this_unit = key.substr(0, key.size() - 6);  // "<unit>_per_s"
    if (!unit.empty() && unit != this_unit) return "units/s (tokens or images)";
    unit = this_unit;
  }
  return (unit.empty() ? "units" : unit) + "/s";
}

std::string format_duration(double seconds) {
  if (seconds < 60) return fmt::format("{:.1f} s", seconds);
  const long s = std::lround(seconds);
  if (s < 3600) return fmt::format("{}m {:02}s", s / 60, s % 60);
  return fmt::format("{}h {:02}m", s / 3600, s % 3600 / 60);
}

std::string cell(const std::optional<double>& value, const char* format = "{:.4f}") {
  return value ? fmt::format(fmt::runtime(format), *value) : std::string("&ndash;");
}

std::string summary_table(const std::vector<ReportRun>& runs) {
  const std::vector<std::string> evals = eval_metric_names(runs);
  std::string html =
      "<table>\n<tr><th>run</th><th>steps</th><th>final loss</th><th>best loss</th>"
      "<th>final val loss</th><th>best val loss</th>";
  for (const std::string& name : evals) html += "<th>" + escape_html(name) + "</th>";
  html +=
      "<th>wall time</th><th>time in steps</th><th>median throughput</th>"
      "<th>median MFU</th></tr>\n";
  for (size_t r = 0; r < runs.size(); ++r) {
    const ReportRun& run = runs[r];
    const PointMetrics& m = run.summary;
    html += fmt::format(
        "<tr data-run=\"{}\"><td><span class=\"swatch\" style=\"background:{}\">"
        "</span>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
        r, series_colour(r), escape_html(run.name), m.last_step, cell(m.train_loss),
        cell(lowest(series_of(run, "loss"))), cell(m.val_loss),
        cell(lowest(series_of(run, "val_loss"))));
    for (const std::string& name : evals) {
      std::optional<double> value;
      for (const auto& [key, v] : m.val_metrics)
        if (key == name) value = v;
      html += "<td>" + cell(value) + "</td>";
    }
    const std::string key = throughput_key(run);
    const std::optional<double> rate =
        key.empty() ? std::nullopt : std::optional<double>(m.throughput.front().second);
    const std::optional<double> mfu = median(series_of(run, "mfu", 100));
    html += fmt::format(
        "<td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        run.record ? format_duration(run.record->wall_s) : "&ndash;", format_duration(m.train_s),
        rate ? fmt::format("{:.0f} {}/s", *rate, key.substr(0, key.size() - 6)) : "&ndash;",
        cell(mfu, "{:.2f}%"));
  }
  return html + "</table>\n";
}

constexpr const char* kStyle = R"(
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px; color: #222;
       background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 28px 0 8px; }
.note { color: #555; font-size: 13px; margin: 0 0 12px; }
.legend { list-style: none; padding: 0; margin: 0 0 16px; display: flex; flex-wrap: wrap;
          gap: 6px 18px; font-size: 13px; }
.swatch { display: inline-block; width: 18px; height: 4px; margin: 0 6px 3px 0;
          vertical-align: middle; }
.charts { display: flex; flex-wrap: wrap; gap: 12px; }
figure { margin: 0; border: 1px solid #ddd; border-radius: 4px; background: #fff; }
.chart .title { font-size: 13px; font-weight: 600; fill: #222; }
.chart .tick { font-size: 11px; fill: #555; }
.chart .label { font-size: 12px; fill: #333; }
.chart .grid { stroke: #eee; stroke-width: 1; }
.chart .axis { stroke: #444; stroke-width: 1; fill: none; }
table { border-collapse: collapse; font-size: 13px; }
th, td { border: 1px solid #ddd; padding: 4px 8px; text-align: right; white-space: nowrap; }
th { background: #f4f4f4; }
td:first-child, th:first-child { text-align: left; }
)";

std::string report_html(const std::vector<ReportRun>& runs) {
  std::string html = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>singularity report</title>\n<style>{}</style>\n</head>\n<body>\n"
      "<h1>Training report</h1>\n<p class=\"note\">{} run{} from metrics.jsonl, plotted against "
      "the optimizer step; loss charts: solid lines train, dashed lines with dots validation."
      "</p>\n<ul class=\"legend\">\n",
      kStyle, runs.size(), runs.size() == 1 ? "" : "s");
  for (size_t r = 0; r < runs.size(); ++r) {
    html += fmt::format("<li><span class=\"swatch\" style=\"background:{}\"></span>{}</li>\n",
                        series_colour(r), escape_html(runs[r].name));
  }
  html += "</ul>\n<div class=\"charts\">\n";
  html += chart_figure(runs, "loss", "loss and validation loss", "loss",
                       {{"loss"}, {"val_loss", 1, true, true}});
  html += chart_figure(runs, "lr", "learning rate", "lr", {{"lr"}});
  html += chart_figure(runs, "grad_norm", "gradient norm", "grad norm", {{"grad_norm"}});
  html += chart_figure(runs, "throughput", "throughput", throughput_label(runs), {{"*_per_s"}});
  html += chart_figure(runs, "mfu", "model FLOPs utilisation", "MFU (%)", {{"mfu", 100}});
  html += chart_figure(runs, "memory", "peak memory", "MiB", {{"peak_mem_bytes", 1.0 / (1 << 20)}});
  for (const std::string& name : eval_metric_names(runs))
    html += chart_figure(runs, name, name, name, {{name, 1, false, true}});
  html += "</div>\n<h2>Summary</h2>\n" + summary_table(runs);
  html +=
      "<p class=\"note\">wall time: as the sweep recorded it (sweep points only); time in "
      "steps: the optimizer steps' times added up; medians over the steps.</p>\n";
  return html + "</body>\n</html>\n";
}

}  // namespace

int run_report_command(const std::vector<std::string>& run_dirs, const std::string& output) {
  std::vector<ReportRun> runs;
  for (const std::string& dir : expand_run_dirs(run_dirs)) {
    ReportRun run;
    run.name = dir;
    run.lines = read_metrics_lines(dir);
    run.summary = read_point_metrics(dir);
    run.record = read_point_record(dir);
    runs.push_back(std::move(run));
  }
  const std::string html = report_html(runs);
  {
    std::ofstream out(output, std::ios::binary | std::ios::trunc);
    out << html;
    out.close();
    if (!out) {
      throw RunError(output +
                     ": cannot write the report; check that its directory exists and "
                     "is writable, or choose another with -o");
    }
  }
  fmt::print("{}\n", output);
  return 0;
}

}  // namespace sg
