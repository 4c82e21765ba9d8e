#include "model/gpt2_decoder.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <cblas.h>

#include "util/error.h"

namespace sg {
namespace {

// Hands out consecutive pieces of an arena, or with a null base only counts them.
struct Carver {
  float* base = nullptr;
  size_t used = 0;
  float* take(size_t n) {
    float* p = base != nullptr ? base + used : nullptr;
    used += (n + 15) / 16 * 16;  // each piece starts on a 64-byte line, as the arena does
    return p;
  }
};

}  // namespace

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
    Carver carve{base};
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
    return carve.used;
  };
  const size_t floats = place(nullptr);
  arena_ = Buffer(backend_, floats * sizeof(float));
  backend_.zero(arena_.as<float>(), floats);
  place(arena_.as<float>());
}

// out (N,OC) = inp (N,C) @ weight (OC,C)^T + bias. One row (a generation step) is a matrix-vector
// product: OpenBLAS 0.3.21's sgemm packs the whole weight even for one row, which made it 3-4x
// slower than sgemv at GPT-2 124M's shapes (measured, 768x2304 to 768x50304); more rows are the
// backend's matmul.
void GPT2Decoder::linear(float* out, const float* inp, const float* weight, const float* bias,
                         int N, int C, int OC) {
  if (N > 1) {
    backend_.matmul_forward(out, inp, weight, bias, N, C, OC);
    return;
  }
  if (bias != nullptr) std::copy_n(bias, OC, out);
  cblas_sgemv(CblasRowMajor, CblasNoTrans, OC, C, 1.0f, weight, C, inp, 1,
              bias != nullptr ? 1.0f : 0.0f, out, 1);
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

// out (C) = softmax(q K^T / sqrt(hs)) V per head over the cached positions [0, position]; q (C).
// One query needs no causal mask and no probabilities kept for a backward pass, which is all the
// backend's attention_forward (a whole (T,T) block per head) would add.
void GPT2Decoder::attend_one(float* out, const float* q, int layer, int position) const {
  const int C = shape_.n_embd, NH = shape_.n_head, hs = C / NH, keys = position + 1;
  const size_t TC = static_cast<size_t>(shape_.context) * C;
  const float* K = cache_ + static_cast<size_t>(layer) * 2 * TC;  // (T,C)
  const float* V = K + TC;                                          // (T,C)
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  // Scores live in att_ (the prefill's attention state, unused between prefills): (NH, T).
  float* scores_all = att_;
#pragma omp parallel for schedule(static)
  for (int h = 0; h < NH; ++h) {
    const float* qh = q + h * hs;
    float* scores = scores_all + static_cast<size_t>(h) * shape_.context;
    float max_score = -INFINITY;
    for (int t = 0; t < keys; ++t) {
      const float* kt = K + static_cast<size_t>(t) * C + h * hs;
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int i = 0; i < hs; ++i) dot += qh[i] * kt[i];
      scores[t] = dot * scale;
      max_score = std::max(max_score, scores[t]);
    }
    float sum = 0.0f;
    for (int t = 0; t < keys; ++t) sum += scores[t] = std::exp(scores[t] - max_score);
    float* oh = out + h * hs;
    std::fill(oh, oh + hs, 0.0f);
    for (int t = 0; t < keys; ++t) {
      const float p = scores[t] / sum;
      const float* vt = V + static_cast<size_t>(t) * C + h * hs;
#pragma omp simd
      for (int i = 0; i < hs; ++i) oh[i] += p * vt[i];
    }
  }
}

std::span<const float> GPT2Decoder::run_positions(int P) {
  const int C = shape_.n_embd, NH = shape_.n_head, start = length_;
  const long PC = static_cast<long>(P) * C;
  const size_t TC = static_cast<size_t>(shape_.context) * C;
  for (int l = 0; l < shape_.n_layer; ++l) {
    const Block& w = blocks_[static_cast<size_t>(l)];
    backend_.layernorm_forward(ln_, mean_, rstd_, x_, w.ln1w, w.ln1b, P, C);
    linear(qkv_, ln_, w.qkvw, w.qkvb, P, C, 3 * C);
    // Keys and values of these positions into the cache: rows [start, start + P).
    float* K = cache_ + static_cast<size_t>(l) * 2 * TC;
    float* V = K + TC;
    for (int p = 0; p < P; ++p) {
      const float* row = qkv_ + static_cast<size_t>(p) * 3 * C;  // q, k, v
      std::copy_n(row + C, C, K + static_cast<size_t>(start + p) * C);
      std::copy_n(row + 2 * C, C, V + static_cast<size_t>(start + p) * C);
    }
    if (start == 0) {  // the prompt: causal attention among its own positions, as in training
      backend_.attention_forward(atty_, att_, qkv_, 1, P, C, NH);
    } else {  // one new position against the cache
      attend_one(atty_, qkv_, l, start);
    }
    linear(proj_, atty_, w.attprojw, w.attprojb, P, C, C);
    backend_.residual_forward(residual2_, x_, proj_, PC);
    backend_.layernorm_forward(ln_, mean_, rstd_, residual2_, w.ln2w, w.ln2b, P, C);
    linear(fch_, ln_, w.fcw, w.fcb, P, C, 4 * C);
    backend_.gelu_forward(fch_gelu_, fch_, 4 * PC);
    linear(proj_, fch_gelu_, w.fcprojw, w.fcprojb, P, 4 * C, C);
    backend_.residual_forward(x_, residual2_, proj_, PC);
  }
  length_ = start + P;
  // Only the last position's logits are needed to pick the next token.
  const float* last = x_ + static_cast<size_t>(P - 1) * C;
  backend_.layernorm_forward(ln_, mean_, rstd_, last, lnfw_, lnfb_, 1, C);
  linear(logits_, ln_, wte_, nullptr, 1, C, shape_.padded_vocab);
  return {logits_, static_cast<size_t>(shape_.padded_vocab)};
}

}  // namespace sg
