#include "model/parameter_layout.h"

#include <cmath>
#include <cstring>

#include "util/error.h"
#include "util/rng.h"

namespace sg {

ParameterLayout::ParameterLayout(const GPT2Shape& shape) : shape_(shape) {
  const int64_t C = shape.n_embd;
  auto add = [&](std::string name, std::vector<int64_t> dims) {
    size_t numel = 1;
    for (int64_t d : dims) numel *= static_cast<size_t>(d);
    const bool decay = dims.size() >= 2;
    tensors_.push_back({std::move(name), std::move(dims), total_, numel, decay});
    total_ += numel;
  };
  add("wte", {shape.padded_vocab, C});
  add("wpe", {shape.context, C});
  for (int l = 0; l < shape.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    add(p + "ln_1.weight", {C});
    add(p + "ln_1.bias", {C});
    add(p + "attn.c_attn.weight", {3 * C, C});
    add(p + "attn.c_attn.bias", {3 * C});
    add(p + "attn.c_proj.weight", {C, C});
    add(p + "attn.c_proj.bias", {C});
    add(p + "ln_2.weight", {C});
    add(p + "ln_2.bias", {C});
    add(p + "mlp.c_fc.weight", {4 * C, C});
    add(p + "mlp.c_fc.bias", {4 * C});
    add(p + "mlp.c_proj.weight", {C, 4 * C});
    add(p + "mlp.c_proj.bias", {C});
  }
  add("ln_f.weight", {C});
  add("ln_f.bias", {C});
}

const ParamTensor& ParameterLayout::find(const std::string& name) const {
  for (const auto& t : tensors_) {
    if (t.name == name) return t;
  }
  throw RunError("no parameter named '" + name + "' in the GPT-2 layout");
}

int64_t ParameterLayout::real_parameter_count() const {
  return static_cast<int64_t>(total_) -
         static_cast<int64_t>(shape_.padded_vocab - shape_.vocab) * shape_.n_embd;
}

void init_gpt2_parameters(float* params, const ParameterLayout& layout, float std, uint64_t seed) {
  const GPT2Shape& s = layout.shape();
  const float residual_std = std / std::sqrt(2.0f * static_cast<float>(s.n_layer));
  uint64_t tensor_seed = seed;
  for (const ParamTensor& t : layout.tensors()) {
    // Each tensor draws from its own stream, so adding a tensor never shifts another's values.
    Rng rng(splitmix64(tensor_seed));
    float* p = params + t.offset;
    const bool is_bias = t.name.ends_with(".bias");
    const bool is_ln_weight = t.name.find("ln_") != std::string::npos && t.name.ends_with(".weight");
    if (is_bias) {
      std::memset(p, 0, t.numel * sizeof(float));
    } else if (is_ln_weight) {
      for (size_t i = 0; i < t.numel; ++i) p[i] = 1.0f;
    } else {
      const bool residual = t.name.ends_with("c_proj.weight");
      const float sd = residual ? residual_std : std;
      size_t n = t.numel;
      if (t.name == "wte") n = static_cast<size_t>(s.vocab) * s.n_embd;  // padding rows stay 0
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(rng.normal()) * sd;
      std::memset(p + n, 0, (t.numel - n) * sizeof(float));
    }
  }
}

}  // namespace sg
