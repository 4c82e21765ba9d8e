#pragma once
// The run's metrics: metrics.jsonl in the run directory (one JSON object per line, floats
// printed in the shortest form that reads back to the same bits) and a human line per step on stdout.
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace sg {

struct StepMetrics {
  int64_t step = 0;  // 1-based: the number of optimizer steps done
  // The quantities the mathematics uses are float32 (the lr as AdamW receives it); timings are
  // doubles. Each is written in the shortest form that reads back to the same bits.
  float loss = 0, lr = 0, grad_norm = 0;
  double step_ms = 0, throughput = 0, mfu = 0;  // throughput: the family's units per second
  int64_t peak_mem_bytes = 0;
  float loss_scale = 0;  // fp16's loss scale for the step (written when > 0)
  bool skipped = false;  // fp16: the update was skipped (gradients overflowed)
};

class MetricsLog {
 public:
  // Opens <run_dir>/metrics.jsonl. When resuming from `resume_step` > 0, lines of steps after
  // it (written by a run that died past its last checkpoint) are dropped, so the file always
  // describes one consistent history.
  // unit: what throughput counts ("tokens", "images"): the key is <unit>_per_s.
  MetricsLog(const std::string& run_dir, int64_t resume_step, int64_t total_steps,
             std::string unit = "tokens");
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;

  void log_step(const StepMetrics& m, bool print);
  // best < 0: unknown. metrics: the family's evaluation metrics by name (val_top1, ...).
  void log_eval(int64_t step, float val_loss, double best_possible,
                const std::vector<std::pair<std::string, double>>& metrics = {});
  void log_message(const std::string& line);  // stdout only

 private:
  FILE* file_ = nullptr;
  std::string path_;
  int64_t total_steps_;
  std::string unit_;
};

// Peak resident memory of this process, in bytes.
int64_t peak_resident_bytes();

}  // namespace sg
