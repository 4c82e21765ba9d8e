#include "parallel/data_parallel_optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "optim/muon.h"
#include "parallel/tensor_group.h"
#include "util/error.h"

namespace sg {
namespace {

size_t shard_size_for(size_t total, int zero, int group_size) {
  if (zero == 0) return total;  // one "shard" per process: the whole buffer, no padding
  constexpr size_t kAlign = 16;  // 64-byte aligned shard starts
  const size_t per = (total + static_cast<size_t>(group_size) - 1) / static_cast<size_t>(group_size);
  return (per + kAlign - 1) / kAlign * kAlign;
}

size_t shard_begin(int zero, size_t shard_size, int rank) {
  return zero == 0 ? 0 : shard_size * static_cast<size_t>(rank);
}

// The optimizer of this process's shard; Muon gathers whole matrices over the ZeRO group (when
// the state is sharded) and the tensor group.
std::unique_ptr<Optimizer> shard_optimizer(const OptimSpec& spec, const ParameterLayout& layout,
                                           int zero, size_t shard_size, Communicator& group,
                                           Backend& backend, Communicator* tensor_group) {
  const size_t begin = shard_begin(zero, shard_size, group.rank());
  const OptimizerGroups groups{zero > 0 ? &group : nullptr, shard_size, tensor_group};
  return make_optimizer(spec, layout, begin, begin + shard_size, backend, &groups);
}

}  // namespace

DataParallelOptimizer::DataParallelOptimizer(const ParameterLayout& layout, const OptimSpec& spec,
                                             int zero, Communicator& group,
                                             Communicator* model_group, Backend& backend,
                                             Communicator* host_group, Communicator* tensor_group)
    : layout_(layout),
      zero_(zero),
      group_(group),
      host_group_(host_group != nullptr ? *host_group : group),
      model_group_(model_group),
      backend_(backend),
      norm_ranges_(owned_ranges(layout)),
      shard_size_(shard_size_for(layout.total(), zero, group.size())),
      optimizer_(shard_optimizer(spec, layout, zero, shard_size_, group, backend, tensor_group)) {
  if (zero < 0 || zero > 2) throw SpecError("parallel.zero must be 0, 1 or 2");
  if (zero == 2) shard_scratch_ = Buffer(backend, shard_size_ * sizeof(float));
}

double DataParallelOptimizer::sum_of_squares(const float* grads, size_t begin, size_t end) const {
  double sum = 0;
  for (const auto& [b, e] : norm_ranges_) {
    const size_t lo = std::max(b, begin), hi = std::min(e, end);
    if (lo < hi) sum += backend_.sum_of_squares(grads + lo, static_cast<long>(hi - lo));
  }
  return sum;
}

double DataParallelOptimizer::over_model(double sum_squares) {
  return model_group_ != nullptr ? ordered_sum(sum_squares, *model_group_) : sum_squares;
}

bool DataParallelOptimizer::update(float* params, float* grads, double norm, float grad_scale,
                                   double lr, int step) {
  if (!std::isfinite(norm)) return false;  // every process has the same norm: all skip
  if (grad_scale != 1.0f) {
    const size_t begin = optimizer_->begin();
    backend_.scale(grads + begin, 1.0f / grad_scale, static_cast<long>(optimizer_->end() - begin));
  }
  optimizer_->update_range(params, grads, norm, lr, step);
  if (zero_ > 0 && group_.size() > 1) group_.all_gather_in_place(params, shard_size_);
  return true;
}

float DataParallelOptimizer::step(float* params, float* grads, double lr, int step,
                                  float grad_scale, bool* applied) {
  const size_t begin = shard_begin(zero_, shard_size_, group_.rank());
  if (zero_ == 2 && group_.size() > 1) {
    float* scratch = shard_scratch_.as<float>();
    group_.reduce_scatter_sum(scratch, grads, shard_size_);
    backend_.copy(grads + begin, scratch, shard_size_ * sizeof(float));
  } else if (group_.size() > 1) {
    group_.all_reduce_sum(grads, zero_ == 0 ? layout_.total() : padded_size());
  }
  // Global norm: this process's range, then the sum over the group's ranges.
  double sum_squares = sum_of_squares(grads, optimizer_->begin(), optimizer_->end());
  if (zero_ > 0) host_group_.all_reduce_sum(&sum_squares, 1);
  const double norm = std::sqrt(over_model(sum_squares)) / grad_scale;
  const bool done = update(params, grads, norm, grad_scale, lr, step);
  if (applied != nullptr) *applied = done;
  return static_cast<float>(norm);
}

float DataParallelOptimizer::step_reduced(float* params, float* grads, double lr, int step,
                                          float grad_scale, bool* applied) {
  const double norm = std::sqrt(over_model(sum_of_squares(grads, 0, layout_.total()))) / grad_scale;
  const bool done = update(params, grads, norm, grad_scale, lr, step);
  if (applied != nullptr) *applied = done;
  return static_cast<float>(norm);
}

std::vector<std::vector<float>> DataParallelOptimizer::gather_state() {
  const size_t total = layout_.total();
  const size_t begin = optimizer_->begin(), owned = optimizer_->end() - optimizer_->begin();
  std::vector<std::vector<float>> out;
  std::vector<float> buffer(zero_ == 0 ? 0 : padded_size(), 0.0f);
  for (size_t i = 0; i < optimizer_->state_names().size(); ++i) {
    const float* state = optimizer_->state(i);
    if (zero_ == 0) {
      out.emplace_back(total);
      backend_.copy_to_host(out.back().data(), state, total * sizeof(float));
      continue;
    }
    std::fill(buffer.begin(), buffer.end(), 0.0f);
    backend_.copy_to_host(buffer.data() + begin, state, owned * sizeof(float));
    host_group_.all_gather_in_place(buffer.data(), shard_size_);
    out.emplace_back(buffer.begin(), buffer.begin() + static_cast<long>(total));
  }
  return out;
}

void DataParallelOptimizer::load_state(const std::vector<const float*>& whole) {
  if (whole.size() != optimizer_->state_names().size()) {
    throw RunError("optimizer state: " + std::to_string(whole.size()) + " tensors given, " +
                   optimizer_->name() + " has " +
                   std::to_string(optimizer_->state_names().size()));
  }
  const size_t begin = optimizer_->begin(), owned = optimizer_->end() - optimizer_->begin();
  for (size_t i = 0; i < whole.size(); ++i) {
    backend_.copy_from_host(optimizer_->state(i), whole[i] + begin, owned * sizeof(float));
  }
}

}  // namespace sg
