#include "model/llama.h"

#include <algorithm>

#include "model/arena_carver.h"
#include "model/decoder_rules.h"
#include "util/error.h"

namespace sg {
namespace {

// Pointers to one layer's tensors in a flat buffer (parameters or gradients); q, k and v (and
// gate and up) are adjacent, so qkv and gate_up start the fused products' weights.
struct LayerTensors {
  float *ln1, *qkv, *o, *ln2, *gate_up, *down;
};

LayerTensors layer_tensors(const ParameterLayout& layout, const float* base, int local_layer) {
  const auto& ts = layout.tensors();
  const size_t i = layout.block_tensors(local_layer).first;
  float* b = const_cast<float*>(base);
  auto at = [&](size_t k) { return b + ts[i + k].offset; };
  return {at(0), at(1), at(4), at(5), at(6), at(8)};
}

// Local widths: rows, model width, query width, fused q/k/v width, head size, MLP width,
// vocabulary rows.
struct Widths {
  size_t N, C, Cq, Cqkv, HS, I, Vl;
};

Widths widths_of(const LlamaShape& shape, const ParameterLayout& layout, size_t B, size_t T) {
  const LlamaSplit split = llama_split(shape, layout.shard());
  const auto HS = static_cast<size_t>(shape.head_size());
  return {B * T,
          static_cast<size_t>(shape.n_embd),
          split.heads * HS,
          (split.heads + 2 * static_cast<size_t>(split.kv_heads)) * HS,
          HS,
          static_cast<size_t>(split.mlp_width),
          static_cast<size_t>(split.vocab_rows)};
}

}  // namespace

size_t Llama::lay_out(void* base, const LlamaShape& shape, const ParameterLayout& layout, int B,
                      int T, int slots, const AttentionStorage& att, Recompute recompute,
                      std::vector<Slot>* slots_out, Scratch* scratch_out) {
  const Widths w = widths_of(shape, layout, static_cast<size_t>(B), static_cast<size_t>(T));
  const size_t N = w.N, C = w.C;
  ArenaCarver carve{static_cast<char*>(base)};
  const auto layer = [&](LayerActs& a, bool attention_state) {
    a.ln1 = carve.take(N * C);
    a.rstd1 = carve.take(N);
    a.qkv = carve.take(N * 3 * w.Cq);
    a.atty = carve.take(N * w.Cq);
    if (attention_state) a.att = carve.take(att.state);
    a.residual2 = carve.take(N * C);
    a.ln2 = carve.take(N * C);
    a.rstd2 = carve.take(N);
    a.gate_up = carve.take(N * 2 * w.I);
    a.hidden = carve.take(N * w.I);
  };
  // As GPT-2's (gpt2.cpp): selective shares one attention state, full one whole layer.
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
      s.lnf = carve.take(N * C);
      s.rstdf = carve.take(N);
      s.logits = carve.take(N * w.Vl);
      s.losses = carve.take(N);
      s.ce_stats = carve.take(3 * N);
    }
  }
  Scratch scratch;
  scratch.fused = carve.take(N * w.Cqkv);
  scratch.proj = carve.take(N * C);
  scratch.dresidual = carve.take(N * C);
  scratch.dln = carve.take(N * C);
  scratch.dqkv = carve.take(N * 3 * w.Cq);
  scratch.dfused = carve.take(N * w.Cqkv);
  scratch.datty = carve.take(N * w.Cq);
  scratch.datt = carve.take(att.scratch);
  scratch.dhidden = carve.take(N * w.I);
  scratch.dgate_up = carve.take(N * 2 * w.I);
  scratch.rope_cos = carve.take(static_cast<size_t>(T) * w.HS / 2);
  scratch.rope_sin = carve.take(static_cast<size_t>(T) * w.HS / 2);
  if (slots_out != nullptr) *slots_out = std::move(placed);
  if (scratch_out != nullptr) *scratch_out = scratch;
  return carve.used;
}

