#include "model/gpt2.h"

#include <cstring>

#include "kernels/attention.h"
#include "kernels/crossentropy.h"
#include "kernels/encoder.h"
#include "kernels/gelu.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/residual.h"
#include "util/error.h"

namespace sg {
namespace {

// Pointers to one block's tensors in a flat buffer (parameters or gradients).
struct BlockTensors {
  float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw,
      *fcprojb;
};

BlockTensors block_tensors(const ParameterLayout& layout, const float* base, int layer) {
  const auto& ts = layout.tensors();
  const size_t i = layout.block_first(layer);
  float* b = const_cast<float*>(base);
  auto at = [&](size_t k) { return b + ts[i + k].offset; };
  return {at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7), at(8), at(9), at(10), at(11)};
}

// Per-layer activation floats for N = B*T rows.
size_t layer_floats(const GPT2Shape& s, size_t B, size_t T) {
  const size_t N = B * T, C = s.n_embd, NH = s.n_head;
  return N * C        // ln1
         + 2 * N      // ln1 mean, rstd
         + N * 3 * C  // qkv
         + N * C      // atty
         + B * NH * T * T  // att
         + N * C      // attproj
         + N * C      // residual2
         + N * C + 2 * N  // ln2, mean, rstd
         + 2 * N * 4 * C  // fch, fch_gelu
         + N * C      // fcproj
         + N * C;     // residual3
}

}  // namespace

size_t gpt2_activation_floats(const GPT2Shape& s, int B_, int T_) {
  const size_t B = B_, T = T_, N = B * T, C = s.n_embd, NH = s.n_head;
  const size_t forward = N * C /*encoded*/ + s.n_layer * layer_floats(s, B, T) +
                         N * C + 2 * N /*lnf*/ + N * s.padded_vocab /*logits*/ + N /*losses*/;
  const size_t scratch = N * C /*dresidual*/ + N * 4 * C /*dln, big enough for any*/ +
                         N * 3 * C /*dqkv*/ + N * C /*datty*/ + B * NH * T * T /*datt*/ +
                         2 * N * 4 * C /*dfch, dfch_gelu*/;
  return forward + scratch;
}

GPT2::GPT2(const ParameterLayout& layout, int B, int T)
    : layout_(layout), shape_(layout.shape()), B_(B), T_(T) {
  if (T > shape_.context) {
    throw SpecError("sequence length " + std::to_string(T) + " exceeds model.context " +
                    std::to_string(shape_.context));
  }
  arena_.assign(gpt2_activation_floats(shape_, B, T), 0.0f);
  float* p = arena_.data();
  auto take = [&](size_t n) {
    float* r = p;
    p += n;
    return r;
  };
  const size_t N = static_cast<size_t>(B) * T, C = shape_.n_embd, NH = shape_.n_head;
  encoded_ = take(N * C);
  layers_.resize(shape_.n_layer);
  for (auto& a : layers_) {
    a.ln1 = take(N * C);
    a.ln1_mean = take(N);
    a.ln1_rstd = take(N);
    a.qkv = take(N * 3 * C);
    a.atty = take(N * C);
    a.att = take(static_cast<size_t>(B) * NH * T * T);
    a.attproj = take(N * C);
    a.residual2 = take(N * C);
    a.ln2 = take(N * C);
    a.ln2_mean = take(N);
    a.ln2_rstd = take(N);
    a.fch = take(N * 4 * C);
    a.fch_gelu = take(N * 4 * C);
    a.fcproj = take(N * C);
    a.residual3 = take(N * C);
  }
  lnf_ = take(N * C);
  lnf_mean_ = take(N);
  lnf_rstd_ = take(N);
  logits_ = take(N * shape_.padded_vocab);
  losses_ = take(N);
  dresidual_ = take(N * C);
  dln_ = take(N * 4 * C);
  dqkv_ = take(N * 3 * C);
  datty_ = take(N * C);
  datt_ = take(static_cast<size_t>(B) * NH * T * T);
  dfch_ = take(N * 4 * C);
  dfch_gelu_ = take(N * 4 * C);
}

float GPT2::forward(const float* params, const int32_t* inputs, const int32_t* targets,
                    float fused_dloss) {
  const int B = B_, T = T_, C = shape_.n_embd, NH = shape_.n_head, N = B * T;
  const int V = shape_.vocab, Vp = shape_.padded_vocab;
  const auto& ts = layout_.tensors();
  const float* wte = params + ts[0].offset;
  const float* wpe = params + ts[1].offset;

  cpu::encoder_forward(encoded_, inputs, wte, wpe, B, T, C);
  const float* x = encoded_;
  for (int l = 0; l < shape_.n_layer; ++l) {
    const BlockTensors w = block_tensors(layout_, params, l);
    LayerActs& a = layers_[l];
    cpu::layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, w.ln1w, w.ln1b, N, C);
    cpu::matmul_forward(a.qkv, a.ln1, w.qkvw, w.qkvb, N, C, 3 * C);
    cpu::attention_forward(a.atty, a.att, a.qkv, B, T, C, NH);
    cpu::matmul_forward(a.attproj, a.atty, w.attprojw, w.attprojb, N, C, C);
    cpu::residual_forward(a.residual2, x, a.attproj, static_cast<long>(N) * C);
    cpu::layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.residual2, w.ln2w, w.ln2b, N, C);
    cpu::matmul_forward(a.fch, a.ln2, w.fcw, w.fcb, N, C, 4 * C);
    cpu::gelu_forward(a.fch_gelu, a.fch, static_cast<long>(N) * 4 * C);
    cpu::matmul_forward(a.fcproj, a.fch_gelu, w.fcprojw, w.fcprojb, N, 4 * C, C);
    cpu::residual_forward(a.residual3, a.residual2, a.fcproj, static_cast<long>(N) * C);
    x = a.residual3;
  }
  const float* lnfw = params + ts[ts.size() - 2].offset;
  const float* lnfb = params + ts[ts.size() - 1].offset;
  cpu::layernorm_forward(lnf_, lnf_mean_, lnf_rstd_, x, lnfw, lnfb, N, C);
  cpu::matmul_forward(logits_, lnf_, wte, nullptr, N, C, Vp);
  have_probs_ = false;
  if (targets == nullptr) return 0.0f;

  if (fused_dloss != 0.0f) {
    cpu::crossentropy_forward_backward(losses_, logits_, logits_, targets, fused_dloss, N, V, Vp);
  } else {
    cpu::crossentropy_forward(losses_, logits_, logits_, targets, N, V, Vp);
  }
  fused_dloss_ = fused_dloss;
  have_probs_ = true;
  double sum = 0;  // fixed order: deterministic
  for (int i = 0; i < N; ++i) sum += losses_[i];
  return static_cast<float>(sum / N);
}

