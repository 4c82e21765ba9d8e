#include "model/parameter_layout.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "tensor/tensor.h"
#include "util/error.h"
#include "util/rng.h"

namespace sg {
namespace {

size_t numel_of(const std::vector<int64_t>& dims) { return static_cast<size_t>(element_count(dims)); }

std::vector<int64_t> local_shape(std::vector<int64_t> dims, TensorSplit split, int T) {
  if (split == TensorSplit::kRows || split == TensorSplit::kQkvRows) dims[0] /= T;
  if (split == TensorSplit::kCols) dims[1] /= T;
  return dims;
}

// Rows or columns a split divides must divide by T (q, k and v blocks each).
void check_split(const TensorSpec& t, int T) {
  if (T == 1 || t.split == TensorSplit::kWhole) return;
  const bool cols = t.split == TensorSplit::kCols;
  if (t.shape.size() < (cols ? 2u : 1u)) throw RunError("tensor " + t.name + " cannot be split");
  const int64_t dim = cols ? t.shape[1] : t.shape[0];
  const int64_t unit = t.split == TensorSplit::kQkvRows ? 3 * T : T;
  if (dim % unit != 0) {
    throw SpecError("tensor " + t.name + " " + shape_text(t.shape) + " does not split " +
                    std::to_string(T) + "-way; check parallel.tensor against the model's sizes");
  }
}

}  // namespace

std::vector<int> balance_stages(const std::vector<double>& costs, double first_cost,
                                double last_cost, int stages) {
  // best[s][l]: least sum of squares placing blocks [0, l) on stages [0, s); cut[s][l] the start
  // of stage s-1 in that placement. O(stages * blocks^2), trivial for real models.
  const double kInf = std::numeric_limits<double>::infinity();
  const size_t L = costs.size(), S = static_cast<size_t>(stages);
  std::vector<double> prefix(L + 1, 0.0);
  for (size_t i = 0; i < L; ++i) prefix[i + 1] = prefix[i] + costs[i];
  std::vector<std::vector<double>> best(S + 1, std::vector<double>(L + 1, kInf));
  std::vector<std::vector<int>> cut(S + 1, std::vector<int>(L + 1, 0));
  best[0][0] = 0;
  for (size_t s = 1; s <= S; ++s) {
    for (size_t l = s; l <= L; ++l) {
      for (size_t from = s - 1; from < l; ++from) {  // stage s-1 runs blocks [from, l)
        if (best[s - 1][from] == kInf) continue;
        double cost = prefix[l] - prefix[from];
        if (s == 1) cost += first_cost;
        if (s == S) cost += last_cost;
        const double total = best[s - 1][from] + cost * cost;
        if (total < best[s][l]) {  // strict: ties keep the earlier cut (fewer blocks first)
          best[s][l] = total;
          cut[s][l] = static_cast<int>(from);
        }
      }
    }
  }
  std::vector<int> firsts(S + 1);
  firsts[S] = static_cast<int>(L);
  for (size_t s = S, l = L; s >= 1; --s) {
    firsts[s - 1] = cut[s][l];
    l = static_cast<size_t>(cut[s][l]);
  }
  return firsts;
}

std::vector<int> balance_stages(int blocks, double head_cost, int stages) {
  return balance_stages(std::vector<double>(static_cast<size_t>(blocks), 1.0), 0.0, head_cost,
                        stages);
}

std::pair<int, int> stage_blocks(const ModelDescription& model, int stage, int stages) {
  std::vector<double> costs = model.block_costs;
  if (costs.empty()) costs.assign(static_cast<size_t>(model.blocks), 1.0);
  const std::vector<int> firsts = balance_stages(costs, model.first_cost, model.last_cost, stages);
  const auto s = static_cast<size_t>(stage);
  return {firsts[s], firsts[s + 1] - firsts[s]};
}

ParameterLayout::ParameterLayout(ModelDescription model, const ModelShard& shard)
    : model_(std::move(model)), shard_(shard) {
  const int T = shard.tensors, S = shard.stages;
  if (T < 1 || S < 1 || shard.tensor_rank < 0 || shard.tensor_rank >= T || shard.stage < 0 ||
      shard.stage >= S) {
    throw RunError("invalid model shard");
  }
  if (S > std::max(1, model_.blocks)) {
    throw SpecError("the model has " + std::to_string(model_.blocks) + " blocks and cannot be "
                    "split into " + std::to_string(S) + " pipeline stages; lower "
                    "parallel.pipeline");
  }
  if (!model_.block_costs.empty() && model_.block_costs.size() != static_cast<size_t>(model_.blocks)) {
    throw RunError("model description: block_costs does not have one entry per block");
  }
  std::tie(first_block_, blocks_) = stage_blocks(model_, shard.stage, S);
  const auto& whole = model_.tensors;
  std::vector<size_t> global_offsets(whole.size());
  size_t params_at = 0, buffers_at = 0;
  for (size_t i = 0; i < whole.size(); ++i) {
    check_split(whole[i], T);
    size_t& at = whole[i].trainable ? params_at : buffers_at;
    global_offsets[i] = at;
    at += numel_of(whole[i].shape);
  }
  auto add = [&](size_t i, bool tied_copy) {
    const TensorSpec& w = whole[i];
    ParamTensor t;
    t.name = w.name;
    t.shape = local_shape(w.shape, w.split, T);
    t.numel = numel_of(t.shape);
    t.decay = w.decay;
    t.block = w.block;
    t.global_shape = w.shape;
    t.global_offset = global_offsets[i];
    t.global_index = i;
    t.split = w.split;
    t.tied_copy = tied_copy;
    auto& list = w.trainable ? tensors_ : buffers_;
    size_t& total = w.trainable ? total_ : buffer_total_;
    t.offset = total;
    total += t.numel;
    list.push_back(std::move(t));
  };
  const int end_block = first_block_ + blocks_;
  if (first_stage()) {
    for (size_t i = 0; i < whole.size(); ++i) {
      if (whole[i].block < 0) add(i, false);
    }
  }
  first_range_ = {0, tensors_.size()};
  for (int b = first_block_; b < end_block; ++b) {
    const size_t begin = tensors_.size();
    for (size_t i = 0; i < whole.size(); ++i) {
      if (whole[i].block == b) add(i, false);
    }
    block_ranges_.emplace_back(begin, tensors_.size() - begin);
  }
  const size_t last_begin = tensors_.size();
  if (last_stage()) {
    for (size_t i = 0; i < whole.size(); ++i) {
      if (whole[i].block >= model_.blocks) add(i, false);
    }
    if (!first_stage()) {  // the tied tensors' own copies
      for (size_t i = 0; i < whole.size(); ++i) {
        if (whole[i].block < 0 && whole[i].tied_to_last) add(i, true);
      }
    }
  }
  last_range_ = {last_begin, tensors_.size() - last_begin};
}

const ParamTensor* ParameterLayout::find_if(const std::string& name) const {
  for (const auto* list : {&tensors_, &buffers_}) {
    for (const auto& t : *list) {
      if (t.name == name) return &t;
    }
  }
  return nullptr;
}

const ParamTensor& ParameterLayout::find(const std::string& name) const {
  if (const ParamTensor* t = find_if(name)) return *t;
  throw RunError("no tensor named '" + name + "' in the model");
}

void for_each_run(const ParamTensor& t, const ModelShard& shard,
                  const std::function<void(size_t, size_t, size_t)>& fn) {
  const size_t T = static_cast<size_t>(shard.tensors), r = static_cast<size_t>(shard.tensor_rank);
  const size_t rows = static_cast<size_t>(t.global_shape.empty() ? 1 : t.global_shape[0]);
  const size_t width = t.global_shape.size() > 1 ? static_cast<size_t>(t.global_shape[1]) : 1;
  switch (T == 1 ? TensorSplit::kWhole : t.split) {
    case TensorSplit::kWhole:
      fn(0, 0, t.numel);
      break;
    case TensorSplit::kRows:
      fn(0, r * t.numel, t.numel);
      break;
    case TensorSplit::kQkvRows: {  // three blocks of rows: q, k, v
      const size_t part = rows / 3, local = part / T;
      for (size_t k = 0; k < 3; ++k) fn(k * local * width, (k * part + r * local) * width, local * width);
      break;
    }
    case TensorSplit::kCols: {
      const size_t local = width / T;
      for (size_t i = 0; i < rows; ++i) fn(i * local, i * width + r * local, local);
      break;
    }
  }
}

void slice_tensor(const ParamTensor& t, const ModelShard& shard, const float* whole, float* local) {
  for_each_run(t, shard, [&](size_t l, size_t g, size_t n) {
    std::memcpy(local + t.offset + l, whole + g, n * sizeof(float));
  });
}

void slice_from_global(const ParameterLayout& layout, const float* global, float* local) {
  for (const ParamTensor& t : layout.tensors()) {
    slice_tensor(t, layout.shard(), global + t.global_offset, local);
  }
}

bool owns_tensor(const ParamTensor& t, const ModelShard& shard) {
  if (t.tied_copy) return false;
  return t.split != TensorSplit::kWhole || shard.tensor_rank == 0 || shard.tensors == 1;
}

std::vector<std::pair<size_t, size_t>> owned_ranges(const ParameterLayout& layout) {
  std::vector<std::pair<size_t, size_t>> out;
  for (const ParamTensor& t : layout.tensors()) {
    if (!owns_tensor(t, layout.shard())) continue;
    if (!out.empty() && out.back().second == t.offset) {
      out.back().second = t.offset + t.numel;
    } else {
      out.emplace_back(t.offset, t.offset + t.numel);
    }
  }
  return out;
}

void initialize_tensors(
    float* params, float* buffers, const ParameterLayout& layout, uint64_t seed,
    const std::function<void(const TensorSpec&, float* whole, size_t n, uint64_t stream)>& fn) {
  std::vector<float> whole;
  for (const auto* list : {&layout.tensors(), &layout.buffers()}) {
    float* base = list == &layout.tensors() ? params : buffers;
    for (const ParamTensor& t : *list) {
      uint64_t tensor_seed = seed;
      uint64_t stream = 0;
      for (size_t i = 0; i <= t.global_index; ++i) stream = splitmix64(tensor_seed);
      const size_t n_whole = numel_of(t.global_shape);
      const bool in_place = n_whole == t.numel;
      if (!in_place) whole.resize(n_whole);
      float* p = in_place ? base + t.offset : whole.data();
      fn(layout.model().tensors[t.global_index], p, n_whole, stream);
      if (!in_place) slice_tensor(t, layout.shard(), whole.data(), base);
    }
  }
}

}  // namespace sg
