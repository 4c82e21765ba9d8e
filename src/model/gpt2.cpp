#include "model/gpt2.h"

#include <algorithm>
#include <cstring>

#include "model/arena_carver.h"
#include "model/decoder_rules.h"
#include "util/error.h"

namespace sg {
namespace {

// Pointers to one block's tensors in a flat buffer (parameters or gradients).
struct BlockTensors {
  float *ln1w, *ln1b, *qkvw, *qkvb, *attprojw, *attprojb, *ln2w, *ln2b, *fcw, *fcb, *fcprojw,
      *fcprojb;
};

BlockTensors block_tensors(const ParameterLayout& layout, const float* base, int local_layer) {
  const auto& ts = layout.tensors();
  const size_t i = layout.block_tensors(local_layer).first;
  float* b = const_cast<float*>(base);
  auto at = [&](size_t k) { return b + ts[i + k].offset; };
  return {at(0), at(1), at(2), at(3), at(4), at(5), at(6), at(7), at(8), at(9), at(10), at(11)};
}

// Local widths of a shard.
struct Widths {
  size_t N, C, Ca, Cm, NHl, Vl;  // rows, model width, attention, MLP, heads, vocabulary rows
};

Widths widths_of(const GPT2Shape& shape, const ParameterLayout& layout, size_t B, size_t T) {
  const GPT2Split split = gpt2_split(shape, layout.shard());
  return {B * T,
          static_cast<size_t>(shape.n_embd),
          static_cast<size_t>(split.attn_width),
          static_cast<size_t>(split.mlp_width),
          static_cast<size_t>(split.local_heads),
          static_cast<size_t>(split.vocab_rows)};
}

}  // namespace

size_t GPT2::lay_out(void* base, const GPT2Shape& shape, const ParameterLayout& layout, int B,
                     int T, int slots, const AttentionStorage& att, Recompute recompute,
                     DType storage, std::vector<Slot>* slots_out, Scratch* scratch_out) {
  const Widths w = widths_of(shape, layout, static_cast<size_t>(B), static_cast<size_t>(T));
  const size_t N = w.N, C = w.C;
  ArenaCarver carve{static_cast<char*>(base), storage};
  // One layer's activations: all of them, or (shared) those a recompute rebuilds.
  const auto layer = [&](LayerActs& a, bool attention_state) {
    a.ln1 = carve.act(N * C);
    a.ln1_mean = carve.take(N);
    a.ln1_rstd = carve.take(N);
    a.qkv = carve.act(N * 3 * w.Ca);
    a.atty = carve.act(N * w.Ca);
    if (attention_state) a.att = carve.take(att.state);
    a.attproj = carve.take(N * C);
    a.residual2 = carve.take(N * C);
    a.ln2 = carve.act(N * C);
    a.ln2_mean = carve.take(N);
    a.ln2_rstd = carve.take(N);
    a.fch = carve.act(N * w.Cm);
    a.fch_gelu = carve.act(N * w.Cm);
    a.fcproj = carve.take(N * C);
  };
  // What the stage's layers share: selective keeps one attention state, full one whole layer
  // (all but its output, which each layer keeps as the next one's input).
  LayerActs shared;
  if (recompute == Recompute::Full) layer(shared, true);
  if (recompute == Recompute::Selective) shared.att = carve.take(att.state);
  std::vector<Slot> placed(static_cast<size_t>(slots));
  for (Slot& s : placed) {
    s.input = carve.take(N * C);
    s.layers.resize(static_cast<size_t>(layout.blocks()));
    for (LayerActs& a : s.layers) {
      place_layer(a, shared, recompute, layer);
      a.residual3 = carve.take(N * C);
    }
    if (layout.last_stage()) {
      s.lnf = carve.act(N * C);
      s.lnf_mean = carve.take(N);
      s.lnf_rstd = carve.take(N);
      // The vocabulary-parallel loss (Megatron's) works on fp32 logits.
      s.logits = layout.shard().tensors == 1 ? carve.act(N * w.Vl) : Act(carve.take(N * w.Vl));
      s.losses = carve.take(N);
      s.ce_stats = carve.take(3 * N);
    }
  }
  // Gradient scratch, reused by every layer and slot.
  Scratch scratch;
  scratch.dresidual = carve.take(N * C);
  scratch.dln = carve.take(N * C);
  scratch.dqkv = carve.take(N * 3 * w.Ca);
  scratch.datty = carve.act(N * w.Ca);
  scratch.datt = carve.take(att.scratch);
  scratch.dfch = carve.act(N * w.Cm);
  scratch.dfch_gelu = carve.act(N * w.Cm);
  if (slots_out != nullptr) *slots_out = std::move(placed);
  if (scratch_out != nullptr) *scratch_out = scratch;
  return carve.used;
}

size_t gpt2_activation_bytes(const GPT2Shape& shape, const ParameterLayout& layout, int B, int T,
                             int slots, const AttentionStorage& att, Recompute recompute,
                             DType storage) {
  return GPT2::lay_out(nullptr, shape, layout, B, T, slots, att, recompute, storage, nullptr,
                       nullptr);
}

size_t gpt2_weight_copy_bytes(const ParameterLayout& layout, DType storage) {
  return storage == DType::BF16 ? layout.total() * dtype_size(DType::BF16) : 0;
}

GPT2::GPT2(const GPT2Shape& shape, const ParameterLayout& layout, int B, int T, int slots,
           TensorGroup* tp, Backend& backend, Recompute recompute)
    : layout_(layout), shape_(shape), split_(gpt2_split(shape, layout.shard())), B_(B), T_(T),
      tp_(tp), backend_(backend), recompute_(recompute), tensors_(layout.shard().tensors) {
  if (T > shape_.context) {
    throw SpecError("sequence length " + std::to_string(T) + " exceeds model.context " +
                    std::to_string(shape_.context));
  }
  if (tensors_ > 1 && (tp == nullptr || tp->size() != tensors_)) {
    throw RunError("GPT2: a tensor-split layout needs its tensor-parallel group");
  }
  if (const ParamTensor* t = layout.find_if("wte")) wte_ = t->offset;
  if (layout.first_stage()) wpe_ = layout.find("wpe").offset;
  if (layout.last_stage()) {
    const ParamTensor& lnfw = layout.find("ln_f.weight");
    lnfw_ = lnfw.offset;
    lnf_index_ = static_cast<size_t>(&lnfw - layout.tensors().data());
    lnfb_ = layout.find("ln_f.bias").offset;
  }
  const AttentionStorage att = backend.attention_storage(B, T, split_.local_heads);
  const DType storage = backend.activation_dtype();
  const size_t bytes =
      lay_out(nullptr, shape, layout, B, T, slots, att, recompute, storage, nullptr, nullptr);
  arena_ = Buffer(backend, std::max<size_t>(64, bytes));
  backend.zero(arena_.as<float>(), bytes / sizeof(float));  // whole 64-byte lines
  Scratch scratch;
  lay_out(arena_.data(), shape, layout, B, T, slots, att, recompute, storage, &slots_, &scratch);
  dresidual_ = scratch.dresidual;
  dln_ = scratch.dln;
  dqkv_ = scratch.dqkv;
  datty_ = scratch.datty;
  datt_ = scratch.datt;
  dfch_ = scratch.dfch;
  dfch_gelu_ = scratch.dfch_gelu;
  loss_ = {&backend, tensors_ > 1 ? tp : nullptr, B * T, shape_.vocab, split_.vocab_rows,
           split_.vocab_begin};
  if (const size_t copy = gpt2_weight_copy_bytes(layout, storage); copy > 0) {
    weights16_ = Buffer(backend, copy);
  }
}

void GPT2::prepare_weights(const float* params) {
  if (weights16_.data() == nullptr) return;
  backend_.convert(Act(weights16_.data(), DType::BF16), params, static_cast<long>(layout_.total()));
  weights_of_ = params;
}

ConstAct GPT2::product_weight(const float* params, const float* w) const {
  if (weights16_.data() == nullptr) return w;
  const auto* copy = static_cast<const uint16_t*>(weights16_.data());
  return {copy + (w - params), DType::BF16};
}

void GPT2::tp_sum(float* data, size_t n) {
  if (tensors_ > 1) tp_->all_reduce_sum(data, n);
}

const float* GPT2::stage_output(int slot) const {
  const Slot& s = slots_[slot];
  return s.layers.empty() ? s.input : s.layers.back().residual3;
}

void GPT2::block_forward(Slot& s, int l, const float* params, const float* x) {
  const int B = B_, T = T_, N = B * T, C = shape_.n_embd;
  const int Ca = split_.attn_width, Cm = split_.mlp_width, NH = split_.local_heads;
  const BlockTensors w = block_tensors(layout_, params, l);
  LayerActs& a = s.layers[l];
  const bool split = tensors_ > 1;
  // Attention: heads split column-parallel (qkv), output projection row-parallel, whose partial
  // sums are all-reduced before the (replicated) bias is added.
  backend_.layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, w.ln1w, w.ln1b, N, C);
  const auto W = [&](const float* p) { return product_weight(params, p); };
  backend_.matmul_forward(a.qkv, a.ln1, W(w.qkvw), w.qkvb, N, C, 3 * Ca);
  backend_.attention_forward(a.atty, a.att, a.qkv, B, T, Ca, NH);
  backend_.matmul_forward(a.attproj, a.atty, W(w.attprojw), split ? nullptr : w.attprojb, N, Ca, C);
  if (split) {
    tp_sum(a.attproj, static_cast<size_t>(N) * C);
    backend_.add_bias(a.attproj, w.attprojb, N, C);
  }
  // The residual and the MLP's norm in one pass. (The block's last residual stays apart from the
  // next block's ln1: under full recompute the layers share one set of buffers, and rebuilding
  // layer l alone must start from its ln1.)
  backend_.residual_layernorm_forward(a.residual2, a.ln2, a.ln2_mean, a.ln2_rstd, x, a.attproj,
                                      w.ln2w, w.ln2b, N, C);
  // MLP: c_fc column-parallel, c_proj row-parallel.
  backend_.matmul_forward(a.fch, a.ln2, W(w.fcw), w.fcb, N, C, Cm);
  backend_.gelu_forward(a.fch_gelu, a.fch, static_cast<long>(N) * Cm);
  backend_.matmul_forward(a.fcproj, a.fch_gelu, W(w.fcprojw), split ? nullptr : w.fcprojb, N, Cm, C);
  if (split) {
    tp_sum(a.fcproj, static_cast<size_t>(N) * C);
    backend_.add_bias(a.fcproj, w.fcprojb, N, C);
  }
  backend_.residual_forward(a.residual3, a.residual2, a.fcproj, static_cast<long>(N) * C);
}

