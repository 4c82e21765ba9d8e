// SGD with momentum on the CPU. See kernels/sgd.h for the contract.
#include "kernels/sgd.h"

namespace sg::cpu::inline SG_CPU_ISA {

void sgd_update(float* params, float* momentum_buffer, const float* grads, long n, float lr,
                float momentum, float weight_decay, bool nesterov) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) {
    const float g = grads[i] + weight_decay * params[i];
    const float buf = momentum * momentum_buffer[i] + g;
    momentum_buffer[i] = buf;
    params[i] -= lr * (nesterov ? g + momentum * buf : buf);
  }
}

}  // namespace sg::cpu::SG_CPU_ISA
