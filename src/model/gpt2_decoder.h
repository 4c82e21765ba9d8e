#pragma once
// GPT-2 text generation with a key/value cache: the prompt is run once (all its positions in one
// pass), then each new token costs one position: per layer the keys and values of every position
// so far are kept, and the new token's query attends to them. The model (GPT2, gpt2.h) re-runs
// the whole window for every token instead, which is what training needs but quadratic here.
//
// Everything but the single-query attention step and the one-row matrix products (decode_ops.h)
// and the sampling is the backend's ops (backend.h) on the CPU backend; the cache and
// the activations live in host memory.
//
// Beyond the context: absolute position embeddings tie every cached key to its position, so a
// window cannot slide by one position without recomputing all of it. When the cache is full,
// generate_tokens (text_decoder.h) rebuilds it from the last context/2 tokens, so the model
// always sees between context/2 and context tokens of history and a token still costs one
// position on average. Within the context the logits are the full model's.
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/gpt2_family.h"
#include "model/parameter_layout.h"
#include "model/text_decoder.h"
#include "tensor/buffer.h"
#include "util/rng.h"

namespace sg {

class GPT2Decoder final : public TextDecoder {
 public:
  // layout: the whole model (unsplit), params: its flat buffer in host memory, kept by the caller
  // for the decoder's lifetime.
  GPT2Decoder(const GPT2Shape& shape, const ParameterLayout& layout, const float* params);

  // Forgets the cache and runs tokens (1 .. context of them) at positions 0, 1, ...; returns the
  // logits of the last one: (Vp), of which the first V are real tokens.
  std::span<const float> prefill(std::span<const int32_t> tokens) override;
  // Runs one more token at position length() and returns its logits (Vp). RunError when the cache
  // is full (length() == context()): call prefill on a shorter window.
  std::span<const float> step(int32_t token) override;

  int length() const override { return length_; }
  int context() const override { return shape_.context; }
  int vocab() const override { return shape_.vocab; }

 private:
  struct Block {  // one block's parameters
    const float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb,
        *fcprojw, *fcprojb;
  };
  // Runs the blocks over positions [length_, length_ + P) whose embeddings are in x_, appending
  // their keys and values to the cache; then the logits of the last position.
  std::span<const float> run_positions(int P);

  GPT2Shape shape_;
  Backend& backend_;
  const float *wte_, *wpe_, *lnfw_, *lnfb_;
  std::vector<Block> blocks_;
  int length_ = 0;
  Buffer arena_;
  // Activations for up to `context` positions (rows): x (T,C) the residual stream, ln (T,C),
  // mean, rstd (T), qkv (T,3C), atty (T,C), att (the backend's attention state for T), proj
  // (T,C), residual2 (T,C), fch, fch_gelu (T,4C), logits (Vp).
  float *x_, *ln_, *mean_, *rstd_, *qkv_, *atty_, *att_, *proj_, *residual2_, *fch_, *fch_gelu_,
      *logits_;
  // The cache: per layer K then V, each (T,C) position-major; head h is columns [h*hs, (h+1)*hs).
  float* cache_;
};

}  // namespace sg
