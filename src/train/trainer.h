#pragma once
// The training loop of one process: data, model, optimizer, evaluation, metrics, checkpoints.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "comm/communicator.h"
#include "config/job_spec.h"

namespace sg {

class Backend;

struct TrainOptions {
  // Stop (after checkpointing) once this many optimizer steps are done, without changing the
  // schedule, which is always defined by train.steps. Used for time-limited allocations and by
  // the resume tests. 0 = run to train.steps.
  int64_t stop_after = 0;
  bool quiet = false;  // no per-step lines on stdout
  // The backend to train on instead of devices.backend's (tests: a guarded host backend that
  // behaves as a device). Not owned.
  Backend* backend = nullptr;
};

struct TrainResult {
  int64_t first_step = 0;  // steps already done when this run started (resume)
  int64_t last_step = 0;   // steps done when it ended
  double final_loss = 0;
  std::optional<double> first_val_loss, last_val_loss, best_possible_val_loss;
  std::vector<std::pair<std::string, double>> val_metrics;  // of the last evaluation
  // Why the run stopped before train.steps after checkpointing ("SIGTERM", "train.time_limit");
  // empty when it ran to the end (or to --stop-after).
  std::string stopped_by;
};

// Trains on the processes of `world` (one per physical device; devices.processes of them).
// Each process runs its share of the virtual data-parallel replicas one after another and the
// gradients are summed across processes. Rank 0 writes the run directory.
TrainResult run_training(const JobSpec& spec, Communicator& world, const TrainOptions& options);
// One process.
TrainResult run_training(const JobSpec& spec, const TrainOptions& options = {});

// Threads this process uses: devices.threads, or cores / processes (at least 1) for auto.
int resolve_threads(const JobSpec& spec);

}  // namespace sg
