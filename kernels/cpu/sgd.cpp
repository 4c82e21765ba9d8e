// SGD with momentum on the CPU. See kernels/sgd.h for the contract.
#include "kernels/sgd.h"

namespace sg::cpu::inline SG_CPU_ISA {
namespace {

// GCC contracts a * b + c * d into one fused multiply-add of either product (it did so even
// across statements), so with a gradient scale the sum rounds differently than the same loop
// without one; SCALED false keeps the unscaled update's bits (no clipping: grad_scale 1).
template <bool SCALED>
void update(float* params, float* momentum_buffer, const float* grads, long n, float lr,
            float momentum, float weight_decay, bool nesterov, float grad_scale) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) {
    const float grad = SCALED ? grads[i] * grad_scale : grads[i];
    const float g = grad + weight_decay * params[i];
    const float buf = momentum * momentum_buffer[i] + g;
    momentum_buffer[i] = buf;
    params[i] -= lr * (nesterov ? g + momentum * buf : buf);
  }
}

}  // namespace

void sgd_update(float* params, float* momentum_buffer, const float* grads, long n, float lr,
                float momentum, float weight_decay, bool nesterov, float grad_scale) {
  if (grad_scale == 1.0f) {
    update<false>(params, momentum_buffer, grads, n, lr, momentum, weight_decay, nesterov, 1.0f);
  } else {
    update<true>(params, momentum_buffer, grads, n, lr, momentum, weight_decay, nesterov,
                 grad_scale);
  }
}

}  // namespace sg::cpu::SG_CPU_ISA