size_t llama_activation_bytes(const LlamaShape& shape, const ParameterLayout& layout, int B,
                              int T, int slots, const AttentionStorage& att, Recompute recompute) {
  return Llama::lay_out(nullptr, shape, layout, B, T, slots, att, recompute, nullptr, nullptr);
}

Llama::Llama(const LlamaShape& shape, const ParameterLayout& layout, int B, int T, int slots,
             TensorGroup* tp, Backend& backend, Recompute recompute)
    : layout_(layout), shape_(shape), split_(llama_split(shape, layout.shard())), B_(B), T_(T),
      tp_(tp), backend_(backend), recompute_(recompute), tensors_(layout.shard().tensors) {
  if (T > shape_.context)
    throw SpecError("sequence length " + std::to_string(T) + " exceeds model.context " +
                    std::to_string(shape_.context));
  if (tensors_ > 1 && (tp == nullptr || tp->size() != tensors_))
    throw RunError("Llama: a tensor-split layout needs its tensor-parallel group");
  if (backend.activation_dtype() != DType::F32)
    throw SpecError("model.arch llama computes in fp32; set train.precision: fp32");
  const char* head = shape_.tied ? "model.embed_tokens.weight" : "lm_head.weight";
  if (layout.first_stage()) embed_ = layout.find("model.embed_tokens.weight").offset;
  if (layout.last_stage()) {
    const ParamTensor& norm = layout.find("model.norm.weight");
    norm_ = norm.offset;
    norm_index_ = static_cast<size_t>(&norm - layout.tensors().data());
    // A tied head on a later stage is the embedding's copy, which keeps its name.
    head_ = layout.find(head).offset;
  }
  const AttentionStorage att = backend.attention_storage(B, T, split_.heads);
  const size_t bytes =
      lay_out(nullptr, shape, layout, B, T, slots, att, recompute, nullptr, nullptr);
  arena_ = Buffer(backend, std::max<size_t>(64, bytes));
  backend.zero(arena_.as<float>(), bytes / sizeof(float));
  lay_out(arena_.data(), shape, layout, B, T, slots, att, recompute, &slots_, &scratch_);
  // The rotary tables, computed once on the host in double.
  const int HS = shape_.head_size();
  std::vector<float> cos_table(static_cast<size_t>(T) * HS / 2), sin_table(cos_table.size());
  rope_tables(cos_table.data(), sin_table.data(), T,
              rope_inverse_frequencies(HS, shape_.rope_theta, shape_.rope_scaling));
  backend.copy_from_host(scratch_.rope_cos, cos_table.data(), cos_table.size() * sizeof(float));
  backend.copy_from_host(scratch_.rope_sin, sin_table.data(), sin_table.size() * sizeof(float));
  loss_ = {&backend, tensors_ > 1 ? tp : nullptr, B * T, shape_.vocab, split_.vocab_rows,
           split_.vocab_begin};
}

void Llama::tp_sum(float* data, size_t n) {
  if (tensors_ > 1) tp_->all_reduce_sum(data, n);
}

const float* Llama::stage_output(int slot) const {
  const Slot& s = slots_[static_cast<size_t>(slot)];
  return s.layers.empty() ? s.input : s.layers.back().residual3;
}

