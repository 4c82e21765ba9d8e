#pragma once
// Helpers for training-loop tests: a tiny synthetic job in a fresh temporary run directory.
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "config/job_spec.h"
#include "config/load_job_spec.h"
#include "train/trainer.h"
#include "temp_dir.h"
#include "test_files.h"

namespace sg::testing {

inline const char* kTinyJob = R"(
name: tiny
seed: 42
model: {arch: gpt2, n_layer: 2, n_head: 2, n_embd: 32, context: 16, vocab: 64}
data: {dataset: synthetic, synthetic_train_tokens: 20000, synthetic_val_tokens: 2000}
optim: {lr: 1.0e-2, min_lr: 1.0e-3, warmup_steps: 3, decay: cosine, weight_decay: 0.1, grad_clip: 1.0}
train: {steps: 20, global_batch: 8, micro_batch: 4}
eval: {every: 5, steps: 2}
devices: {backend: cpu, processes: 1, threads: 2}
checkpoint: {every: 10, keep: 3, resume: auto}
log: {every: 1}
)";

inline JobSpec tiny_job(const std::string& dir, std::vector<std::string> sets = {}) {
  sets.push_back("log.dir=" + dir);
  return parse_job_spec(kTinyJob, "<tiny job>", sets);
}

using sg::test::read_file;

// Options for a test run: no per-step lines, optionally stopping early.
inline TrainOptions quiet_options(int64_t stop_after = 0) {
  TrainOptions options;
  options.quiet = true;
  options.stop_after = stop_after;
  return options;
}

// The "loss" lines of metrics.jsonl, as written (so comparisons are bitwise).
inline std::vector<std::string> step_lines(const std::string& run_dir) {
  std::istringstream in(read_file(run_dir + "/metrics.jsonl"));
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("\"loss\"") == std::string::npos) continue;
    // Keep step, loss, lr, grad_norm; drop timings, which differ run to run.
    out.push_back(line.substr(0, line.find(", \"step_ms\"")));
  }
  return out;
}

}  // namespace sg::testing
