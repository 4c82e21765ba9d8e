#pragma once
// The optimizers' kernels over flat buffers (contracts: kernels/adamw.h, sgd.h, grad_norm.h;
// grad_scale, the clipping factor, multiplies each gradient as it is read, rounded on its own as
// the CPU's kernels do), with optional fp32 master weights: when `master` is given, the update
// runs on the fp32 master and `params` (bf16) receives its rounding; otherwise on the fp32 params
// themselves.
// The sum of squares of the global gradient norm runs in a fixed order: fixed 16K-element
// blocks (as the CPU's) each summed in double, then the block sums added in block order by one
// thread, so the norm does not depend on the launch.
#include "kernels/cuda/kernel_support.cuh"

namespace sg::cuda {

constexpr long kNormBlock = 1L << 14;

namespace kernel {

__global__ void adamw_update(float* params, float* m, float* v, const float* grads, long n,
                             float lr, float beta1, float beta2, float eps, float weight_decay,
                             float bias_correction1, float bias_correction2, float grad_scale) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const float g = __fmul_rn(grads[i], grad_scale);
    const float m_i = beta1 * m[i] + (1.0f - beta1) * g;
    const float v_i = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = m_i;
    v[i] = v_i;
    const float m_hat = m_i / bias_correction1, v_hat = v_i / bias_correction2;
    params[i] -= lr * (m_hat / (sqrtf(v_hat) + eps) + weight_decay * params[i]);
  }
}

__global__ void adamw_update_master(float* master, __nv_bfloat16* params, float* m, float* v,
                                    const float* grads, long n, float lr, float beta1,
                                    float beta2, float eps, float weight_decay,
                                    float bias_correction1, float bias_correction2,
                                    float grad_scale) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const float g = __fmul_rn(grads[i], grad_scale);
    const float m_i = beta1 * m[i] + (1.0f - beta1) * g;
    const float v_i = beta2 * v[i] + (1.0f - beta2) * g * g;
    m[i] = m_i;
    v[i] = v_i;
    const float m_hat = m_i / bias_correction1, v_hat = v_i / bias_correction2;
    const float p = master[i] - lr * (m_hat / (sqrtf(v_hat) + eps) + weight_decay * master[i]);
    master[i] = p;
    params[i] = __float2bfloat16(p);
  }
}

__global__ void sgd_update(float* params, float* momentum_buffer, const float* grads, long n,
                           float lr, float momentum, float weight_decay, int nesterov,
                           float grad_scale) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const float grad = grad_scale == 1.0f ? grads[i] : __fmul_rn(grads[i], grad_scale);
    const float g = grad + weight_decay * params[i];
    const float buf = momentum * momentum_buffer[i] + g;
    momentum_buffer[i] = buf;
    params[i] -= lr * (nesterov ? g + momentum * buf : buf);
  }
}

// Block b: the sum of squares of x[b * kNormBlock, ...) in double.
__global__ void block_sums_of_squares(double* sums, const float* x, long n) {
  __shared__ double scratch[32];
  const long begin = blockIdx.x * kNormBlock;
  const long end = begin + kNormBlock < n ? begin + kNormBlock : n;
  double s = 0.0;
  for (long i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const double xi = x[i];
    s += xi * xi;
  }
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) sums[blockIdx.x] = s;
}

__global__ void sum_in_order(double* total, const double* values, long count) {
  if (threadIdx.x != 0) return;
  double s = 0.0;
  for (long i = 0; i < count; ++i) s += values[i];
  *total = s;
}

}  // namespace kernel

inline void adamw_update(float* params, float* m, float* v, const float* grads, long n, float lr,
                         float beta1, float beta2, float eps, float weight_decay, int step,
                         float grad_scale, Stream s, float* master = nullptr,
                         __nv_bfloat16* bf16_params = nullptr) {
  // Bias corrections in double on the host: beta^t for large t loses digits in float.
  const float c1 = static_cast<float>(1.0 - std::pow(double{beta1}, step));
  const float c2 = static_cast<float>(1.0 - std::pow(double{beta2}, step));
  const unsigned blocks = grid_stride_blocks(n);
  if (master != nullptr) {
    SG_LAUNCH(kernel::adamw_update_master, dim3(blocks), dim3(256), 0, s, master, bf16_params, m, v,
              grads, n, lr, beta1, beta2, eps, weight_decay, c1, c2, grad_scale);
  } else {
    SG_LAUNCH(kernel::adamw_update, dim3(blocks), dim3(256), 0, s, params, m, v, grads, n, lr,
              beta1, beta2, eps, weight_decay, c1, c2, grad_scale);
  }
}

inline void sgd_update(float* params, float* momentum_buffer, const float* grads, long n, float lr,
                       float momentum, float weight_decay, bool nesterov, float grad_scale,
                       Stream s) {
  const unsigned blocks = grid_stride_blocks(n);
  SG_LAUNCH(kernel::sgd_update, dim3(blocks), dim3(256), 0, s, params, momentum_buffer, grads, n,
            lr, momentum, weight_decay, nesterov ? 1 : 0, grad_scale);
}

// Doubles of scratch sum_of_squares needs (the block sums).
inline long sum_of_squares_scratch(long n) { return (n + kNormBlock - 1) / kNormBlock; }

// *total (device memory) = sum of x[i]^2 in double, in the fixed order described above.
inline void sum_of_squares(double* total, double* scratch, const float* x, long n, Stream s) {
  const long blocks = sum_of_squares_scratch(n);
  if (blocks == 0) {
    SG_LAUNCH(kernel::sum_in_order, dim3(1), dim3(32), 0, s, total, scratch, 0L);
    return;
  }
  SG_LAUNCH(kernel::block_sums_of_squares, dim3(static_cast<unsigned>(blocks)), dim3(256), 0, s,
            scratch, x, n);
  SG_LAUNCH(kernel::sum_in_order, dim3(1), dim3(32), 0, s, total, scratch, blocks);
}

}  // namespace sg::cuda
