#include <chrono>

#include <fmt/format.h>

#include "cli/commands.h"
#include "launch/process_world.h"
#include "launch/stop_signal.h"
#include "train/trainer.h"
#include "util/error.h"

namespace sg {

int run_train_command(const std::string& job_path, const std::vector<std::string>& sets,
                      long stop_after) {
  // From the start: a stop signal during set-up stops the run after its first step (or, in a
  // parent that launches the ranks, is passed on to them) instead of ending it unsaved.
  install_stop_handlers();
  const JobSpec spec = load_job_or_quickstart(job_path, sets);
  const auto launcher = detect_launcher();
  if (!launcher && spec.devices.processes > 1) {
    // Started alone: launch the job's processes ourselves.
    return relaunch_job(spec.devices.processes, program_arguments());
  }
  auto world = open_world(launcher);
  report_crashes(rank_prefix());
  if (world->size() != spec.devices.processes) {
    // Every rank sees the same mismatch: rank 0 says so and all end normally with the usage
    // code (no MPI_Abort from every rank at once, which can crash mpirun itself).
    if (world->rank() == 0) {
      fmt::print(stderr,
                 "error: {}: the job asks for devices.processes {} but runs on {} process(es); "
                 "launch it with mpirun -np {} or set devices.processes: {}\n",
                 spec.source, spec.devices.processes, world->size(), spec.devices.processes,
                 world->size());
    }
    return kExitUsage;
  }
  const auto start = std::chrono::steady_clock::now();
  TrainOptions options;
  options.stop_after = stop_after;
  const TrainResult r = run_training(spec, *world, options);
  if (!r.stopped_by.empty()) {
    // Every rank: the launcher passes the code on. Saved already, so when the launcher ends
    // the slower ranks on seeing the first exit, they go quietly.
    settle_stop_handlers(kExitInterrupted);
    return kExitInterrupted;
  }
  if (world->rank() != 0) return 0;
  if (r.last_step == r.first_step) {
    fmt::print("nothing to do: the run in {} is already at step {} ({})\n", spec.log.dir,
               r.last_step,
               stop_after > 0 && stop_after < spec.train.steps ? "--stop-after"
                                                               : "train.steps");
    return 0;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string summary = fmt::format("done: {} steps in {:.1f} s, final train loss {:.4f}",
                                    r.last_step - r.first_step, seconds, r.final_loss);
  if (r.first_val_loss && r.last_val_loss) {
    summary += fmt::format(", val loss {:.4f} -> {:.4f}", *r.first_val_loss, *r.last_val_loss);
  } else if (r.last_val_loss) {
    summary += fmt::format(", val loss {:.4f}", *r.last_val_loss);
  }
  if (r.best_possible_val_loss) {
    summary += fmt::format(" (best possible {:.4f})", *r.best_possible_val_loss);
  }
  fmt::print("{}\nrun directory: {}\n", summary, spec.log.dir);
  return 0;
}

}  // namespace sg