void GPT2::backward(float* grads, const float* params, const int32_t* inputs,
                    const int32_t* targets, float dloss,
                    const std::function<void(size_t, size_t)>& on_ready) {
  if (!have_probs_) throw RunError("GPT2::backward called without a forward pass with targets");
  const int B = B_, T = T_, C = shape_.n_embd, NH = shape_.n_head, N = B * T;
  const int V = shape_.vocab, Vp = shape_.padded_vocab;
  const long NC = static_cast<long>(N) * C;
  const auto& ts = layout_.tensors();
  const float* wte = params + ts[0].offset;
  float* dwte = grads + ts[0].offset;
  float* dwpe = grads + ts[1].offset;

  // Logits gradient in place of the probabilities (unless the forward already fused it), then
  // the tied LM head.
  if (fused_dloss_ == 0.0f) {
    cpu::crossentropy_backward(logits_, logits_, targets, dloss, N, V, Vp);
  } else if (fused_dloss_ != dloss) {
    throw RunError("GPT2::backward: dloss differs from the one fused into the forward pass");
  }
  have_probs_ = false;
  std::memset(dln_, 0, sizeof(float) * NC);
  cpu::matmul_backward(dln_, dwte, nullptr, logits_, lnf_, wte, N, C, Vp);

  const float* x_last = shape_.n_layer > 0 ? layers_.back().residual3 : encoded_;
  const float* lnfw = params + ts[ts.size() - 2].offset;
  std::memset(dresidual_, 0, sizeof(float) * NC);
  cpu::layernorm_backward(dresidual_, grads + ts[ts.size() - 2].offset,
                          grads + ts[ts.size() - 1].offset, dln_, x_last, lnfw, lnf_mean_,
                          lnf_rstd_, N, C);

  const auto ready = [&](size_t first_tensor, size_t tensors) {
    if (!on_ready) return;
    const ParamTensor& last = ts[first_tensor + tensors - 1];
    on_ready(ts[first_tensor].offset, last.offset + last.numel);
  };
  ready(ts.size() - 2, 2);  // ln_f

  // dresidual_ holds the gradient of the residual stream; each block adds its branches in place.
  for (int l = shape_.n_layer - 1; l >= 0; --l) {
    const BlockTensors w = block_tensors(layout_, params, l);
    const BlockTensors g = block_tensors(layout_, grads, l);
    const LayerActs& a = layers_[l];
    const float* x = l == 0 ? encoded_ : layers_[l - 1].residual3;

    // MLP branch: residual3 = residual2 + fcproj(gelu(fc(ln2(residual2))))
    std::memset(dfch_gelu_, 0, sizeof(float) * NC * 4);
    cpu::matmul_backward(dfch_gelu_, g.fcprojw, g.fcprojb, dresidual_, a.fch_gelu, w.fcprojw, N,
                         4 * C, C);
    std::memset(dfch_, 0, sizeof(float) * NC * 4);
    cpu::gelu_backward(dfch_, a.fch, dfch_gelu_, NC * 4);
    std::memset(dln_, 0, sizeof(float) * NC);
    cpu::matmul_backward(dln_, g.fcw, g.fcb, dfch_, a.ln2, w.fcw, N, C, 4 * C);
    cpu::layernorm_backward(dresidual_, g.ln2w, g.ln2b, dln_, a.residual2, w.ln2w, a.ln2_mean,
                            a.ln2_rstd, N, C);

    // Attention branch: residual2 = x + attproj(attention(qkv(ln1(x))))
    std::memset(datty_, 0, sizeof(float) * NC);
    cpu::matmul_backward(datty_, g.attprojw, g.attprojb, dresidual_, a.atty, w.attprojw, N, C, C);
    std::memset(dqkv_, 0, sizeof(float) * NC * 3);
    cpu::attention_backward(dqkv_, datt_, datty_, a.qkv, a.att, B, T, C, NH);
    std::memset(dln_, 0, sizeof(float) * NC);
    cpu::matmul_backward(dln_, g.qkvw, g.qkvb, dqkv_, a.ln1, w.qkvw, N, C, 3 * C);
    cpu::layernorm_backward(dresidual_, g.ln1w, g.ln1b, dln_, x, w.ln1w, a.ln1_mean, a.ln1_rstd,
                            N, C);
    ready(layout_.block_first(l), ParameterLayout::kPerBlock);
  }
  cpu::encoder_backward(dwte, dwpe, dresidual_, inputs, B, T, C);
  ready(0, 2);  // wte (also the LM head), wpe
}

}  // namespace sg