void Llama::block_forward(Slot& s, int l, const float* params, const float* x) {
  const int N = B_ * T_, C = shape_.n_embd, HS = shape_.head_size();
  const int NH = split_.heads, NKV = split_.kv_heads, I = split_.mlp_width, Cq = NH * HS;
  const LayerTensors w = layer_tensors(layout_, params, l);
  LayerActs& a = s.layers[static_cast<size_t>(l)];
  const float eps = shape_.rms_norm_eps;
  backend_.rmsnorm_forward(a.ln1, a.rstd1, x, w.ln1, N, C, eps);
  backend_.matmul_forward(scratch_.fused, a.ln1, w.qkv, nullptr, N, C, (NH + 2 * NKV) * HS);
  backend_.rope_qkv_forward(a.qkv, scratch_.fused, scratch_.rope_cos, scratch_.rope_sin, B_, T_,
                            NH, NKV, HS);
  backend_.attention_forward(a.atty, a.att, a.qkv, B_, T_, Cq, NH);
  backend_.matmul_forward(scratch_.proj, a.atty, w.o, nullptr, N, Cq, C);
  tp_sum(scratch_.proj, static_cast<size_t>(N) * C);
  backend_.residual_forward(a.residual2, x, scratch_.proj, static_cast<long>(N) * C);
  backend_.rmsnorm_forward(a.ln2, a.rstd2, a.residual2, w.ln2, N, C, eps);
  backend_.matmul_forward(a.gate_up, a.ln2, w.gate_up, nullptr, N, C, 2 * I);
  backend_.swiglu_forward(a.hidden, a.gate_up, N, I);
  backend_.matmul_forward(scratch_.proj, a.hidden, w.down, nullptr, N, I, C);
  tp_sum(scratch_.proj, static_cast<size_t>(N) * C);
  backend_.residual_forward(a.residual3, a.residual2, scratch_.proj, static_cast<long>(N) * C);
}

float Llama::forward_stage(int slot, const float* params, const int32_t* inputs,
                           const int32_t* targets, float fused_dloss) {
  const int N = B_ * T_, C = shape_.n_embd;
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (layout_.first_stage()) {  // each rank looks up its vocabulary rows, zeros elsewhere
    backend_.embedding_forward_vocab_range(s.input, inputs, params + embed_, N, C,
                                           split_.vocab_begin, split_.vocab_rows);
    tp_sum(s.input, static_cast<size_t>(N) * C);
  }
  const float* x = s.input;
  for (int l = 0; l < layout_.blocks(); ++l) {
    block_forward(s, l, params, x);
    x = s.layers[static_cast<size_t>(l)].residual3;
  }
  s.have_probs = false;
  if (!layout_.last_stage()) return 0.0f;
  backend_.rmsnorm_forward(s.lnf, s.rstdf, x, params + norm_, N, C, shape_.rms_norm_eps);
  backend_.matmul_forward(s.logits, s.lnf, params + head_, nullptr, N, C, split_.vocab_rows);
  if (targets == nullptr) return 0.0f;
  loss_.forward(s.losses, s.logits, s.ce_stats, targets, fused_dloss);
  s.fused_dloss = fused_dloss;
  s.have_probs = true;
  return loss_.mean(s.losses, losses_host_);
}

void Llama::block_backward(Slot& s, int l, float* grads, const float* params, const float* x) {
  const int N = B_ * T_, C = shape_.n_embd, HS = shape_.head_size();
  const int NH = split_.heads, NKV = split_.kv_heads, I = split_.mlp_width, Cq = NH * HS;
  const LayerTensors w = layer_tensors(layout_, params, l);
  const LayerTensors g = layer_tensors(layout_, grads, l);
  const LayerActs& a = s.layers[static_cast<size_t>(l)];
  Scratch& k = scratch_;
  // MLP branch; the column-parallel products' input gradients are partial sums over the tensor
  // ranks, all-reduced before the (replicated) norm's backward, which adds into dresidual.
  backend_.matmul_backward(k.dhidden, g.down, nullptr, k.dresidual, a.hidden, w.down, N, I, C);
  backend_.swiglu_backward(k.dgate_up, a.gate_up, k.dhidden, N, I);
  backend_.matmul_backward(k.dln, g.gate_up, nullptr, k.dgate_up, a.ln2, w.gate_up, N, C, 2 * I);
  tp_sum(k.dln, static_cast<size_t>(N) * C);
  backend_.rmsnorm_backward(k.dresidual, g.ln2, k.dln, a.residual2, w.ln2, a.rstd2, N, C);
  // Attention branch.
  backend_.matmul_backward(k.datty, g.o, nullptr, k.dresidual, a.atty, w.o, N, Cq, C);
  backend_.zero(k.dqkv, static_cast<size_t>(N) * 3 * Cq);
  if (recompute_ == Recompute::Selective)
    backend_.attention_forward(a.atty, a.att, a.qkv, B_, T_, Cq, NH);
  backend_.attention_backward(k.dqkv, k.datt, k.datty, a.qkv, a.atty, a.att, B_, T_, Cq, NH);
  backend_.rope_qkv_backward(k.dfused, k.dqkv, k.rope_cos, k.rope_sin, B_, T_, NH, NKV, HS);
  backend_.matmul_backward(k.dln, g.qkv, nullptr, k.dfused, a.ln1, w.qkv, N, C,
                           (NH + 2 * NKV) * HS);
  tp_sum(k.dln, static_cast<size_t>(N) * C);
  backend_.rmsnorm_backward(k.dresidual, g.ln1, k.dln, x, w.ln1, a.rstd1, N, C);
}

