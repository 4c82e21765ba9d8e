#pragma once
// The run's metrics: metrics.jsonl in the run directory (one JSON object per line, floats
// printed in the shortest form that reads back to the same bits), with log.tensorboard the same
// values as TensorBoard scalars under <run_dir>/tb/, and a human line per step on stdout.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace sg {

class TensorBoardWriter;

struct StepMetrics {
  int64_t step = 0;  // 1-based: the number of optimizer steps done
  // The quantities the mathematics uses are float32 (the lr as AdamW receives it); timings are
  // doubles. Each is written in the shortest form that reads back to the same bits.
  float loss = 0, lr = 0, grad_norm = 0;
  double step_ms = 0, throughput = 0, mfu = 0;  // throughput: the family's units per second
  int64_t peak_mem_bytes = 0;
  float loss_scale = 0;  // fp16's loss scale for the step (written when > 0)
  // The update was skipped: fp16 gradients overflowed (the scale halves), or the loss or the
  // gradients were not finite. skipped_steps counts the run's skipped steps so far.
  bool skipped = false;
  bool overflow = false;  // fp16 overflow, an expected event, not a fault
  int64_t skipped_steps = 0;
  int skipped_in_row = 0, max_skipped_in_row = 0;
};

class MetricsLog {
 public:
  // Opens <run_dir>/metrics.jsonl. When resuming from `resume_step` > 0, lines of steps after
  // it (written by a run that died past its last checkpoint) are dropped, so the file always
  // describes one consistent history.
  // unit: what throughput counts ("tokens", "images"): the key is <unit>_per_s.
  // tensorboard: also write every line's values to a new event file in <run_dir>/tb/
  // (train/tensorboard_writer.h), tag = key.
  MetricsLog(const std::string& run_dir, int64_t resume_step, int64_t total_steps,
             std::string unit = "tokens", bool tensorboard = false);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void log_step(const StepMetrics& m, bool print);
  // best < 0: unknown. metrics: the family's evaluation metrics by name (val_top1, ...).
  void log_eval(int64_t step, float val_loss, double best_possible,
                const std::vector<std::pair<std::string, double>>& metrics = {});
  void log_message(const std::string& line);  // stdout only

 private:
  // A line's values in order: its key, its JSON text and its value.
  struct Field {
    std::string key, json;
    double value;
  };
  void write_line(int64_t step, const std::vector<Field>& fields);

  FILE* file_ = nullptr;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::string path_;
  int64_t total_steps_;
  std::string unit_;
};

// Peak resident memory of this process, in bytes.
int64_t peak_resident_bytes();

}  // namespace sg
