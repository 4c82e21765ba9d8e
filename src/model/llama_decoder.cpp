#include "model/llama_decoder.h"

#include <algorithm>
#include <string>

#include "kernels/rope.h"
#include "model/arena_carver.h"
#include "model/decode_ops.h"
#include "util/error.h"

namespace sg {

LlamaDecoder::LlamaDecoder(const LlamaShape& shape, const ParameterLayout& layout,
                           const float* params)
    : shape_(shape), backend_(cpu_backend()) {
  if (layout.sharded())
    throw RunError("LlamaDecoder runs the whole model; it was given a tensor or pipeline shard");
  const auto at = [&](const std::string& name) { return params + layout.find(name).offset; };
  embed_ = at("model.embed_tokens.weight");
  norm_ = at("model.norm.weight");
  head_ = shape.tied ? embed_ : at("lm_head.weight");
  for (int l = 0; l < shape.n_layer; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    layers_.push_back({at(p + "input_layernorm.weight"), at(p + "self_attn.q_proj.weight"),
                       at(p + "self_attn.o_proj.weight"),
                       at(p + "post_attention_layernorm.weight"), at(p + "mlp.gate_proj.weight"),
                       at(p + "mlp.down_proj.weight")});
  }
  const size_t T = static_cast<size_t>(shape.context), C = static_cast<size_t>(shape.n_embd);
  const size_t HS = static_cast<size_t>(shape.head_size()), I = static_cast<size_t>(shape.intermediate);
  const size_t fused = (static_cast<size_t>(shape.n_head) + 2 * shape.n_kv_head) * HS;
  const size_t att = std::max(backend_.attention_storage(1, shape.context, shape.n_head).state,
                              static_cast<size_t>(shape.n_head) * T);
  const auto place = [&](char* base) {
    ArenaCarver carve{base};
    x_ = carve.take(T * C);
    ln_ = carve.take(T * C);
    rstd_ = carve.take(T);
    fused_ = carve.take(T * fused);
    packed_ = carve.take(T * 3 * C);
    atty_ = carve.take(T * C);
    att_ = carve.take(att);
    proj_ = carve.take(T * C);
    residual2_ = carve.take(T * C);
    gate_up_ = carve.take(T * 2 * I);
    hidden_ = carve.take(T * I);
    logits_ = carve.take(static_cast<size_t>(shape.padded_vocab));
    cos_ = carve.take(T * HS / 2);
    sin_ = carve.take(T * HS / 2);
    cache_ = carve.take(static_cast<size_t>(shape.n_layer) * 2 * T * C);
    return carve.used;
  };
  const size_t bytes = place(nullptr);
  arena_ = Buffer(backend_, bytes);
  backend_.zero(arena_.as<float>(), bytes / sizeof(float));
  place(static_cast<char*>(arena_.data()));
  rope_tables(cos_, sin_, shape.context,
              rope_inverse_frequencies(shape.head_size(), shape.rope_theta, shape.rope_scaling));
}

std::span<const float> LlamaDecoder::prefill(std::span<const int32_t> tokens) {
  const int P = static_cast<int>(tokens.size());
  if (P < 1 || P > shape_.context)
    throw RunError("LlamaDecoder::prefill takes 1 to " + std::to_string(shape_.context) +
                   " tokens, not " + std::to_string(P));
  length_ = 0;
  backend_.embedding_forward_vocab_range(x_, tokens.data(), embed_, P, shape_.n_embd, 0,
                                         shape_.padded_vocab);
  return run_positions(P);
}

std::span<const float> LlamaDecoder::step(int32_t token) {
  if (length_ >= shape_.context)
    throw RunError("LlamaDecoder::step: the cache holds all " + std::to_string(shape_.context) +
                   " positions of the context; prefill a shorter window first");
  backend_.embedding_forward_vocab_range(x_, &token, embed_, 1, shape_.n_embd, 0,
                                         shape_.padded_vocab);
  return run_positions(1);
}

std::span<const float> LlamaDecoder::run_positions(int P) {
  const int C = shape_.n_embd, NH = shape_.n_head, NKV = shape_.n_kv_head;
  const int HS = shape_.head_size(), I = shape_.intermediate, start = length_;
  const long PC = static_cast<long>(P) * C;
  const size_t TC = static_cast<size_t>(shape_.context) * C;
  const float eps = shape_.rms_norm_eps;
  // Positions start .. start + P - 1: the rotary tables from row `start` on.
  const float* cos = cos_ + static_cast<size_t>(start) * HS / 2;
  const float* sin = sin_ + static_cast<size_t>(start) * HS / 2;
  for (int l = 0; l < shape_.n_layer; ++l) {
    const Layer& w = layers_[static_cast<size_t>(l)];
    backend_.rmsnorm_forward(ln_, rstd_, x_, w.ln1, P, C, eps);
    decode_linear(backend_, fused_, ln_, w.qkv, nullptr, P, C, (NH + 2 * NKV) * HS);
    backend_.rope_qkv_forward(packed_, fused_, cos, sin, 1, P, NH, NKV, HS);
    float* K = cache_ + static_cast<size_t>(l) * 2 * TC;
    decode_attention(backend_, atty_, att_, packed_, K, K + TC, start, P, C, NH);
    decode_linear(backend_, proj_, atty_, w.o, nullptr, P, C, C);
    backend_.residual_forward(residual2_, x_, proj_, PC);
    backend_.rmsnorm_forward(ln_, rstd_, residual2_, w.ln2, P, C, eps);
    decode_linear(backend_, gate_up_, ln_, w.gate_up, nullptr, P, C, 2 * I);
    backend_.swiglu_forward(hidden_, gate_up_, P, I);
    decode_linear(backend_, proj_, hidden_, w.down, nullptr, P, I, C);
    backend_.residual_forward(x_, residual2_, proj_, PC);
  }
  length_ = start + P;
  const float* last = x_ + static_cast<size_t>(P - 1) * C;
  backend_.rmsnorm_forward(ln_, rstd_, last, norm_, 1, C, eps);
  decode_linear(backend_, logits_, ln_, head_, nullptr, 1, C, shape_.padded_vocab);
  return {logits_, static_cast<size_t>(shape_.padded_vocab)};
}

}  // namespace sg
