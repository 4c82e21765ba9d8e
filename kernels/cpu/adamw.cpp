// AdamW on the CPU. See kernels/adamw.h for the contract.
#include "kernels/adamw.h"

#include <cmath>

#include "kernels/cpu/update_ranges.h"

namespace sg::cpu::inline SG_CPU_ISA {

void adamw_update_ranges(float* params, float* m, float* v, const float* grads,
                         const UpdateRange* ranges, int count, float lr, float beta1, float beta2,
                         float eps, int step, float grad_scale) {
  // Bias corrections in double: beta^t for t in the tens of thousands loses digits in float.
  const float bias_correction1 = static_cast<float>(1.0 - std::pow(double{beta1}, step));
  const float bias_correction2 = static_cast<float>(1.0 - std::pow(double{beta2}, step));
#pragma omp parallel
  for_this_threads_share(ranges, count, [&](const UpdateRange& r, long lo, long hi) {
    const float weight_decay = r.weight_decay;
#pragma omp simd
    for (long i = lo; i < hi; ++i) {
      const float g = grads[i] * grad_scale;
      const float m_i = beta1 * m[i] + (1.0f - beta1) * g;
      const float v_i = beta2 * v[i] + (1.0f - beta2) * g * g;
      m[i] = m_i;
      v[i] = v_i;
      const float m_hat = m_i / bias_correction1;
      const float v_hat = v_i / bias_correction2;
      params[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + weight_decay * params[i]);
    }
  });
}

void adamw_update(float* params, float* m, float* v, const float* grads, long n, float lr,
                  float beta1, float beta2, float eps, float weight_decay, int step,
                  float grad_scale) {
  const UpdateRange all{0, n, weight_decay};
  adamw_update_ranges(params, m, v, grads, &all, 1, lr, beta1, beta2, eps, step, grad_scale);
}

}  // namespace sg::cpu::SG_CPU_ISA
