#include "optim/optimizer.h"

#include <algorithm>
#include <cmath>

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
  // Neighbouring tensors with the same decay go as one range: the update is elementwise, so the
  // bits are the same, and each call is a parallel region (on the CPU a wake-up of the OpenMP
  // workers, ~50 us on the 2-core VMs) or a kernel launch. ResNet-50's 161 tensors alternate
  // between a convolution's weight and a batch norm's pair, so 108 calls instead.
  size_t run_lo = 0, run_hi = 0;
  bool run_decay = false;
  const auto flush = [&] {
    if (run_lo >= run_hi) return;
    const float wd = run_decay ? static_cast<float>(spec_.weight_decay) : 0.0f;
    apply(params, grads, run_lo, run_hi, wd, lr, step, grad_scale);
  };
  for (const ParamTensor& t : layout_.tensors()) {
    // The part of tensor t inside [begin, end).
    const size_t lo = std::max(t.offset, begin_), hi = std::min(t.offset + t.numel, end_);
    if (lo >= hi) continue;
    if (run_lo < run_hi && lo == run_hi && t.decay == run_decay) {
      run_hi = hi;
      continue;
    }
    flush();
    run_lo = lo, run_hi = hi, run_decay = t.decay;
  }
  flush();
}

void AdamWOptimizer::apply(float* params, const float* grads, size_t lo, size_t hi, float wd,
                           double lr, int step, float grad_scale) {
  backend_.adamw_update(params + lo, state_at(0, lo), state_at(1, lo), grads + lo,
                        static_cast<long>(hi - lo), static_cast<float>(lr),
                        static_cast<float>(spec_.betas[0]), static_cast<float>(spec_.betas[1]),
                        static_cast<float>(spec_.eps), wd, step, grad_scale);
}

void SgdOptimizer::apply(float* params, const float* grads, size_t lo, size_t hi, float wd,
                         double lr, int, float grad_scale) {
  backend_.sgd_update(params + lo, state_at(0, lo), grads + lo, static_cast<long>(hi - lo),
                      static_cast<float>(lr), static_cast<float>(spec_.momentum), wd,
                      spec_.nesterov, grad_scale);
}

std::unique_ptr<Optimizer> make_optimizer(const OptimSpec& spec, const ParameterLayout& layout,
                                          size_t begin, size_t end, Backend& backend) {
  if (spec.name == "adamw") return std::make_unique<AdamWOptimizer>(layout, spec, begin, end, backend);
  if (spec.name == "sgd") return std::make_unique<SgdOptimizer>(layout, spec, begin, end, backend);
  throw SpecError("optim.name must be adamw or sgd, not '" + spec.name + "'");
}

}  // namespace sg
