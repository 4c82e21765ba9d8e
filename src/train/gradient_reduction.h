#pragma once
// How a step's replica gradients (and losses) are summed over the data-parallel replicas, one
// of three ways (docs/architecture.md, "The virtual mesh"):
//   deterministic: each replica's gradient is computed into its own buffer and summed in the
//     canonical binary tree over virtual replicas (parallel/deterministic_reduce.h), losses in
//     replica order: bitwise the same on any process count;
//   bucketed: the step's last backward starts an all-reduce of each range of gradients as soon
//     as it is final (overlapping the rest of the backward); data parallelism over several
//     processes, not under ZeRO-2 (which reduce-scatters) and with one pipeline stage (a tied
//     tensor's gradient is completed between stages first);
//   otherwise the optimizer reduces (all-reduce, or ZeRO-2's reduce-scatter).
#include <vector>

#include "comm/communicator.h"
#include "parallel/deterministic_reduce.h"
#include "train/training_run.h"

namespace sg {

class GradientReduction {
 public:
  GradientReduction(const RunEnvironment& env, ProcessModel& model, const ReplicaPlan& plan);

  void begin_step();
  // Where local replica r's backward accumulates its gradient.
  float* replica_grads(int r);
  // The hook for replica r's last backward (empty unless bucketed and r is the last replica).
  OnReady on_ready(int r);
  // Replica r's backward is done; loss is its sum of micro-batch mean losses (0 on processes
  // that do not hold the loss).
  void replica_done(int r, double loss);
  // Completes the reduction where it happens before the optimizer and returns the sum of every
  // replica's micro-batch mean losses (over the world).
  double finish();
  // grads already hold the data group's total: the optimizer takes them as they are.
  bool reduced() const { return deterministic_ || bucketed_; }

 private:
  Backend& backend_;
  Communicator& world_;
  ProcessModel& model_;
  const ReplicaPlan& plan_;
  bool deterministic_, bucketed_;
  ReplicaTreeSum tree_sum_;
  Buffer replica_grads_;
  Buffer tree_scratch_;
  std::vector<double> replica_losses_;
  std::vector<CommHandle> buckets_;
  double loss_sum_ = 0;
};

}  // namespace sg
