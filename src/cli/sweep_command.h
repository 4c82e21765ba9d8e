#pragma once
// `singularity sweep SWEEP.yaml`: run a sweep's points one after another, one point
// (--index, what a Slurm array task runs), list them (--dry-run), summarise them (--summary) or
// write and submit an sbatch array script (--slurm). See sweep_spec.h for the file.
#include <string>
#include <vector>

namespace sg {

struct SweepArguments {
  std::string file;
  bool dry_run = false;
  bool summary = false;
  int index = -1;  // >= 0: run only this point
  bool slurm = false;
  bool no_submit = false;  // --slurm: write the script only
  int max_parallel = 4;    // --slurm: array tasks running at once
  std::vector<std::string> sbatch_args;
};

// Exit code: 0 when every point run is done; SpecError (exit 2) before anything runs when the
// sweep file or any point's job is bad; RunError (exit 1) after the summary when a point
// failed; kExitInterrupted (3, launch/stop_signal.h) when a signal or a point's
// train.time_limit stopped it with points unfinished (running the sweep again resumes them).
int run_sweep_command(const SweepArguments& args);

}  // namespace sg
