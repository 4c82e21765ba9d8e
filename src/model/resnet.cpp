#include "model/resnet.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "comm/communicator.h"
#include "model/arena_carver.h"
#include "util/error.h"

namespace sg {
namespace {

size_t numel(const Conv2dShape& s) { return static_cast<size_t>(s.out_size()); }

ResNetUnit resolve(const ConvBn& u, const ParameterLayout& layout, int B) {
  ResNetUnit r;
  r.conv = u.shape;
  r.conv.N = B;
  r.weight = layout.find(u.conv + ".weight").offset;
  r.gamma = layout.find(u.bn + ".weight").offset;
  r.beta = layout.find(u.bn + ".bias").offset;
  r.running_mean = layout.find(u.bn + ".running_mean").offset;
  r.running_var = layout.find(u.bn + ".running_var").offset;
  r.relu = u.relu;
  return r;
}

}  // namespace

ResNetStagePlan plan_resnet_stage(const ResNetFamily& family, const ParameterLayout& layout, int B) {
  const ResNetGraph& g = family.graph();
  ResNetStagePlan p;
  p.B = B;
  p.first = layout.first_stage();
  p.last = layout.last_stage();
  p.image_size = family.shape().image_size;
  const auto& all = layout.tensors();
  if (p.first) {
    p.stem = resolve(g.stem, layout, B);
    p.pool = g.pool;
    p.pool.N = B;
    p.input_floats = static_cast<size_t>(B) * 3 * p.image_size * p.image_size;
    p.largest = std::max({p.input_floats, numel(p.stem.conv), static_cast<size_t>(p.pool.out_size())});
  }
  for (int b = layout.first_block(); b < layout.first_block() + layout.blocks(); ++b) {
    const ResidualBlock& gb = g.blocks[static_cast<size_t>(b)];
    ResNetStageBlock sb;
    for (const ConvBn& u : gb.units) sb.units.push_back(resolve(u, layout, B));
    sb.downsample = gb.downsample;
    if (gb.downsample) sb.shortcut = resolve(gb.shortcut, layout, B);
    sb.tensors = layout.block_tensors(b - layout.first_block());
    const size_t in = static_cast<size_t>(B) * gb.in_size * gb.in_size * gb.in_channels;
    if (b == layout.first_block() && !p.first) p.input_floats = in;
    p.largest = std::max(p.largest, in);
    for (const ResNetUnit& u : sb.units) p.largest = std::max(p.largest, numel(u.conv));
    p.output_floats = static_cast<size_t>(B) * gb.out_size * gb.out_size * gb.out_channels;
    p.blocks.push_back(std::move(sb));
  }
  (void)all;
  p.features = g.features;
  p.classes = family.shape().classes;
  p.final_hw = g.final_size * g.final_size;
  if (p.last) {
    p.fc_weight = layout.find("fc.weight").offset;
    p.fc_bias = layout.find("fc.bias").offset;
  }
  return p;
}

ResNet::ResNet(const ResNetFamily& family, const ParameterLayout& layout, int B, DType storage)
    : family_(family),
      layout_(layout),
      plan_(plan_resnet_stage(family, layout, B)),
      recompute_(family.policy().recompute),
      storage_(storage) {}

ResNet::ResNet(const ResNetFamily& family, const ParameterLayout& layout,
               const StageContext& context)
    : ResNet(family, layout, context.micro_batch, context.backend->activation_dtype()) {
  backend_ = context.backend;
  replica_group_ = context.replica_group;
  sync_bn_ = family.shape().sync_bn && replica_group_ != nullptr && replica_group_->size() > 1;
  const size_t floats = lay_out(nullptr, context.slots);
  if (const size_t bytes = resnet_weight_copy_bytes(layout, storage_); bytes > 0) {
    filters16_ = Buffer(*backend_, bytes);
  }
  arena_ = Buffer(*backend_, floats * sizeof(float));
  backend_->zero(arena_.as<float>(), floats);
  lay_out(arena_.as<float>(), context.slots);
}

size_t resnet_weight_copy_bytes(const ParameterLayout& layout, DType storage) {
  return storage == DType::BF16 ? layout.total() * dtype_size(DType::BF16) : 0;
}

template <class F>
void ResNet::for_each_unit(F f) const {
  if (plan_.first) f(plan_.stem);
  for (const ResNetStageBlock& b : plan_.blocks) {
    for (const Unit& u : b.units) f(u);
    if (b.downsample) f(b.shortcut);
  }
}

void ResNet::prepare_weights(const float* params) {
  if (filters16_.data() == nullptr) return;
  auto* copy = static_cast<uint16_t*>(filters16_.data());
  for_each_unit([&](const Unit& u) {
    backend_->conv2d_filter(Act(copy + u.weight, DType::BF16), params + u.weight, u.conv);
  });
  filters_of_ = params;
}

ConstAct ResNet::filter(const Unit& u, const float* params) const {
  if (filters16_.data() == nullptr) return params + u.weight;
  if (params != filters_of_) {
    throw RunError("ResNet: a convolution on parameters its bf16 filters were not made from "
                   "(prepare_weights(params) first)");
  }
  return {static_cast<const uint16_t*>(filters16_.data()) + u.weight, DType::BF16};
}

size_t resnet_activation_floats(const ResNetFamily& family, const ParameterLayout& layout, int B,
                                int slots) {
  return ResNet(family, layout, B, family.activation_storage()).lay_out(nullptr, slots);
}

size_t ResNet::lay_out(float* arena, int slots) {
  const ResNetStagePlan& p = plan_;
  ArenaCarver carve{reinterpret_cast<char*>(arena), storage_};
  const bool act16 = storage_ != DType::F32;
  auto unit = [&](const Unit& u) {
    UnitActs a;
    a.conv = carve.act(numel(u.conv));
    a.out = carve.act(numel(u.conv));
    a.mean = carve.take(static_cast<size_t>(u.conv.K));
    a.var = carve.take(static_cast<size_t>(u.conv.K));
    return a;
  };
  // Full recompute: the blocks' units share one set of activations (each position as large as
  // its largest use); a block keeps only its output, the next block's input.
  std::vector<UnitActs> shared;
  if (recompute_ == Recompute::Full) {
    std::vector<size_t> floats, channels;
    for (const auto& b : p.blocks) {
      std::vector<const Unit*> units;
      for (const Unit& u : b.units) units.push_back(&u);
      if (b.downsample) units.push_back(&b.shortcut);
      floats.resize(std::max(floats.size(), units.size()), 0);
      channels.resize(floats.size(), 0);
      for (size_t i = 0; i < units.size(); ++i) {
        floats[i] = std::max(floats[i], numel(units[i]->conv));
        channels[i] = std::max(channels[i], static_cast<size_t>(units[i]->conv.K));
      }
    }
    for (size_t i = 0; i < floats.size(); ++i) {
      UnitActs a;
      a.conv = carve.act(floats[i]);
      a.out = carve.act(floats[i]);
      a.mean = carve.take(channels[i]);
      a.var = carve.take(channels[i]);
      shared.push_back(a);
    }
  }
  std::vector<Slot> slots_out(static_cast<size_t>(slots));
  for (Slot& s : slots_out) {
    s.input = carve.act(p.input_floats);
    s.received = !p.first ? (act16 ? carve.take(p.input_floats) : static_cast<float*>(s.input.data))
                          : nullptr;
    if (p.first) {
      s.stem = unit(p.stem);
      s.pooled = carve.act(static_cast<size_t>(p.pool.out_size()));
      s.argmax = reinterpret_cast<int32_t*>(carve.take(static_cast<size_t>(p.pool.out_size())));
    }
    for (const auto& b : p.blocks) {
      std::vector<UnitActs> acts;
      if (recompute_ == Recompute::Full) {
        acts.assign(shared.begin(), shared.begin() + static_cast<long>(b.units.size() + (b.downsample ? 1 : 0)));
        acts[b.units.size() - 1].out = carve.act(numel(b.units.back().conv));
      } else {
        for (const Unit& u : b.units) acts.push_back(unit(u));
        if (b.downsample) acts.push_back(unit(b.shortcut));
      }
      s.blocks.push_back(std::move(acts));
    }
    if (!p.last && act16) s.sent = carve.take(p.output_floats);
    if (p.last) {
      s.features = carve.take(static_cast<size_t>(p.B) * p.features);
      s.logits = carve.take(static_cast<size_t>(p.B) * p.classes);
      s.losses = carve.take(static_cast<size_t>(p.B));
    }
  }
  // Backward scratch, shared by the slots: four gradient buffers as large as the largest
  // activation and the batch norm's input gradient (in the activations' type), the pooled
  // features' gradient and the batch-norm sums.
  float* scratch[4];
  for (float*& g : scratch) g = carve.take(p.largest);
  const Act dconv = carve.act(p.largest);
  float* dfeatures = carve.take(static_cast<size_t>(p.B) * p.features);
  size_t widest = static_cast<size_t>(p.first ? p.stem.conv.K : 1);
  for (const auto& b : p.blocks) {
    for (const Unit& u : b.units) widest = std::max(widest, static_cast<size_t>(u.conv.K));
    if (b.downsample) widest = std::max(widest, static_cast<size_t>(b.shortcut.conv.K));
  }
  auto* sums = reinterpret_cast<double*>(carve.take(4 * widest));  // 2C doubles
  auto* correct = reinterpret_cast<int64_t*>(carve.take(4));       // top-1, top-5 counts
  if (arena != nullptr) {
    slots_ = std::move(slots_out);
    grad_a_ = scratch[0], grad_b_ = scratch[1], grad_c_ = scratch[2], grad_d_ = scratch[3];
    dconv_ = dconv;
    dfeatures_ = dfeatures;
    bn_sums_ = sums;
    correct_ = correct;
    output_grad_ = grad_a_;
  }
  return carve.used / sizeof(float);
}

Act ResNet::block_output(const Slot& s) const {
  return s.blocks.back()[plan_.blocks.back().units.size() - 1].out;
}

const float* ResNet::stage_output(int slot) const {
  const Slot& s = slots_[static_cast<size_t>(slot)];
  return s.sent != nullptr ? s.sent : block_output(s).f32();
}

void ResNet::reduce_over_replicas(double* sums, size_t n) {
  Communicator& group = *replica_group_;  // over host memory: the sums are a few doubles
  // Rank order, whatever the transport's: synchronised statistics are deterministic.
  local_sums_.resize(n);
  backend_->copy_to_host(local_sums_.data(), sums, n * sizeof(double));
  gathered_sums_.resize(n * static_cast<size_t>(group.size()));
  group.all_gather(gathered_sums_.data(), local_sums_.data(), n);
  for (size_t i = 0; i < n; ++i) {
    double total = 0;
    for (int r = 0; r < group.size(); ++r) total += gathered_sums_[static_cast<size_t>(r) * n + i];
    local_sums_[i] = total;
  }
  backend_->copy_from_host(sums, local_sums_.data(), n * sizeof(double));
}

void ResNet::batchnorm_train(const Unit& u, UnitActs& a, const float* params) {
  Backend& be = *backend_;
  const long M = u.rows();
  const int K = u.conv.K;
  const float eps = family_.shape().bn_eps;
  if (fused_relu(u)) {
    be.batchnorm_relu_forward_train(a.out, a.mean, a.var, a.conv, params + u.gamma,
                                    params + u.beta, M, K, eps);
    return;
  }
  if (!sync_bn_) {
    be.batchnorm_forward_train(a.out, a.mean, a.var, a.conv, params + u.gamma, params + u.beta, M,
                               K, eps);
    return;
  }
  be.batchnorm_sums(bn_sums_, a.conv, M, K);
  reduce_over_replicas(bn_sums_, 2 * static_cast<size_t>(K));
  be.batchnorm_stats(a.mean, a.var, bn_sums_, static_cast<double>(M) * replica_group_->size(), K);
  be.batchnorm_normalize(a.out, a.conv, a.mean, a.var, params + u.gamma, params + u.beta, M, K,
                         eps);
}

void ResNet::batchnorm_train_backward(const Unit& u, const UnitActs& a, const float* dy,
                                      Act dconv, float* grads, const float* params) {
  Backend& be = *backend_;
  const long M = u.rows();
  const int K = u.conv.K;
  const float eps = family_.shape().bn_eps;
  if (!sync_bn_) {
    be.batchnorm_backward(dconv, grads + u.gamma, grads + u.beta, dy, a.conv, a.mean, a.var,
                          params + u.gamma, M, K, eps);
    return;
  }
  be.batchnorm_backward_sums(bn_sums_, grads + u.gamma, grads + u.beta, dy, a.conv, a.mean, a.var,
                             M, K, eps);
  reduce_over_replicas(bn_sums_, 2 * static_cast<size_t>(K));
  be.batchnorm_backward_input(dconv, bn_sums_, dy, a.conv, a.mean, a.var, params + u.gamma,
                              static_cast<double>(M) * replica_group_->size(), M, K, eps);
}

void ResNet::unit_forward(const Unit& u, UnitActs& a, ConstAct x, const float* params,
                          float* buffers, const ForwardOptions& options, ConstAct residual) {
  Backend& be = *backend_;
  be.conv2d_forward(a.conv, x, filter(u, params), u.conv);
  const long M = u.rows();
  const int K = u.conv.K;
  // A block's last unit: its batch norm, the shortcut's sum and the ReLU after it as one op.
  const bool fused_residual = residual && options.training && !sync_bn_;
  if (fused_residual) {
    be.batchnorm_add_relu_forward_train(a.out, a.mean, a.var, a.conv, params + u.gamma,
                                        params + u.beta, residual, M, K, family_.shape().bn_eps);
  } else if (options.training) {
    batchnorm_train(u, a, params);
  }
  if (options.training) {
    if (options.update_buffers) {
      const double count = static_cast<double>(M) * (sync_bn_ ? replica_group_->size() : 1);
      be.batchnorm_update_running(buffers + u.running_mean, buffers + u.running_var, a.mean,
                                  a.var, count, K, family_.shape().bn_momentum);
    }
  } else {
    be.batchnorm_normalize(a.out, a.conv, buffers + u.running_mean, buffers + u.running_var,
                           params + u.gamma, params + u.beta, M, K, family_.shape().bn_eps);
  }
  if (u.relu && !(options.training && fused_relu(u))) be.relu_forward(a.out, a.out, M * K);
  if (residual && !fused_residual) be.add_relu_inplace(a.out, residual, M * K);
}

void ResNet::unit_backward(const Unit& u, const UnitActs& a, float* dy, ConstAct x, float* dx,
                           float* grads, const float* params, PendingAddRelu pending) {
  Backend& be = *backend_;
  const Act dconv = dconv_;
  const long n = u.rows() * u.conv.K;
  // Only the plain batch norm's backward completes a pending sum in its first pass (the units a
  // residual block ends or starts its shortcut with, which have no ReLU of their own).
  if (pending.g != nullptr && (u.relu || sync_bn_)) {
    be.add_relu_backward(dy, pending.g, pending.out, n);
    pending = {nullptr, ConstAct()};
  }
  if (fused_relu(u)) {
    be.batchnorm_relu_backward(dconv, grads + u.gamma, grads + u.beta, dy, a.conv, a.out, a.mean,
                               a.var, params + u.gamma, params + u.beta, u.rows(), u.conv.K,
                               family_.shape().bn_eps);
  } else if (pending.g != nullptr) {
    be.batchnorm_add_relu_backward(dconv, grads + u.gamma, grads + u.beta, dy, pending.g,
                                   pending.out, a.conv, a.mean, a.var, params + u.gamma, u.rows(),
                                   u.conv.K, family_.shape().bn_eps);
  } else {
    if (u.relu) be.relu_backward(dy, a.out, dy, n);
    batchnorm_train_backward(u, a, dy, dconv, grads, params);
  }
  be.conv2d_backward(dx, grads + u.weight, dconv, x, filter(u, params), u.conv);
}

void ResNet::block_forward(const ResNetStageBlock& block, std::vector<UnitActs>& acts,
                           ConstAct x, const float* params, float* buffers,
                           const ForwardOptions& options) {
  // The shortcut first: the last unit adds it (and the ReLU after the sum) to its batch norm.
  ConstAct identity = x;
  if (block.downsample) {
    unit_forward(block.shortcut, acts.back(), x, params, buffers, options);
    identity = acts.back().out;
  }
  ConstAct h = x;
  const size_t last = block.units.size() - 1;
  for (size_t i = 0; i <= last; ++i) {
    unit_forward(block.units[i], acts[i], h, params, buffers, options,
                 i == last ? identity : nullptr);
    h = acts[i].out;
  }
}

float ResNet::forward(int slot, const float* params, float* buffers, const MicroBatch& batch,
                      const ForwardOptions& options) {
  Backend& be = *backend_;
  const ResNetStagePlan& p = plan_;
  Slot& s = slots_[static_cast<size_t>(slot)];
  ConstAct x = s.input;
  // A bf16 stage's input arrives in fp32 (stage_input): its values are bf16 ones, so exact.
  if (!p.first && s.received != s.input.data) {
    be.convert(s.input, s.received, static_cast<long>(p.input_floats));
  }
  if (p.first) {
    const int S = p.image_size;
    be.nchw_to_nhwc(s.input, batch.device<float>(0), p.B, 3, S * S);  // the images are NCHW
    unit_forward(p.stem, s.stem, s.input, params, buffers, options);
    be.maxpool_forward(s.pooled, s.argmax, s.stem.out, p.pool);
    x = s.pooled;
  }
  for (size_t b = 0; b < p.blocks.size(); ++b) {
    block_forward(p.blocks[b], s.blocks[b], x, params, buffers, options);
    x = s.blocks[b][p.blocks[b].units.size() - 1].out;
  }
  s.trained = options.training;
  s.fused_dloss = options.fused_dloss;
  if (s.sent != nullptr) be.convert(s.sent, x, static_cast<long>(p.output_floats));
  if (!p.last) return 0.0f;
  be.global_avgpool_forward(s.features, x, p.B, p.final_hw, p.features);
  be.matmul_forward(s.logits, s.features, params + p.fc_weight, params + p.fc_bias, p.B,
                    p.features, p.classes);
  const int32_t* labels = batch.device<int32_t>(1);
  const float smoothing = family_.shape().label_smoothing;
  // Training fuses the logits' gradient into this pass (in place of the logits).
  be.classifier_loss_forward_backward(s.losses, options.fused_dloss != 0.0f ? s.logits : nullptr,
                                      s.logits, labels, smoothing, options.fused_dloss, p.B,
                                      p.classes);
  std::vector<float> losses(static_cast<size_t>(p.B));
  be.copy_to_host(losses.data(), s.losses, losses.size() * sizeof(float));
  double sum = 0;  // fixed order: deterministic
  for (float l : losses) sum += l;
  return static_cast<float>(sum / p.B);
}

void ResNet::add_metrics(int slot, const MicroBatch& batch, double* sums) {
  backend_->classifier_correct(correct_, correct_ + 1, slots_[static_cast<size_t>(slot)].logits,
                               batch.device<int32_t>(1), plan_.B, plan_.classes);
  int64_t counts[2] = {0, 0};
  backend_->copy_to_host(counts, correct_, sizeof(counts));
  sums[0] += static_cast<double>(counts[0]);
  sums[1] += static_cast<double>(counts[1]);
}

void ResNet::backward(int slot, float* grads, const float* params, const MicroBatch& batch,
                      float dloss, const OnReady& on_ready) {
  Backend& be = *backend_;
  const ResNetStagePlan& p = plan_;
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (!s.trained) throw RunError("ResNet::backward called without a training forward pass");
  if (p.last && s.fused_dloss != dloss) {
    throw RunError("ResNet::backward: dloss differs from the one fused into the forward pass");
  }
  (void)batch;
  const auto ready = [&](std::pair<size_t, size_t> range) {
    if (!on_ready || range.second == 0) return;
    const auto& ts = layout_.tensors();
    const ParamTensor& last = ts[range.first + range.second - 1];
    on_ready(ts[range.first].offset, last.offset + last.numel);
  };
  // g: the gradient of the current block's output. Block gradients ping-pong between a and b.
  float* g = grad_a_;
  float* other = grad_b_;
  // Where the previous iteration left g's sum and ReLU to this block's first batch norm.
  PendingAddRelu pending{};
  if (p.last) {
    be.matmul_backward(dfeatures_, grads + p.fc_weight, grads + p.fc_bias, s.logits, s.features,
                       params + p.fc_weight, p.B, p.features, p.classes);
    ready(layout_.last_tensors());
    be.global_avgpool_backward(g, dfeatures_, p.B, p.final_hw, p.features);
  }  // else output_grad() (= grad_a_) holds the gradient from the next stage
  for (size_t bi = p.blocks.size(); bi-- > 0;) {
    const ResNetStageBlock& block = p.blocks[bi];
    const std::vector<UnitActs>& acts = s.blocks[bi];
    const ConstAct x = bi > 0 ? ConstAct(s.blocks[bi - 1][p.blocks[bi - 1].units.size() - 1].out)
                              : ConstAct(p.first ? s.pooled : s.input);
    // Full recompute: rebuild the block from its input, statistics included (the running ones
    // were updated by the forward; the output it rewrites is bitwise what the forward wrote).
    if (recompute_ == Recompute::Full) {
      ForwardOptions again;
      again.training = true;
      block_forward(block, s.blocks[bi], x, params, nullptr, again);
    }
    const size_t n_units = block.units.size();
    const long n_out = block.units.back().rows() * block.units.back().conv.K;
    const long n_in = static_cast<long>(block.units.front().conv.in_size());
    // g: the gradient of the sum (the previous iteration took it through this block's ReLU).
    if (bi + 1 == p.blocks.size()) be.relu_backward(g, acts[n_units - 1].out, g, n_out);
    // The downsample shortcut's input gradient starts the block input's.
    if (block.downsample) {
      unit_backward(block.shortcut, acts.back(), g, x, other, grads, params,
                    std::exchange(pending, {}));
    }
    // The main branch, last unit first; its gradients ping-pong between c and d, and with an
    // identity shortcut the first unit's lands in `other`, which is free until then (g, the
    // identity's gradient, is only read by the units: the last one has no ReLU to apply in place).
    float* dy = g;
    float* spare[2] = {grad_c_, grad_d_};
    for (size_t i = n_units; i-- > 0;) {
      const ConstAct unit_in = i > 0 ? ConstAct(acts[i - 1].out) : x;
      float* dx = i == 0 && !block.downsample ? other : spare[i % 2];
      unit_backward(block.units[i], acts[i], dy, unit_in, dx, grads, params,
                    std::exchange(pending, {}));
      dy = dx;
    }
    // The two paths' gradients summed (the same bits either way round); where the block input
    // is the previous block's output (x, after its ReLU), taken through that ReLU as well, by
    // the previous block's first batch norm back, which reads the sum as it makes it (the
    // buffer holding the other gradient is not written before that).
    if (bi > 0) {
      pending = {block.downsample ? dy : g, x};
    } else {
      be.add_inplace(other, block.downsample ? dy : g, n_in);
    }
    ready(block.tensors);
    std::swap(g, other);  // g: the gradient of this block's input = the previous block's output
  }
  if (p.first) {
    be.maxpool_backward(other, g, s.argmax, p.pool);
    unit_backward(p.stem, s.stem, other, s.input, nullptr, grads, params);
    ready(layout_.first_tensors());
  }
  input_grad_ = g;
}

}  // namespace sg