float GPT2::forward_stage(int slot, const float* params, const int32_t* inputs,
                          const int32_t* targets, float fused_dloss) {
  const int B = B_, T = T_, C = shape_.n_embd, N = B * T;
  Slot& s = slots_[slot];
  if (weights16_.data() != nullptr && params != weights_of_) {
    throw RunError("GPT2: forward on parameters its bf16 working copy was not made from "
                   "(prepare_weights(params) first)");
  }
  if (layout_.first_stage()) {
    if (tensors_ == 1) {
      backend_.encoder_forward(s.input, inputs, params + wte_, params + wpe_, B, T, C);
    } else {  // each rank looks up its vocabulary rows, zeros elsewhere; the sum is exact
      backend_.embedding_forward_vocab_range(s.input, inputs, params + wte_, N, C,
                                         split_.vocab_begin, split_.vocab_rows);
      tp_sum(s.input, static_cast<size_t>(N) * C);
      backend_.position_add(s.input, params + wpe_, B, T, C);
    }
  }
  const float* x = s.input;
  for (int l = 0; l < layout_.blocks(); ++l) {
    block_forward(s, l, params, x);
    x = s.layers[l].residual3;
  }
  s.have_probs = false;
  if (!layout_.last_stage()) return 0.0f;
  backend_.layernorm_forward(s.lnf, s.lnf_mean, s.lnf_rstd, x, params + lnfw_, params + lnfb_, N, C);
  backend_.matmul_forward(s.logits, s.lnf, product_weight(params, params + wte_), nullptr, N, C,
                          split_.vocab_rows);
  if (targets == nullptr) return 0.0f;
  loss_.forward(s.losses, s.logits, s.ce_stats, targets, fused_dloss);
  s.fused_dloss = fused_dloss;
  s.have_probs = true;
  return loss_.mean(s.losses, losses_host_);
}

