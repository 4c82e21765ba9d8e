#pragma once
// GPT-2 text generation with a key/value cache: the prompt is run once (all its positions in one
// pass), then each new token costs one position: per layer the keys and values of every position
// so far are kept, and the new token's query attends to them. The model (GPT2, gpt2.h) re-runs
// the whole window for every token instead, which is what training needs but quadratic here.
//
// Everything but the single-query attention step, the one-row matrix products (cblas_sgemv, see
// linear()) and the sampling is the backend's ops (backend.h) on the CPU backend; the cache and
// the activations live in host memory.
//
// Beyond the context: absolute position embeddings tie every cached key to its position, so a
// window cannot slide by one position without recomputing all of it. When the cache is full,
// generate_tokens rebuilds it from the last context/2 tokens (one prefill every context/2 new
// tokens), so the model always sees between context/2 and context tokens of history and a token
// still costs one position on average. Within the context the logits are the full model's.
#include <cstdint>
#include <span>
#include <vector>

#include "backend/backend.h"
#include "model/gpt2_family.h"
#include "model/parameter_layout.h"
#include "tensor/buffer.h"
#include "util/rng.h"

namespace sg {

class GPT2Decoder {
 public:
  // layout: the whole model (unsplit), params: its flat buffer in host memory, kept by the caller
  // for the decoder's lifetime.
  GPT2Decoder(const GPT2Shape& shape, const ParameterLayout& layout, const float* params);

  // Forgets the cache and runs tokens (1 .. context of them) at positions 0, 1, ...; returns the
  // logits of the last one: (Vp), of which the first V are real tokens.
  std::span<const float> prefill(std::span<const int32_t> tokens);
  // Runs one more token at position length() and returns its logits (Vp). RunError when the cache
  // is full (length() == context()): call prefill on a shorter window.
  std::span<const float> step(int32_t token);

  int length() const { return length_; }  // positions in the cache
  int context() const { return shape_.context; }

 private:
  struct Block {  // one block's parameters
    const float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb,
        *fcprojw, *fcprojb;
  };
  // Runs the blocks over positions [length_, length_ + P) whose embeddings are in x_, appending
  // their keys and values to the cache; then the logits of the last position.
  std::span<const float> run_positions(int P);
  void attend_one(float* out, const float* q, int layer, int position) const;
  void linear(float* out, const float* inp, const float* weight, const float* bias, int N, int C,
              int OC);

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

// --- sampling ---------------------------------------------------------------------------------

// What picks the next token. Applied in transformers' order: temperature, then top-k, then top-p.
struct SamplingOptions {
  double temperature = 1.0;  // 0: greedy (the other two are then irrelevant)
  int top_k = 0;             // keep the k most likely tokens; 0: all
  double top_p = 1.0;        // nucleus: keep the fewest most likely tokens whose mass reaches p
};

// The most likely token (the first of equal ones, like torch.argmax) among logits (V).
int32_t greedy_token(std::span<const float> logits);

// The tokens sampling may pick from logits (V) at temperature > 0, most likely first, with their
// probabilities renormalised over the kept set (summing to 1).
struct TokenProbability {
  int32_t token;
  double probability;
};
std::vector<TokenProbability> sampling_candidates(std::span<const float> logits,
                                                  const SamplingOptions& options);

// The next token from logits (V): greedy at temperature 0, else one draw from
// sampling_candidates.
int32_t sample_token(std::span<const float> logits, const SamplingOptions& options, Rng& rng);

// Appends `count` generated tokens to `sequence` (which holds the prompt, at least one token),
// sliding the window as the header says when it outgrows the context. A prompt longer than the
// context is cut to its last context/2 tokens, as a full window would be.
struct GenerationTimes {
  double prefill_seconds = 0;  // the prompt's pass
  double total_seconds = 0;    // prompt and every new token
};
GenerationTimes generate_tokens(GPT2Decoder& decoder, std::vector<int32_t>& sequence, int count,
                                int vocab, const SamplingOptions& options, Rng& rng);

}  // namespace sg