void Llama::head_backward(Slot& s, float* grads, const float* params, const int32_t* targets,
                          float dloss) {
  const int N = B_ * T_, C = shape_.n_embd;
  if (!s.have_probs) throw RunError("Llama::backward called without a forward pass with targets");
  if (s.fused_dloss == 0.0f) {
    loss_.backward(s.logits, s.ce_stats, targets, dloss);
  } else if (s.fused_dloss != dloss) {
    throw RunError("Llama::backward: dloss differs from the one fused into the forward pass");
  }
  s.have_probs = false;
  backend_.matmul_backward(scratch_.dln, grads + head_, nullptr, s.logits, s.lnf, params + head_,
                           N, C, split_.vocab_rows);
  tp_sum(scratch_.dln, static_cast<size_t>(N) * C);
  const float* x_last = s.layers.empty() ? s.input : s.layers.back().residual3;
  backend_.zero(scratch_.dresidual, static_cast<size_t>(N) * C);
  backend_.rmsnorm_backward(scratch_.dresidual, grads + norm_, scratch_.dln, x_last,
                            params + norm_, s.rstdf, N, C);
}

void Llama::backward_stage(int slot, float* grads, const float* params, const int32_t* inputs,
                           const int32_t* targets, float dloss, const OnReady& on_ready) {
  const auto& ts = layout_.tensors();
  Slot& s = slots_[static_cast<size_t>(slot)];
  const auto ready = [&](size_t first_tensor, size_t count) {
    if (!on_ready || count == 0) return;
    const ParamTensor& last = ts[first_tensor + count - 1];
    on_ready(ts[first_tensor].offset, last.offset + last.numel);
  };
  if (layout_.last_stage()) {
    head_backward(s, grads, params, targets, dloss);
    // model.norm.weight and what follows it: lm_head, or the tied copy of the embedding.
    ready(norm_index_, ts.size() - norm_index_);
  }
  for (int l = layout_.blocks() - 1; l >= 0; --l) {
    const float* x = l == 0 ? s.input : s.layers[static_cast<size_t>(l - 1)].residual3;
    if (recompute_ == Recompute::Full) block_forward(s, l, params, x);
    block_backward(s, l, grads, params, x);
    const auto [first, count] = layout_.block_tensors(l);
    ready(first, count);
  }
  if (layout_.first_stage()) {
    const int C = shape_.n_embd;
    backend_.encoder_backward_vocab_range(grads + embed_, nullptr, scratch_.dresidual,
                                          inputs, B_, T_, C, split_.vocab_begin,
                                          split_.vocab_rows);
    ready(0, 1);
  }
}

float Llama::forward(int slot, const float* params, float*, const MicroBatch& batch,
                     const ForwardOptions& options) {
  return forward_stage(slot, params, layout_.first_stage() ? batch.device<int32_t>(0) : nullptr,
                       layout_.last_stage() ? batch.device<int32_t>(1) : nullptr,
                       options.fused_dloss);
}

void Llama::backward(int slot, float* grads, const float* params, const MicroBatch& batch,
                     float dloss, const OnReady& on_ready) {
  backward_stage(slot, grads, params, layout_.first_stage() ? batch.device<int32_t>(0) : nullptr,
                 layout_.last_stage() ? batch.device<int32_t>(1) : nullptr, dloss, on_ready);
}

}  // namespace sg
