#pragma once
// Llama text generation with a key/value cache, as GPT2Decoder (gpt2_decoder.h): the prompt in
// one pass, then one position per token against the cached keys and values. Keys are cached
// rotated at their position; the rotary tables cover the whole context. The cache holds each
// key/value head repeated for its group of query heads (rope_qkv's output), so the single-query
// attention is GPT-2's. Beyond the context, generate_tokens (text_decoder.h) rebuilds the cache
// from the last context/2 tokens, as for GPT-2. Host memory, the CPU backend's ops.
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/llama_family.h"
#include "model/parameter_layout.h"
#include "model/text_decoder.h"
#include "tensor/buffer.h"

namespace sg {

class LlamaDecoder final : public TextDecoder {
 public:
  // layout: the whole model (unsplit); params: its flat buffer, kept by the caller.
  LlamaDecoder(const LlamaShape& shape, const ParameterLayout& layout, const float* params);

  std::span<const float> prefill(std::span<const int32_t> tokens) override;
  std::span<const float> step(int32_t token) override;
  int length() const override { return length_; }
  int context() const override { return shape_.context; }
  int vocab() const override { return shape_.vocab; }

 private:
  struct Layer {  // q, k, v adjacent (qkv), gate and up adjacent (gate_up)
    const float *ln1, *qkv, *o, *ln2, *gate_up, *down;
  };
  std::span<const float> run_positions(int P);

  LlamaShape shape_;
  Backend& backend_;
  const float *embed_, *norm_, *head_;
  std::vector<Layer> layers_;
  int length_ = 0;
  Buffer arena_;
  // Up to `context` rows: x the residual stream, ln, rstd, fused (q|k|v, NKV key/value heads),
  // packed (q|k|v, NH heads each), atty, att (the attention state; the single query's scores),
  // proj, residual2, gate_up, hidden, logits (Vp); the rotary tables (context, HS/2).
  float *x_, *ln_, *rstd_, *fused_, *packed_, *atty_, *att_, *proj_, *residual2_, *gate_up_,
      *hidden_, *logits_, *cos_, *sin_;
  float* cache_;  // per layer K then V, each (context, C), key/value heads repeated
};

}  // namespace sg
