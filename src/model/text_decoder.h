#pragma once
// Text generation for any decoder family (`singularity sample`): a decoder with a key/value
// cache (ModelFamily::make_decoder), the sampling rules, and the loop that slides the window
// when the text outgrows the context (the cache is rebuilt from the last context/2 tokens, one
// prefill every context/2 new tokens).
#include <cstdint>
#include <span>
#include <vector>

#include "util/rng.h"

namespace sg {

class TextDecoder {
 public:
  virtual ~TextDecoder() = default;
  // Forgets the cache and runs tokens (1 .. context of them) at positions 0, 1, ...; returns the
  // logits of the last one, of which the first vocab() are real tokens.
  virtual std::span<const float> prefill(std::span<const int32_t> tokens) = 0;
  // Runs one more token at position length() and returns its logits. RunError when the cache
  // is full (length() == context()): call prefill on a shorter window.
  virtual std::span<const float> step(int32_t token) = 0;
  virtual int length() const = 0;   // positions in the cache
  virtual int context() const = 0;  // the longest window
  virtual int vocab() const = 0;    // real tokens (the logits may be padded beyond)
};

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
GenerationTimes generate_tokens(TextDecoder& decoder, std::vector<int32_t>& sequence, int count,
                                const SamplingOptions& options, Rng& rng);

}  // namespace sg