void GPT2::logits_backward(Slot& s, const int32_t* targets, float dloss) {
  if (!s.have_probs) throw RunError("GPT2::backward called without a forward pass with targets");
  if (s.fused_dloss == 0.0f) {
    loss_.backward(s.logits, s.ce_stats, targets, dloss);
  } else if (s.fused_dloss != dloss) {
    throw RunError("GPT2::backward: dloss differs from the one fused into the forward pass");
  }
  s.have_probs = false;
}

void GPT2::block_backward(Slot& s, int l, float* grads, const float* params, const float* x) {
  const int B = B_, T = T_, C = shape_.n_embd, N = B * T;
  const int Ca = split_.attn_width, Cm = split_.mlp_width, NH = split_.local_heads;
  const long NC = static_cast<long>(N) * C;
  const BlockTensors w = block_tensors(layout_, params, l);
  const BlockTensors g = block_tensors(layout_, grads, l);
  const LayerActs& a = s.layers[l];
  // The row-parallel layers' input gradients are local; the column-parallel layers' are partial
  // sums over the tensor ranks, all-reduced before the (replicated) layernorm backward.
  // MLP branch: residual3 = residual2 + fcproj(gelu(fc(ln2(residual2))))
  // matmul_backward and gelu_backward write their input gradients: no zeroing first.
  const auto W = [&](const float* p) { return product_weight(params, p); };
  backend_.matmul_backward(dfch_gelu_, g.fcprojw, g.fcprojb, dresidual_, a.fch_gelu, W(w.fcprojw),
                           N, Cm, C);
  backend_.gelu_backward(dfch_, a.fch, dfch_gelu_, static_cast<long>(N) * Cm);
  backend_.matmul_backward(dln_, g.fcw, g.fcb, dfch_, a.ln2, W(w.fcw), N, C, Cm);
  tp_sum(dln_, static_cast<size_t>(NC));
  backend_.layernorm_backward(dresidual_, g.ln2w, g.ln2b, dln_, a.residual2, w.ln2w, a.ln2_mean,
                          a.ln2_rstd, N, C);
  // Attention branch: residual2 = x + attproj(attention(qkv(ln1(x))))
  backend_.matmul_backward(datty_, g.attprojw, g.attprojb, dresidual_, a.atty, W(w.attprojw), N, Ca,
                           C);
  zero(dqkv_, static_cast<size_t>(N) * 3 * Ca);
  // Selective recompute: every layer shares one attention state, so this layer's is rebuilt from
  // its kept q, k, v (the output it rewrites is bitwise what the forward wrote).
  if (recompute_ == Recompute::Selective) backend_.attention_forward(a.atty, a.att, a.qkv, B, T, Ca, NH);
  backend_.attention_backward(dqkv_, datt_, datty_, a.qkv, a.atty, a.att, B, T, Ca, NH);
  backend_.matmul_backward(dln_, g.qkvw, g.qkvb, dqkv_, a.ln1, W(w.qkvw), N, C, 3 * Ca);
  tp_sum(dln_, static_cast<size_t>(NC));
  backend_.layernorm_backward(dresidual_, g.ln1w, g.ln1b, dln_, x, w.ln1w, a.ln1_mean, a.ln1_rstd, N,
                          C);
}

