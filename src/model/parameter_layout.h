#pragma once
// GPT-2 parameters as named ranges of one flat buffer (DESIGN §4): bucketing, ZeRO sharding and
// checkpointing all work on ranges of the flat buffer. Order: wte, wpe, then each block's tensors
// contiguously (so a pipeline stage owns one contiguous range), then ln_f. Names follow the
// Hugging Face GPT-2 layout; Linear weights are stored (out, in) like nn.Linear (HF's Conv1D is
// the transpose). The LM head is tied to wte.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sg {

struct GPT2Shape {
  int n_layer = 0;
  int n_head = 0;
  int n_embd = 0;      // C
  int context = 0;     // maximum sequence length (rows of wpe)
  int vocab = 0;       // V: real tokens
  int padded_vocab = 0;  // Vp >= V: rows of wte; padding rows stay zero
};

struct ParamTensor {
  std::string name;
  std::vector<int64_t> shape;
  size_t offset = 0;  // in floats, into the flat buffer
  size_t numel = 0;
  bool decay = false;  // AdamW weight decay applies (2-D weights only)
};

class ParameterLayout {
 public:
  explicit ParameterLayout(const GPT2Shape& shape);

  const GPT2Shape& shape() const { return shape_; }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  size_t total() const { return total_; }
  const ParamTensor& find(const std::string& name) const;  // throws RunError if absent
  // Parameter count at the real vocabulary (padding rows excluded), as users quote it.
  int64_t real_parameter_count() const;

  // Index into tensors() of block `layer`'s first tensor; kPerBlock tensors follow.
  static constexpr int kPerBlock = 12;
  size_t block_first(int layer) const { return 2 + static_cast<size_t>(layer) * kPerBlock; }

 private:
  GPT2Shape shape_;
  std::vector<ParamTensor> tensors_;
  size_t total_ = 0;
};

// GPT-2 initialisation (nanoGPT/llm.c): Linear and embedding weights N(0, std), the residual
// projections (attn.c_proj, mlp.c_proj) N(0, std/sqrt(2*n_layer)), biases 0, layernorm weight 1,
// bias 0, vocabulary padding rows 0. Deterministic in seed.
void init_gpt2_parameters(float* params, const ParameterLayout& layout, float std, uint64_t seed);

}  // namespace sg
