#include "optim/adamw_optimizer.h"

#include <cmath>

#include "kernels/adamw.h"
#include "kernels/grad_norm.h"

namespace sg {

AdamWOptimizer::AdamWOptimizer(const ParameterLayout& layout, const OptimSpec& spec)
    : layout_(layout), spec_(spec), m_(layout.total(), 0.0f), v_(layout.total(), 0.0f) {}

float AdamWOptimizer::step(float* params, float* grads, double lr, int step) {
  const long n = static_cast<long>(layout_.total());
  const double norm = std::sqrt(cpu::sum_of_squares(grads, n));
  if (spec_.grad_clip > 0) {
    cpu::clip_by_global_norm(grads, n, norm, static_cast<float>(spec_.grad_clip));
  }
  for (const ParamTensor& t : layout_.tensors()) {
    const float wd = t.decay ? static_cast<float>(spec_.weight_decay) : 0.0f;
    cpu::adamw_update(params + t.offset, m_.data() + t.offset, v_.data() + t.offset,
                      grads + t.offset, static_cast<long>(t.numel), static_cast<float>(lr),
                      static_cast<float>(spec_.betas[0]), static_cast<float>(spec_.betas[1]),
                      static_cast<float>(spec_.eps), wd, step);
  }
  return static_cast<float>(norm);
}

}  // namespace sg
