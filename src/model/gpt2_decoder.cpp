#include "model/gpt2_decoder.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "model/arena_carver.h"
#include "model/decode_ops.h"
#include "util/error.h"

namespace sg {

GPT2Decoder::GPT2Decoder(const GPT2Shape& shape, const ParameterLayout& layout,
                         const float* params)
    : shape_(shape), backend_(cpu_backend()) {
  if (layout.sharded()) {
    throw RunError("GPT2Decoder runs the whole model; it was given a tensor or pipeline shard");
  }
  if (shape.n_embd % shape.n_head != 0) {
    throw SpecError("model.n_embd must be a multiple of model.n_head to generate text");
  }
  const auto at = [&](const std::string& name) { return params + layout.find(name).offset; };
  wte_ = at("wte");
  wpe_ = at("wpe");
  lnfw_ = at("ln_f.weight");
  lnfb_ = at("ln_f.bias");
  for (int l = 0; l < shape.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    blocks_.push_back({at(p + "ln_1.weight"), at(p + "ln_1.bias"), at(p + "attn.c_attn.weight"),
                       at(p + "attn.c_attn.bias"), at(p + "attn.c_proj.weight"),
                       at(p + "attn.c_proj.bias"), at(p + "ln_2.weight"), at(p + "ln_2.bias"),
                       at(p + "mlp.c_fc.weight"), at(p + "mlp.c_fc.bias"),
                       at(p + "mlp.c_proj.weight"), at(p + "mlp.c_proj.bias")});
  }
  const size_t T = static_cast<size_t>(shape.context), C = static_cast<size_t>(shape.n_embd);
  const size_t att = backend_.attention_storage(1, shape.context, shape.n_head).state;
  // Counted once with a null base, then placed in the arena: the one layout for both.
  const auto place = [&](float* base) {
    ArenaCarver carve{reinterpret_cast<char*>(base)};
    x_ = carve.take(T * C);
    ln_ = carve.take(T * C);
    mean_ = carve.take(T);
    rstd_ = carve.take(T);
    qkv_ = carve.take(T * 3 * C);
    atty_ = carve.take(T * C);
    att_ = carve.take(att);
    proj_ = carve.take(T * C);
    residual2_ = carve.take(T * C);
    fch_ = carve.take(T * 4 * C);
    fch_gelu_ = carve.take(T * 4 * C);
    logits_ = carve.take(static_cast<size_t>(shape.padded_vocab));
    cache_ = carve.take(static_cast<size_t>(shape.n_layer) * 2 * T * C);
    return carve.used / sizeof(float);
  };
  const size_t floats = place(nullptr);
  arena_ = Buffer(backend_, floats * sizeof(float));
  backend_.zero(arena_.as<float>(), floats);
  place(arena_.as<float>());
}

std::span<const float> GPT2Decoder::prefill(std::span<const int32_t> tokens) {
  const int P = static_cast<int>(tokens.size());
  if (P < 1 || P > shape_.context) {
    throw RunError("GPT2Decoder::prefill takes 1 to " + std::to_string(shape_.context) +
                   " tokens, not " + std::to_string(P));
  }
  length_ = 0;
  backend_.encoder_forward(x_, tokens.data(), wte_, wpe_, 1, P, shape_.n_embd);
  return run_positions(P);
}

std::span<const float> GPT2Decoder::step(int32_t token) {
  if (length_ >= shape_.context) {
    throw RunError("GPT2Decoder::step: the cache holds all " + std::to_string(shape_.context) +
                   " positions of the context; prefill a shorter window first");
  }
  const size_t C = static_cast<size_t>(shape_.n_embd);
  // The position embedding of this one position: wpe's row length_ as a one-row table.
  backend_.encoder_forward(x_, &token, wte_, wpe_ + static_cast<size_t>(length_) * C, 1, 1,
                           shape_.n_embd);
  return run_positions(1);
}

std::span<const float> GPT2Decoder::run_positions(int P) {
  const int C = shape_.n_embd, NH = shape_.n_head, start = length_;
  const long PC = static_cast<long>(P) * C;
  const size_t TC = static_cast<size_t>(shape_.context) * C;
  for (int l = 0; l < shape_.n_layer; ++l) {
    const Block& w = blocks_[static_cast<size_t>(l)];
    backend_.layernorm_forward(ln_, mean_, rstd_, x_, w.ln1w, w.ln1b, P, C);
    decode_linear(backend_, qkv_, ln_, w.qkvw, w.qkvb, P, C, 3 * C);
    float* K = cache_ + static_cast<size_t>(l) * 2 * TC;
    decode_attention(backend_, atty_, att_, qkv_, K, K + TC, start, P, C, NH);
    decode_linear(backend_, proj_, atty_, w.attprojw, w.attprojb, P, C, C);
    backend_.residual_forward(residual2_, x_, proj_, PC);
    backend_.layernorm_forward(ln_, mean_, rstd_, residual2_, w.ln2w, w.ln2b, P, C);
    decode_linear(backend_, fch_, ln_, w.fcw, w.fcb, P, C, 4 * C);
    backend_.gelu_forward(fch_gelu_, fch_, 4 * PC);
    decode_linear(backend_, proj_, fch_gelu_, w.fcprojw, w.fcprojb, P, 4 * C, C);
    backend_.residual_forward(x_, residual2_, proj_, PC);
  }
  length_ = start + P;
  // Only the last position's logits are needed to pick the next token.
  const float* last = x_ + static_cast<size_t>(P - 1) * C;
  backend_.layernorm_forward(ln_, mean_, rstd_, last, lnfw_, lnfb_, 1, C);
  decode_linear(backend_, logits_, ln_, wte_, nullptr, 1, C, shape_.padded_vocab);
  return {logits_, static_cast<size_t>(shape_.padded_vocab)};
}

}  // namespace sg
