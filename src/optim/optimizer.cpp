#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>

#include "optim/muon.h"
#include "util/error.h"

namespace sg {
namespace {

// torch.nn.utils.clip_grad_norm_'s factor: max_norm / (norm + 1e-6) where the norm is above
// max_norm (<= 0: no clipping), else 1.
float clip_scale(double norm, double max_norm) {
  if (!(max_norm > 0) || !(norm > max_norm)) return 1.0f;
  return static_cast<float>(max_norm / (norm + 1e-6));
}

}  // namespace

Optimizer::Optimizer(const ParameterLayout& layout, const OptimSpec& spec, size_t begin,
                     size_t end, Backend& backend, size_t state_count)
    : layout_(layout), spec_(spec), backend_(backend), begin_(begin),
      end_(std::min(end, layout.total())) {
  if (begin_ > end_) begin_ = end_;  // a rank past the end of a small model owns nothing
  const size_t n = end_ - begin_;
  for (size_t i = 0; i < state_count; ++i) {
    state_.emplace_back(backend, n * sizeof(float));
    backend.zero(state_.back().as<float>(), n);
  }
  // The update is elementwise, so neighbouring tensors with the same decay make one range (the
  // same bits), and the backend takes every range in one call: on the CPU one parallel region,
  // one wake-up of the OpenMP workers (~50 us on the 2-core VMs) instead of one a tensor (161
  // for ResNet-50, whose tensors alternate between a convolution's weight and a batch norm's
  // pair, 108 ranges).
  const float decay = static_cast<float>(spec_.weight_decay);
  for (const ParamTensor& t : layout_.tensors()) {
    // The part of tensor t inside [begin, end), relative to begin.
    const size_t lo = std::max(t.offset, begin_), hi = std::min(t.offset + t.numel, end_);
    if (lo >= hi) continue;
    const float wd = t.decay ? decay : 0.0f;
    const long from = static_cast<long>(lo - begin_), to = static_cast<long>(hi - begin_);
    if (!ranges_.empty() && ranges_.back().end == from && ranges_.back().weight_decay == wd) {
      ranges_.back().end = to;
    } else {
      ranges_.push_back({from, to, wd});
    }
  }
}

float Optimizer::step(float* params, float* grads, double lr, int step) {
  const double norm =
      std::sqrt(backend_.sum_of_squares(grads + begin_, static_cast<long>(end_ - begin_)));
  update_range(params, grads, norm, lr, step);
  return static_cast<float>(norm);
}

void Optimizer::update_range(float* params, float* grads, double norm, double lr, int step) {
  // The clipping factor goes to the update, which scales each gradient as it reads it: the same
  // arithmetic as scaling the gradient first, without a pass over it of its own.
  const float grad_scale = clip_scale(norm, static_cast<float>(spec_.grad_clip));
  if (ranges_.empty()) return;
  apply(params + begin_, grads + begin_, ranges_, lr, step, grad_scale);
}

void AdamWOptimizer::apply(float* params, const float* grads, std::span<const UpdateRange> ranges,
                           double lr, int step, float grad_scale) {
  backend_.adamw_update_ranges(params, state(0), state(1), grads, ranges, static_cast<float>(lr),
                               static_cast<float>(spec_.betas[0]),
                               static_cast<float>(spec_.betas[1]), static_cast<float>(spec_.eps),
                               step, grad_scale);
}

void SgdOptimizer::apply(float* params, const float* grads, std::span<const UpdateRange> ranges,
                         double lr, int, float grad_scale) {
  backend_.sgd_update_ranges(params, state(0), grads, ranges, static_cast<float>(lr),
                             static_cast<float>(spec_.momentum), spec_.nesterov, grad_scale);
}

std::unique_ptr<Optimizer> make_optimizer(const OptimSpec& spec, const ParameterLayout& layout,
                                          size_t begin, size_t end, Backend& backend,
                                          const OptimizerGroups* groups) {
  switch (spec.name) {
    case OptimizerKind::Muon:
      return std::make_unique<MuonOptimizer>(layout, spec, begin, end, backend,
                                             groups != nullptr ? *groups : OptimizerGroups{});
    case OptimizerKind::AdamW: return std::make_unique<AdamWOptimizer>(layout, spec, begin, end, backend);
    case OptimizerKind::Sgd: return std::make_unique<SgdOptimizer>(layout, spec, begin, end, backend);
  }
  throw SpecError("optim.name: an optimizer this build does not know");
}

}  // namespace sg
