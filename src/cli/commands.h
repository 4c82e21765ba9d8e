#pragma once
// The subcommands behind `singularity`. Each returns the process exit code; errors are thrown
// as SpecError (exit 2) or RunError (exit 1) and reported by main().
#include <cstdint>
#include <string>
#include <vector>

#include "config/job_spec.h"

namespace sg {

// Loads JOB (or, when empty, the embedded quickstart job) with overrides applied.
JobSpec load_job_or_quickstart(const std::string& job_path, const std::vector<std::string>& sets);

int run_train_command(const std::string& job_path, const std::vector<std::string>& sets,
                      long stop_after);
// as_json: the same figures as one JSON object on stdout. gpu (e.g. "h200"): also the step's
// estimated time on that GPU (plan_gpu.h). Exit 1 when the data is not ready.
int run_plan_command(const std::string& job_path, const std::vector<std::string>& sets,
                     bool as_json = false, const std::string& gpu = "");
// `sample`: exactly one of prompt and prompts_file; temperature 0 is greedy, top_k 0 and
// top_p 1 turn those filters off.
struct SampleArguments {
  std::string checkpoint, prompt, prompts_file, tokenizer_dir;
  int tokens = 32;
  double temperature = 1.0;
  int top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 1337;
};
int run_sample_command(const std::string& job_path, const std::vector<std::string>& sets,
                       const SampleArguments& args);
int run_info_command(bool measure_peak);
int run_eval_command(const std::string& job_path, const std::vector<std::string>& sets,
                     const std::string& checkpoint);

struct PrepareArguments {
  std::string kind, src, dst;  // kind: text | openwebtext | wikipedia | imagenet
  std::string tokenizer_dir, emit_text;
  int64_t shard_size = 100'000'000, val_tokens = -1;
  int threads = 0;
  bool force = false;
  bool pack = false, full_decode = false, strict = false;  // imagenet
  int pack_short_side = 256;
};
int run_prepare_command(const PrepareArguments& args);

// An HTML report (plots and a summary table) of run directories, or sweeps' points, to `output`.
int run_report_command(const std::vector<std::string>& run_dirs, const std::string& output);

// `export SOURCE DIR --format hf|torchvision` (export_command.cpp). SOURCE: a checkpoint (step_*
// or run directory) or a job file (its starting weights).
struct ExportArguments {
  std::string source, dir, format, tokenizer_dir;
  std::vector<std::string> sets;
};
int run_export_command(const ExportArguments& args);

// The embedded quickstart job (configs/quickstart.yaml compiled into the binary).
extern const char* const kQuickstartYaml;

}  // namespace sg
