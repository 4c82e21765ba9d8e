#pragma once
// What the text decoders (GPT-2, Llama) share beyond their layers: the split rules of their
// vocabulary and stages, their FLOP count, their evaluation line, and how a stage places a
// layer's activations under recompute.
#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "config/model_config.h"
#include "config/spec_checks.h"
#include "config/spec_enums.h"

namespace sg {

// What a decoder reads: tokens of `vocab`, up to `context` at a time.
inline ModelData decoder_model_data(int vocab, int context) {
  ModelData d;
  d.input = ModelInput::Tokens;
  d.vocab = vocab;
  d.context = context;
  return d;
}

// The checks every decoder's sizes share (the documented limits of docs/faults.md): at least
// one layer, head and channel, two tokens, a head of whole channels, at most the limits.
inline void check_decoder_sizes(const SpecChecks& check, int n_layer, int n_head, int n_embd,
                                int context, int vocab, float init_std) {
  check.at_least("model.n_layer", n_layer, 1);
  check.at_least("model.n_head", n_head, 1);
  check.at_least("model.n_embd", n_embd, 1);
  check.at_least("model.context", context, 1);
  check.at_least("model.vocab", vocab, 2);
  check.at_most("model.n_layer", n_layer, 1024, "a documented limit, far above any GPT");
  check.at_most("model.n_embd", n_embd, 65536, "4 x n_embd is a kernel dimension");
  check.at_most("model.n_head", n_head, n_embd, "a head needs at least one channel");
  check.at_most("model.context", context, 1 << 20, "a documented limit");
  check.at_most("model.vocab", vocab, 1 << 24, "a documented limit");
  if (n_embd % n_head != 0)
    check.fail({"model.n_embd", "model.n_head"},
               fmt::format("model.n_embd {} is not divisible by model.n_head {}; use {}", n_embd,
                           n_head, nearest_multiple(n_embd, n_head)));
  check.float_at_least("model.init_std", init_std, 0, false);
}

// Why a decoder's vocabulary does not split `tensors`-way or its layers `stages`-way, or "".
inline std::string decoder_vocab_stage_problem(int padded_vocab, int n_layer, int tensors,
                                               int stages) {
  if (padded_vocab % tensors != 0)
    return fmt::format("the padded vocabulary {} is not divisible by parallel.tensor {}; use a "
                       "power of two",
                       padded_vocab, tensors);
  if (stages > std::max(1, n_layer))
    return fmt::format("parallel.pipeline {} exceeds model.n_layer {}; each stage needs a layer",
                       stages, n_layer);
  return "";
}

// Training FLOPs per token as PaLM / nanoGPT count them: 6 per parameter (matmuls, embeddings
// included, at the real vocabulary) plus the attention core (QK^T and PV: 4*T*C per layer
// forward, x3 for forward + backward, halved for causality), C the attention width.
inline double decoder_training_flops_per_token(double params, int n_layer, int attention_width,
                                               int seq_len) {
  return 6.0 * params + 6.0 * n_layer * static_cast<double>(seq_len) * attention_width;
}

inline std::string decoder_evaluation_summary(double loss) {
  return fmt::format("val loss {:.4f}, perplexity {:.3f}", loss, std::exp(loss));
}

// Places layer activations `a` of one micro-batch under `recompute`: its own (none), its own
// but the stage's one shared attention state (selective), or the stage's one shared set (full).
// place(a, keep_attention_state) carves a layer's set.
template <class LayerActs, class Place>
void place_layer(LayerActs& a, const LayerActs& shared, Recompute recompute, Place&& place) {
  if (recompute == Recompute::Full) {
    a = shared;
    return;
  }
  place(a, recompute == Recompute::None);
  if (recompute == Recompute::Selective) a.att = shared.att;
}

}  // namespace sg