void GPT2::backward_stage(int slot, float* grads, const float* params, const int32_t* inputs,
                          const int32_t* targets, float dloss,
                          const OnReady& on_ready) {
  const int B = B_, T = T_, C = shape_.n_embd, N = B * T;
  const long NC = static_cast<long>(N) * C;
  const auto& ts = layout_.tensors();
  Slot& s = slots_[slot];
  const auto ready = [&](size_t first_tensor, size_t tensors) {
    if (!on_ready) return;
    const ParamTensor& last = ts[first_tensor + tensors - 1];
    on_ready(ts[first_tensor].offset, last.offset + last.numel);
  };
  const int layers = layout_.blocks();
  if (layout_.last_stage()) {
    // Logits gradient in place of the probabilities (unless the forward already fused it), then
    // the tied LM head, whose input gradient is a partial sum over the vocabulary shards.
    logits_backward(s, targets, dloss);
    backend_.matmul_backward(dln_, grads + wte_, nullptr, s.logits, s.lnf,
                             product_weight(params, params + wte_), N, C, split_.vocab_rows);
    tp_sum(dln_, static_cast<size_t>(NC));
    const float* x_last = layers > 0 ? s.layers.back().residual3 : s.input;
    zero(dresidual_, static_cast<size_t>(NC));
    backend_.layernorm_backward(dresidual_, grads + lnfw_, grads + lnfb_, dln_, x_last,
                            params + lnfw_, s.lnf_mean, s.lnf_rstd, N, C);
    ready(lnf_index_, 2);
    if (!layout_.first_stage()) ready(ts.size() - 1, 1);  // the tied copy of wte
  }
  // dresidual_ holds the gradient of the residual stream; each block adds its branches in place.
  for (int l = layers - 1; l >= 0; --l) {
    const float* x = l == 0 ? s.input : s.layers[l - 1].residual3;
    // Full recompute: the layer's activations are rebuilt from its kept input (its tensor-
    // parallel sums included; every rank of the group recomputes alike).
    if (recompute_ == Recompute::Full) block_forward(s, l, params, x);
    block_backward(s, l, grads, params, x);
    const auto [first, count] = layout_.block_tensors(l);
    ready(first, count);
  }
  if (layout_.first_stage()) {
    if (tensors_ == 1) {
      backend_.encoder_backward(grads + wte_, grads + wpe_, dresidual_, inputs, B, T, C);
    } else {
      backend_.encoder_backward_vocab_range(grads + wte_, grads + wpe_, dresidual_, inputs, B, T, C,
                                        split_.vocab_begin, split_.vocab_rows);
    }
    ready(0, 2);  // wte (also the LM head), wpe
  }
}

}  // namespace sg

namespace sg {

// The batch's device copies: token ids for the first stage, targets for the last (a middle
// stage's batch is never filled).
float GPT2::forward(int slot, const float* params, float*, const MicroBatch& batch,
                    const ForwardOptions& options) {
  return forward_stage(slot, params, layout_.first_stage() ? batch.device<int32_t>(0) : nullptr,
                       layout_.last_stage() ? batch.device<int32_t>(1) : nullptr,
                       options.fused_dloss);
}

void GPT2::backward(int slot, float* grads, const float* params, const MicroBatch& batch,
                    float dloss, const OnReady& on_ready) {
  backward_stage(slot, grads, params, layout_.first_stage() ? batch.device<int32_t>(0) : nullptr,
                 layout_.last_stage() ? batch.device<int32_t>(1) : nullptr, dloss, on_ready);
}

}  // namespace sg
