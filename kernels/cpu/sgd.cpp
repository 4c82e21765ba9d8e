// SGD with momentum on the CPU. See kernels/sgd.h for the contract.
#include "kernels/sgd.h"

#include "kernels/cpu/update_ranges.h"

namespace sg::cpu::inline SG_CPU_ISA {
namespace {

// GCC contracts a * b + c * d into one fused multiply-add of either product (it did so even
// across statements), so with a gradient scale the sum rounds differently than the same loop
// without one; SCALED false keeps the unscaled update's bits (no clipping: grad_scale 1).
template <bool SCALED>
void update(float* params, float* momentum_buffer, const float* grads, long lo, long hi,
            float lr, float momentum, float weight_decay, bool nesterov, float grad_scale) {
#pragma omp simd
  for (long i = lo; i < hi; ++i) {
    const float grad = SCALED ? grads[i] * grad_scale : grads[i];
    const float g = grad + weight_decay * params[i];
    const float buf = momentum * momentum_buffer[i] + g;
    momentum_buffer[i] = buf;
    params[i] -= lr * (nesterov ? g + momentum * buf : buf);
  }
}

}  // namespace

void sgd_update_ranges(float* params, float* momentum_buffer, const float* grads,
                       const UpdateRange* ranges, int count, float lr, float momentum,
                       bool nesterov, float grad_scale) {
#pragma omp parallel
  for_this_threads_share(ranges, count, [&](const UpdateRange& r, long lo, long hi) {
    if (grad_scale == 1.0f) {
      update<false>(params, momentum_buffer, grads, lo, hi, lr, momentum, r.weight_decay,
                    nesterov, 1.0f);
    } else {
      update<true>(params, momentum_buffer, grads, lo, hi, lr, momentum, r.weight_decay,
                   nesterov, grad_scale);
    }
  });
}

void sgd_update(float* params, float* momentum_buffer, const float* grads, long n, float lr,
                float momentum, float weight_decay, bool nesterov, float grad_scale) {
  const UpdateRange all{0, n, weight_decay};
  sgd_update_ranges(params, momentum_buffer, grads, &all, 1, lr, momentum, nesterov, grad_scale);
}

}  // namespace sg::cpu::SG_CPU_ISA
