#include "optim/adamw_optimizer.h"

#include <algorithm>
#include <cmath>

#include "kernels/adamw.h"
#include "kernels/grad_norm.h"
#include "util/error.h"

namespace sg {

AdamWOptimizer::AdamWOptimizer(const ParameterLayout& layout, const OptimSpec& spec)
    : AdamWOptimizer(layout, spec, 0, layout.total()) {}

AdamWOptimizer::AdamWOptimizer(const ParameterLayout& layout, const OptimSpec& spec, size_t begin,
                               size_t end)
    : layout_(layout), spec_(spec), begin_(begin), end_(std::min(end, layout.total())) {
  if (begin_ > end_) begin_ = end_;  // a rank past the end of a small model owns nothing
  m_.assign(end_ - begin_, 0.0f);
  v_.assign(end_ - begin_, 0.0f);
}

float AdamWOptimizer::step(float* params, float* grads, double lr, int step) {
  const double norm = std::sqrt(cpu::sum_of_squares(grads + begin_, static_cast<long>(end_ - begin_)));
  update_range(params, grads, norm, lr, step);
  return static_cast<float>(norm);
}

void AdamWOptimizer::update_range(float* params, float* grads, double norm, double lr, int step) {
  if (spec_.grad_clip > 0) {
    cpu::clip_by_global_norm(grads + begin_, static_cast<long>(end_ - begin_), norm,
                             static_cast<float>(spec_.grad_clip));
  }
  for (const ParamTensor& t : layout_.tensors()) {
    // The part of tensor t inside [begin, end).
    const size_t lo = std::max(t.offset, begin_), hi = std::min(t.offset + t.numel, end_);
    if (lo >= hi) continue;
    const float wd = t.decay ? static_cast<float>(spec_.weight_decay) : 0.0f;
    cpu::adamw_update(params + lo, m_.data() + (lo - begin_), v_.data() + (lo - begin_), grads + lo,
                      static_cast<long>(hi - lo), static_cast<float>(lr),
                      static_cast<float>(spec_.betas[0]), static_cast<float>(spec_.betas[1]),
                      static_cast<float>(spec_.eps), wd, step);
  }
}

}  // namespace sg
