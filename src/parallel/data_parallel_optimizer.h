#pragma once
// The optimizer step of a data-parallel group (docs/architecture.md, "The virtual mesh"): sums the
// gradients of every replica in the group, clips by the global norm and applies the optimizer (any
// Optimizer).
//   zero 0: all-reduce the gradients; every process updates every parameter.
//   zero 1: all-reduce the gradients; each process keeps the optimizer state for one contiguous
//           shard of the flat buffer, updates that shard, and the shards are all-gathered.
//   zero 2: as 1, but the gradients are reduce-scattered, so each process receives only the
//           summed gradient of its own shard (half the traffic of an all-reduce).
// Buffers are padded to a multiple of the group size so shards are equal.
// Under tensor and pipeline parallelism the layout is this process's shard and `group` the
// processes holding the same shard; the gradient norm then also sums over `model_group` (the
// shards of one replica), counting each element once (owned_ranges in parameter_layout.h).
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"
#include "config/job_spec.h"
#include "model/parameter_layout.h"
#include "optim/optimizer.h"

namespace sg {

class DataParallelOptimizer {
 public:
  // group carries `backend`'s memory (gradients, parameters); host_group (default: group) is
  // the same processes over host memory (norms, checkpointed state), as is model_group.
  // tensor_group: the tensor-parallel processes (Muon gathers a split matrix over them).
  DataParallelOptimizer(const ParameterLayout& layout, const OptimSpec& spec, int zero,
                        Communicator& group, Communicator* model_group = nullptr,
                        Backend& backend = cpu_backend(), Communicator* host_group = nullptr,
                        Communicator* tensor_group = nullptr);

  // Elements the parameter and gradient buffers must hold (>= layout.total()).
  size_t padded_size() const {
    return zero_ == 0 ? layout_.total() : shard_size_ * static_cast<size_t>(group_.size());
  }
  size_t shard_size() const { return shard_size_; }

  // grads: this process's sum over its replicas, multiplied by grad_scale (fp16's loss scale, a
  // power of two; 1 otherwise). Returns the global gradient norm before clipping, of the
  // unscaled gradients. When that norm is not finite (the gradients overflowed) nothing is
  // updated and *applied (when given) is false.
  float step(float* params, float* grads, double lr, int step, float grad_scale = 1.0f,
             bool* applied = nullptr);

  // Deterministic mode and overlapped reductions: grads already hold the group's total on every
  // process. The norm is taken over the whole buffer, so its bits do not depend on the shards.
  // Otherwise as step().
  float step_reduced(float* params, float* grads, double lr, int step, float grad_scale = 1.0f,
                     bool* applied = nullptr);

  const Optimizer& optimizer() const { return *optimizer_; }
  // The optimizer's whole state tensors (layout.total() elements each, in state_names() order,
  // host memory), gathered from the shards under ZeRO. Collective: every process of the group
  // must call it.
  std::vector<std::vector<float>> gather_state();
  // Takes this process's part of whole state tensors (layout.total() elements each, host).
  void load_state(const std::vector<const float*>& whole);

  // Bytes of optimizer state this process holds.
  size_t optimizer_state_bytes() const {
    return optimizer_->state_names().size() * sizeof(float) *
           (optimizer_->end() - optimizer_->begin());
  }

 private:
  // Sum of squares of grads over the owned ranges within [begin, end), in a fixed order.
  double sum_of_squares(const float* grads, size_t begin, size_t end) const;
  double over_model(double sum_squares);
  // Unscales and applies the update once the norm is known; false (nothing done) when the
  // norm is not finite.
  bool update(float* params, float* grads, double norm, float grad_scale, double lr, int step);
  const ParameterLayout& layout_;
  int zero_;
  Communicator& group_;
  Communicator& host_group_;
  Communicator* model_group_;
  Backend& backend_;
  std::vector<std::pair<size_t, size_t>> norm_ranges_;
  size_t shard_size_;
  std::unique_ptr<Optimizer> optimizer_;
  Buffer shard_scratch_;
};

}  // namespace sg
