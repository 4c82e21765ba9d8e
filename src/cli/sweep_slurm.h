#pragma once
// `singularity sweep SWEEP.yaml --slurm`: an sbatch array script with one task per point. Each
// task runs `singularity sweep SWEEP.yaml --index $SLURM_ARRAY_TASK_ID`, which skips a finished
// point and resumes an unfinished one, so a requeued task picks up where it stopped.
#include <optional>
#include <string>
#include <vector>

#include "cli/sweep_spec.h"

namespace sg {

struct SlurmScriptOptions {
  int max_parallel = 4;                  // tasks running at once: --array=0-N%K
  std::vector<std::string> sbatch_args;  // extra options, each written as "#SBATCH <arg>"
  std::string executable;                // this binary, absolute
  std::string sweep_file;                // the sweep file, absolute
  std::string working_dir;  // absolute; the tasks run here, so dir: and base: resolve as now
};

// The script's text. SpecError for an --sbatch-arg that is not an sbatch option.
std::string sbatch_script(const SweepSpec& sweep, const SlurmScriptOptions& options);

// <dir>/sweep.sbatch and <dir>/logs/ (absolute, under options.working_dir when dir is relative).
std::string sbatch_script_path(const SweepSpec& sweep, const SlurmScriptOptions& options);
std::string slurm_log_dir(const SweepSpec& sweep, const SlurmScriptOptions& options);

// The path of an executable `program` on $PATH, if any.
std::optional<std::string> find_on_path(const std::string& program);

// Runs `sbatch --parsable SCRIPT` and returns the job id it prints. RunError with sbatch's own
// message and the command to retry when it fails.
std::string submit_sbatch(const std::string& sbatch, const std::string& script);

}  // namespace sg
