#include "model/parameter_layout.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "util/error.h"
#include "util/rng.h"

namespace sg {
namespace {

struct WholeTensor {
  std::string name;
  std::vector<int64_t> shape;
  TensorSplit split;
  int layer;  // -1 for embeddings and ln_f
};

// The unsharded model in flat-buffer order.
std::vector<WholeTensor> whole_model(const GPT2Shape& s) {
  const int64_t C = s.n_embd;
  using S = TensorSplit;
  std::vector<WholeTensor> out;
  out.push_back({"wte", {s.padded_vocab, C}, S::kRows, -1});
  out.push_back({"wpe", {s.context, C}, S::kWhole, -1});
  for (int l = 0; l < s.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    out.push_back({p + "ln_1.weight", {C}, S::kWhole, l});
    out.push_back({p + "ln_1.bias", {C}, S::kWhole, l});
    out.push_back({p + "attn.c_attn.weight", {3 * C, C}, S::kQkvRows, l});
    out.push_back({p + "attn.c_attn.bias", {3 * C}, S::kQkvRows, l});
    out.push_back({p + "attn.c_proj.weight", {C, C}, S::kCols, l});
    out.push_back({p + "attn.c_proj.bias", {C}, S::kWhole, l});
    out.push_back({p + "ln_2.weight", {C}, S::kWhole, l});
    out.push_back({p + "ln_2.bias", {C}, S::kWhole, l});
    out.push_back({p + "mlp.c_fc.weight", {4 * C, C}, S::kRows, l});
    out.push_back({p + "mlp.c_fc.bias", {4 * C}, S::kRows, l});
    out.push_back({p + "mlp.c_proj.weight", {C, 4 * C}, S::kCols, l});
    out.push_back({p + "mlp.c_proj.bias", {C}, S::kWhole, l});
  }
  out.push_back({"ln_f.weight", {C}, S::kWhole, -1});
  out.push_back({"ln_f.bias", {C}, S::kWhole, -1});
  return out;
}

size_t numel_of(const std::vector<int64_t>& dims) {
  size_t n = 1;
  for (int64_t d : dims) n *= static_cast<size_t>(d);
  return n;
}

std::vector<int64_t> local_shape(std::vector<int64_t> dims, TensorSplit split, int T) {
  if (split == TensorSplit::kRows || split == TensorSplit::kQkvRows) dims[0] /= T;
  if (split == TensorSplit::kCols) dims[1] /= T;
  return dims;
}

}  // namespace

std::vector<int> balance_stages(int n_layer, double head_cost, int stages) {
  // best[s][l]: least sum of squares placing blocks [0, l) on stages [0, s); cut[s][l] the start
  // of stage s-1 in that placement. O(stages * n_layer^2), trivial for real models.
  const double kInf = std::numeric_limits<double>::infinity();
  const size_t L = static_cast<size_t>(n_layer), S = static_cast<size_t>(stages);
  std::vector<std::vector<double>> best(S + 1, std::vector<double>(L + 1, kInf));
  std::vector<std::vector<int>> cut(S + 1, std::vector<int>(L + 1, 0));
  best[0][0] = 0;
  for (size_t s = 1; s <= S; ++s) {
    for (size_t l = s; l <= L; ++l) {
      for (size_t from = s - 1; from < l; ++from) {  // stage s-1 runs blocks [from, l)
        if (best[s - 1][from] == kInf) continue;
        double cost = static_cast<double>(l - from);
        if (s == S) cost += head_cost;
        const double total = best[s - 1][from] + cost * cost;
        if (total < best[s][l]) {  // strict: ties keep the earlier cut (fewer blocks first)
          best[s][l] = total;
          cut[s][l] = static_cast<int>(from);
        }
      }
    }
  }
  std::vector<int> firsts(S + 1);
  firsts[S] = n_layer;
  for (size_t s = S, l = L; s >= 1; --s) {
    firsts[s - 1] = cut[s][l];
    l = static_cast<size_t>(cut[s][l]);
  }
  return firsts;
}

double head_cost_in_blocks(const GPT2Shape& s) {
  const double C = s.n_embd;
  return C * s.padded_vocab / (12.0 * C * C + static_cast<double>(s.context) * C);
}

std::pair<int, int> stage_layers(const GPT2Shape& shape, int stage, int stages) {
  const std::vector<int> firsts = balance_stages(shape.n_layer, head_cost_in_blocks(shape), stages);
  return {firsts[static_cast<size_t>(stage)],
          firsts[static_cast<size_t>(stage) + 1] - firsts[static_cast<size_t>(stage)]};
}

ParameterLayout::ParameterLayout(const GPT2Shape& shape, const ModelShard& shard)
    : shape_(shape), shard_(shard) {
  const int T = shard.tensors, S = shard.stages;
  if (T < 1 || S < 1 || shard.tensor_rank < 0 || shard.tensor_rank >= T || shard.stage < 0 ||
      shard.stage >= S) {
    throw RunError("invalid model shard");
  }
  if (shape.n_head % T != 0 || shape.padded_vocab % T != 0 || S > std::max(1, shape.n_layer)) {
    throw SpecError("the model does not split " + std::to_string(T) + "-way by tensor and " +
                    std::to_string(S) + "-way by pipeline; check parallel.tensor and "
                    "parallel.pipeline against model.n_head, model.vocab and model.n_layer");
  }
  std::tie(first_layer_, layers_) = stage_layers(shape, shard.stage, S);
  const auto whole = whole_model(shape);
  std::vector<size_t> global_offsets(whole.size());
  for (size_t i = 0, at = 0; i < whole.size(); ++i) {
    global_offsets[i] = at;
    at += numel_of(whole[i].shape);
  }
  auto add = [&](size_t i, bool tied_copy) {
    const WholeTensor& w = whole[i];
    ParamTensor t;
    t.name = w.name;
    t.shape = local_shape(w.shape, w.split, T);
    t.offset = total_;
    t.numel = numel_of(t.shape);
    t.decay = w.shape.size() >= 2;
    t.global_shape = w.shape;
    t.global_offset = global_offsets[i];
    t.global_index = i;
    t.split = w.split;
    t.tied_copy = tied_copy;
    tensors_.push_back(std::move(t));
    total_ += tensors_.back().numel;
  };
  const size_t lnf = whole.size() - 2;
  if (has_embedding()) {
    add(0, false);
    add(1, false);
  }
  blocks_begin_ = tensors_.size();
  for (size_t i = 2; i < lnf; ++i) {
    if (whole[i].layer >= first_layer_ && whole[i].layer < first_layer_ + layers_) add(i, false);
  }
  if (has_head()) {
    add(lnf, false);
    add(lnf + 1, false);
    if (!has_embedding()) add(0, true);  // the tied LM head's own copy of wte
  }
}

const ParamTensor* ParameterLayout::find_if(const std::string& name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const ParamTensor& ParameterLayout::find(const std::string& name) const {
  if (const ParamTensor* t = find_if(name)) return *t;
  throw RunError("no parameter named '" + name + "' in the GPT-2 layout");
}

int64_t ParameterLayout::real_parameter_count() const {
  int64_t total = 0;
  for (const auto& w : whole_model(shape_)) total += static_cast<int64_t>(numel_of(w.shape));
  return total - static_cast<int64_t>(shape_.padded_vocab - shape_.vocab) * shape_.n_embd;
}

void for_each_run(const ParamTensor& t, const ModelShard& shard,
                  const std::function<void(size_t, size_t, size_t)>& fn) {
  const size_t T = static_cast<size_t>(shard.tensors), r = static_cast<size_t>(shard.tensor_rank);
  const size_t rows = static_cast<size_t>(t.global_shape[0]);
  const size_t width = t.global_shape.size() > 1 ? static_cast<size_t>(t.global_shape[1]) : 1;
  switch (T == 1 ? TensorSplit::kWhole : t.split) {
    case TensorSplit::kWhole:
      fn(0, 0, t.numel);
      break;
    case TensorSplit::kRows:
      fn(0, r * t.numel, t.numel);
      break;
    case TensorSplit::kQkvRows: {  // three blocks of C rows: q, k, v
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

void init_gpt2_parameters(float* params, const ParameterLayout& layout, float std, uint64_t seed) {
  const GPT2Shape& s = layout.shape();
  const float residual_std = std / std::sqrt(2.0f * static_cast<float>(s.n_layer));
  // Each whole tensor draws from its own stream (the i-th of the seed's SplitMix64 sequence), so
  // adding a tensor never shifts another's values and a shard regenerates only its tensors.
  std::vector<float> whole;
  for (const ParamTensor& t : layout.tensors()) {
    uint64_t tensor_seed = seed;
    uint64_t stream = 0;
    for (size_t i = 0; i <= t.global_index; ++i) stream = splitmix64(tensor_seed);
    const size_t n_whole = numel_of(t.global_shape);
    const bool in_place = n_whole == t.numel;
    if (!in_place) whole.resize(n_whole);
    float* p = in_place ? params + t.offset : whole.data();
    const bool is_bias = t.name.ends_with(".bias");
    const bool is_ln_weight = t.name.find("ln_") != std::string::npos && t.name.ends_with(".weight");
    if (is_bias) {
      std::memset(p, 0, n_whole * sizeof(float));
    } else if (is_ln_weight) {
      for (size_t i = 0; i < n_whole; ++i) p[i] = 1.0f;
    } else {
      Rng rng(stream);
      const bool residual = t.name.ends_with("c_proj.weight");
      const float sd = residual ? residual_std : std;
      size_t n = n_whole;
      if (t.name == "wte") n = static_cast<size_t>(s.vocab) * s.n_embd;  // padding rows stay 0
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(rng.normal()) * sd;
      std::memset(p + n, 0, (n_whole - n) * sizeof(float));
    }
    if (!in_place) slice_tensor(t, layout.shard(), whole.data(), params);
  }
}

}  // namespace sg
