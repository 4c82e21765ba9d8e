#include "cli/sweep_summary.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "checkpoint/checkpoint.h"
#include "checkpoint/json_fields.h"
#include "util/error.h"

namespace sg {
namespace {

namespace fs = std::filesystem;

std::string this_host() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

bool process_alive(long pid) {
  return pid > 0 && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

// A metrics value: JSON null is how metrics.jsonl writes a non-finite one.
double number_of(const nlohmann::json& value) {
  return value.is_number() ? value.get<double>() : std::numeric_limits<double>::quiet_NaN();
}

// Shortest text that reads back to the same double, as metrics.jsonl writes it.
std::string exact(double v) { return fmt::format("{}", v); }

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string out = "\"";
  for (const char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

// Column names in order of first appearance across the points.
std::vector<std::string> columns_of(
    const std::vector<PointSummary>& rows,
    std::vector<std::pair<std::string, double>> PointMetrics::*field) {
  std::vector<std::string> names;
  for (const PointSummary& row : rows)
    for (const auto& [name, value] : row.metrics.*field)
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  return names;
}

std::optional<double> lookup(const std::vector<std::pair<std::string, double>>& values,
                             const std::string& name) {
  for (const auto& [key, value] : values)
    if (key == name) return value;
  return std::nullopt;
}

std::string status_text(const PointSummary& row) {
  if (row.state == PointState::failed) return fmt::format("failed ({})", row.exit_code);
  return point_state_name(row.state);
}

}  // namespace

const char* point_state_name(PointState state) {
  switch (state) {
    case PointState::done:
      return "done";
    case PointState::failed:
      return "failed";
    case PointState::running:
      return "running";
    case PointState::pending:
      break;
  }
  return "pending";
}

std::optional<PointRecord> read_point_record(const std::string& run_dir) {
  const std::string path = run_dir + "/sweep_status.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();
  // Every value checked, each error naming the file and the field (checkpoint/json_fields.h).
  const std::string advice =
      "delete it if no sweep is running this point (the sweep writes it again)";
  const size_t deep = json_depth_exceeded_at(text);
  if (deep != std::string::npos)
    throw RunError(fmt::format("{}: nested deeper than {} levels (at byte {}); {}", path,
                               kMaxJsonDepth, deep, advice));
  const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return std::nullopt;  // a torn write: as if none
  const JsonFields f(j, path, advice);
  PointRecord r;
  r.state = f.string_or("state", "");
  if (!r.state.empty() && r.state != "running" && r.state != "done" && r.state != "failed" &&
      r.state != "interrupted")
    throw f.wrong("state", "running, done, failed or interrupted");
  r.exit_code = static_cast<int>(f.integer_or("exit_code", 0, 0, 255));
  r.wall_s = f.number_or("wall_s", 0.0, 0.0, std::numeric_limits<double>::max());
  r.host = f.string_or("host", "");
  if (r.host.size() > 255) throw f.wrong("host", "a host name (at most 255 characters)");
  r.pid = static_cast<long>(f.integer_or("pid", 0, 0, std::numeric_limits<int32_t>::max()));
  return r;
}

void write_point_record(const std::string& run_dir, const PointRecord& r) {
  const nlohmann::json j = {{"state", r.state},
                            {"exit_code", r.exit_code},
                            {"wall_s", r.wall_s},
                            {"host", r.host.empty() ? this_host() : r.host},
                            {"pid", r.pid != 0 ? r.pid : static_cast<long>(getpid())}};
  write_file_atomically(run_dir + "/sweep_status.json", j.dump() + "\n");
}

bool MetricsLine::is_eval() const { return value("val_loss").has_value(); }

std::optional<double> MetricsLine::value(const std::string& key) const {
  return lookup(values, key);
}

std::vector<MetricsLine> read_metrics_lines(const std::string& run_dir) {
  std::vector<MetricsLine> lines;
  std::ifstream in(run_dir + "/metrics.jsonl");
  std::string text;
  while (std::getline(in, text)) {
    const auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer())
      continue;  // a torn last line
    MetricsLine line;
    line.step = j["step"].get<int64_t>();
    for (const auto& [key, value] : j.items()) {
      if (key == "step") continue;
      line.values.emplace_back(
          key, value.is_boolean() ? (value.get<bool>() ? 1.0 : 0.0) : number_of(value));
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

PointMetrics read_point_metrics(const std::string& run_dir) {
  PointMetrics m;
  std::map<std::string, std::vector<double>> throughputs;
  std::vector<std::string> throughput_order;
  for (const MetricsLine& line : read_metrics_lines(run_dir)) {
    if (line.is_eval()) {
      m.val_loss = line.value("val_loss");
      m.val_metrics.clear();
      for (const auto& [key, value] : line.values)
        if (key != "val_loss") m.val_metrics.emplace_back(key, value);
    } else if (const auto loss = line.value("loss")) {
      m.last_step = line.step;
      m.train_loss = loss;
      if (const auto ms = line.value("step_ms")) m.train_s += *ms / 1000.0;
      for (const auto& [key, value] : line.values) {
        if (key.size() <= 6 || key.compare(key.size() - 6, 6, "_per_s") != 0) continue;
        if (!throughputs.count(key)) throughput_order.push_back(key);
        throughputs[key].push_back(value);
      }
    }
  }
  for (const std::string& key : throughput_order) {
    std::vector<double>& values = throughputs[key];
    std::sort(values.begin(), values.end());
    m.throughput.emplace_back(key, values[(values.size() - 1) / 2]);
  }
  return m;
}

PointSummary summarize_point(const SweepPoint& point) {
  PointSummary s;
  const auto checkpoints = list_checkpoints(point.run_dir + "/checkpoints");
  if (!checkpoints.empty()) s.checkpoint_step = checkpoints.back().first;
  s.record = read_point_record(point.run_dir);
  s.metrics = read_point_metrics(point.run_dir);
  if (s.checkpoint_step >= point.spec.train.steps) {
    s.state = PointState::done;
  } else if (s.record && s.record->state == "running" &&
             (s.record->host != this_host() || process_alive(s.record->pid))) {
    s.state = PointState::running;
  } else if (s.record && s.record->state == "failed") {
    s.state = PointState::failed;
    s.exit_code = s.record->exit_code;
  }
  return s;
}

std::vector<PointSummary> summarize_sweep(const SweepSpec& sweep) {
  std::vector<PointSummary> rows;
  for (const SweepPoint& point : sweep.points) rows.push_back(summarize_point(point));
  return rows;
}

std::string summary_csv(const SweepSpec& sweep, const std::vector<PointSummary>& rows) {
  const auto evals = columns_of(rows, &PointMetrics::val_metrics);
  const auto rates = columns_of(rows, &PointMetrics::throughput);
  std::string out = "index,status,exit_code,step,steps,train_loss,val_loss";
  for (const auto& name : evals) out += "," + csv_field(name);
  for (const auto& name : rates) out += "," + csv_field(name);
  out += ",train_s,wall_s,run_dir,overrides\n";
  const auto optional = [](const std::optional<double>& v) { return v ? exact(*v) : ""; };
  for (size_t i = 0; i < rows.size(); ++i) {
    const PointSummary& row = rows[i];
    const SweepPoint& point = sweep.points[i];
    out += fmt::format("{},{},{},{},{},{},{}", point.index, point_state_name(row.state),
                       row.state == PointState::failed ? std::to_string(row.exit_code) : "",
                       row.metrics.last_step, point.spec.train.steps,
                       optional(row.metrics.train_loss), optional(row.metrics.val_loss));
    for (const auto& name : evals) out += "," + optional(lookup(row.metrics.val_metrics, name));
    for (const auto& name : rates) out += "," + optional(lookup(row.metrics.throughput, name));
    out += fmt::format(",{:.3f},{},{},{}\n", row.metrics.train_s,
                       row.record ? fmt::format("{:.3f}", row.record->wall_s) : "",
                       csv_field(point.run_dir), csv_field(describe_overrides(point)));
  }
  return out;
}

std::string summary_table(const SweepSpec& sweep, const std::vector<PointSummary>& rows) {
  const auto evals = columns_of(rows, &PointMetrics::val_metrics);
  const auto rates = columns_of(rows, &PointMetrics::throughput);
  std::vector<std::vector<std::string>> cells;
  std::vector<std::string> header = {"index", "status", "step", "train_loss", "val_loss"};
  header.insert(header.end(), evals.begin(), evals.end());
  header.insert(header.end(), rates.begin(), rates.end());
  header.insert(header.end(), {"wall_s", "overrides"});
  cells.push_back(header);
  const auto rounded = [](const std::optional<double>& v, int digits) {
    return v ? fmt::format("{:.{}f}", *v, digits) : std::string("-");
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    const PointSummary& row = rows[i];
    const SweepPoint& point = sweep.points[i];
    std::vector<std::string> line = {
        std::to_string(point.index), status_text(row),
        fmt::format("{}/{}", row.metrics.last_step, point.spec.train.steps),
        rounded(row.metrics.train_loss, 4), rounded(row.metrics.val_loss, 4)};
    for (const auto& name : evals)
      line.push_back(rounded(lookup(row.metrics.val_metrics, name), 4));
    for (const auto& name : rates) line.push_back(rounded(lookup(row.metrics.throughput, name), 0));
    line.push_back(row.record ? fmt::format("{:.1f}", row.record->wall_s) : "-");
    line.push_back(describe_overrides(point));
    cells.push_back(std::move(line));
  }
  std::vector<size_t> widths(header.size(), 0);
  for (const auto& line : cells)
    for (size_t c = 0; c < line.size(); ++c) widths[c] = std::max(widths[c], line[c].size());
  std::string out;
  for (const auto& line : cells) {
    std::string text;
    for (size_t c = 0; c < line.size(); ++c)
      text += c + 1 == line.size() ? line[c] : fmt::format("{:<{}}  ", line[c], widths[c]);
    out += text + "\n";
  }
  return out;
}

std::string summary_counts(const std::vector<PointSummary>& rows) {
  int count[4] = {0, 0, 0, 0};
  for (const PointSummary& row : rows) ++count[static_cast<int>(row.state)];
  return fmt::format("{} point{}: {} done, {} failed, {} running, {} pending", rows.size(),
                     rows.size() == 1 ? "" : "s", count[static_cast<int>(PointState::done)],
                     count[static_cast<int>(PointState::failed)],
                     count[static_cast<int>(PointState::running)],
                     count[static_cast<int>(PointState::pending)]);
}

void write_file_atomically(const std::string& path, const std::string& text) {
  const std::string temp = fmt::format("{}.tmp-{}", path, getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out << text;
    out.close();
    if (!out) {
      std::error_code ignored;
      fs::remove(temp, ignored);
      throw RunError(path +
                     ": cannot write; check that the sweep's dir is writable and the "
                     "disk has space");
    }
  }
  std::error_code error;
  fs::rename(temp, path, error);
  if (error) throw RunError(path + ": cannot replace: " + error.message());
}

}  // namespace sg
