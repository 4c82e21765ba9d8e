#pragma once
// Where each point of a sweep stands and what it reached, read from its run directory alone, so
// the summary is the same whoever ran the points (the sequential sweep, Slurm array tasks, or
// `singularity train` by hand):
//   done     its newest complete checkpoint is at train.steps (a re-run would do nothing);
//   running  <run_dir>/sweep_status.json says a sweep process is running it (and, when that
//            process is on this host, it is alive);
//   failed   the last attempt ended with a non-zero exit code;
//   pending  anything else: never started, interrupted, stopped early.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/sweep_spec.h"

namespace sg {

enum class PointState { pending, running, done, failed };
const char* point_state_name(PointState state);

// <run_dir>/sweep_status.json, written by the sweep when an attempt at a point starts and ends.
// Read back: none when the file is missing or not JSON at all (a torn write); each field
// checked (state one of the four, exit_code 0..255, wall_s >= 0, pid 0..2^31-1), a RunError
// naming the file and the field when one is wrong.
struct PointRecord {
  std::string state;  // running | done | failed | interrupted
  int exit_code = 0;  // the `train` command's; 128 + N when it was killed by signal N
  double wall_s = 0;  // wall time of all attempts so far
  std::string host;   // where the sweep process running the attempt is
  long pid = 0;       // that process
};
std::optional<PointRecord> read_point_record(const std::string& run_dir);
void write_point_record(const std::string& run_dir, const PointRecord& record);

// One line of a run directory's metrics.jsonl (see train/metrics_log.h): its step and its other
// values in the file's order; JSON null (a non-finite value) reads as NaN, true/false as 1/0.
struct MetricsLine {
  int64_t step = 0;
  std::vector<std::pair<std::string, double>> values;
  bool is_eval() const;  // an evaluation's line (val_loss, ...), not a step's
  std::optional<double> value(const std::string& key) const;
};
// Every well-formed line of <run_dir>/metrics.jsonl (a torn last line is left out); empty when
// there is no such file.
std::vector<MetricsLine> read_metrics_lines(const std::string& run_dir);

// The end of a run directory's metrics.jsonl (see train/metrics_log.h).
struct PointMetrics {
  int64_t last_step = 0;
  std::optional<double> train_loss;  // the last step's (NaN when it was not finite)
  std::optional<double> val_loss;    // the last evaluation's
  std::vector<std::pair<std::string, double>> val_metrics;  // the last evaluation's others
  // "<unit>_per_s" -> its median over the steps (the lower middle value, so it is one of them)
  std::vector<std::pair<std::string, double>> throughput;
  double train_s = 0;  // the steps' times added up
};
PointMetrics read_point_metrics(const std::string& run_dir);

struct PointSummary {
  PointState state = PointState::pending;
  int exit_code = 0;            // failed: the last attempt's
  int64_t checkpoint_step = 0;  // the newest complete checkpoint's step
  std::optional<PointRecord> record;
  PointMetrics metrics;
};
PointSummary summarize_point(const SweepPoint& point);
std::vector<PointSummary> summarize_sweep(const SweepSpec& sweep);

// One header line and one row per point: index, status, exit_code, step, steps, train_loss,
// val_loss, each evaluation metric, each throughput, train_s, wall_s, run_dir, overrides.
// Metrics are written as metrics.jsonl has them (shortest exact form).
std::string summary_csv(const SweepSpec& sweep, const std::vector<PointSummary>& rows);
// The same, rounded, as an aligned table for the terminal.
std::string summary_table(const SweepSpec& sweep, const std::vector<PointSummary>& rows);
// "3 points: 2 done, 1 failed, 0 running, 0 pending"
std::string summary_counts(const std::vector<PointSummary>& rows);

// Writes `text` to `path` through a temporary file and a rename, so concurrent writers (array
// tasks) and readers never see half a file. RunError naming the path when it cannot.
void write_file_atomically(const std::string& path, const std::string& text);

}  // namespace sg
