#pragma once
// One optimizer step of a job on the cost backend (backend/cost_backend.h), for `plan --gpu`:
// the ops the trainer would issue on one GPU that holds the whole model, counted, not run.
#include <cstddef>
#include <vector>

#include "backend/cost_backend.h"

namespace sg {

struct JobSpec;

struct CountedStep {
  std::vector<OpCost> ops;  // the step's ops, one entry per op name
  int micro_batches = 0;    // of train.micro_batch samples each
  size_t device_bytes = 0;  // parameters, gradients, optimizer state, activations, scratch-free
};

// `micro_batches` forwards and backwards of train.micro_batch samples (gradient accumulation,
// as one data-parallel process's share of the global batch), then the gradient's norm and the
// optimizer; the stage as the CUDA backend builds it (its attention storage, train.recompute,
// train.precision). The model is not split: tensor and pipeline settings are the caller's
// business.
CountedStep count_training_step(const JobSpec& spec, int micro_batches);

}  // namespace sg
