#pragma once
// LayerNorm forward and backward (contract: kernels/layernorm.h), eps 1e-5.
// Forward: one warp per row, two passes over the row in registers-sized strides (mean, then
// centred squares) in float, as llm.c's layernorm_forward_kernel3.
// Backward: one warp per row for dinp (+=); dweight and dbias (+=) are sums over rows, taken in a
// fixed order without atomics: each block of kRowsPerBlock rows writes its partial sums, and a
// second kernel adds the blocks' partials in block order, one thread per channel.
#include "kernels/cuda/casts.cuh"
#include "kernels/cuda/kernel_support.cuh"

namespace sg::cuda {

constexpr int kLayernormRowsPerBlock = 32;

namespace kernel {

// Out: float, or __nv_bfloat16 for a bf16-stored output (the fp32 result rounded, docs/bf16.md).
template <class Out>
__global__ void layernorm_forward(Out* __restrict__ out, float* __restrict__ mean,
                                  float* __restrict__ rstd, const float* __restrict__ inp,
                                  const float* __restrict__ weight,
                                  const float* __restrict__ bias, int N, int C) {
  const int warps = blockDim.x / kWarp;
  const int row = blockIdx.x * warps + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;  // whole warps only: no barrier follows
  const float* x = inp + static_cast<long>(row) * C;
  float sum = 0.0f;
  for (int c = lane; c < C; c += kWarp) sum += x[c];
  const float m = warp_sum(sum) / C;
  float sum_sq = 0.0f;
  for (int c = lane; c < C; c += kWarp) {
    const float d = x[c] - m;
    sum_sq += d * d;
  }
  const float s = rsqrtf(warp_sum(sum_sq) / C + 1e-5f);
  Out* y = out + static_cast<long>(row) * C;
  for (int c = lane; c < C; c += kWarp) y[c] = narrow<Out>((x[c] - m) * s * weight[c] + bias[c]);
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

// Block b handles rows [b * kLayernormRowsPerBlock, ...): each warp takes rows in turn, then the
// block sums its rows' dweight/dbias contributions into partial[b] (2C floats) in row order.
__global__ void layernorm_backward(float* __restrict__ dinp, float* __restrict__ partial,
                                   const float* __restrict__ dout, const float* __restrict__ inp,
                                   const float* __restrict__ weight,
                                   const float* __restrict__ mean,
                                   const float* __restrict__ rstd, int N, int C) {
  const int warps = blockDim.x / kWarp;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int first = blockIdx.x * kLayernormRowsPerBlock;
  const int last = first + kLayernormRowsPerBlock < N ? first + kLayernormRowsPerBlock : N;
  for (int row = first + warp; row < last; row += warps) {
    const float* dy = dout + static_cast<long>(row) * C;
    const float* x = inp + static_cast<long>(row) * C;
    float* dx = dinp + static_cast<long>(row) * C;
    const float m = mean[row], s = rstd[row];
    float sum_dnorm = 0.0f, sum_dnorm_norm = 0.0f;
    for (int c = lane; c < C; c += kWarp) {
      const float norm = (x[c] - m) * s;
      const float dnorm = dy[c] * weight[c];
      sum_dnorm += dnorm;
      sum_dnorm_norm += dnorm * norm;
    }
    const float mean_dnorm = warp_sum(sum_dnorm) / C;
    const float mean_dnorm_norm = warp_sum(sum_dnorm_norm) / C;
    for (int c = lane; c < C; c += kWarp) {
      const float norm = (x[c] - m) * s;
      const float dnorm = dy[c] * weight[c];
      dx[c] += s * (dnorm - mean_dnorm - norm * mean_dnorm_norm);
    }
  }
  // This block's rows, summed per channel in row order (one thread per channel).
  float* dweight_b = partial + static_cast<long>(blockIdx.x) * 2 * C;
  float* dbias_b = dweight_b + C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float dw = 0.0f, db = 0.0f;
    for (int row = first; row < last; ++row) {
      const float dy = dout[static_cast<long>(row) * C + c];
      dw += (inp[static_cast<long>(row) * C + c] - mean[row]) * rstd[row] * dy;
      db += dy;
    }
    dweight_b[c] = dw;
    dbias_b[c] = db;
  }
}

__global__ void layernorm_backward_params(float* __restrict__ dweight, float* __restrict__ dbias,
                                          const float* __restrict__ partial, int blocks, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float dw = 0.0f, db = 0.0f;
  for (int b = 0; b < blocks; ++b) {
    dw += partial[static_cast<long>(b) * 2 * C + c];
    db += partial[static_cast<long>(b) * 2 * C + C + c];
  }
  dweight[c] += dw;
  dbias[c] += db;
}

}  // namespace kernel

constexpr unsigned kLayernormThreads = 256;  // 8 warps: 8 rows per block in the forward

template <class Out>
void layernorm_forward(Out* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int N, int C, Stream s) {
  const unsigned rows_per_block = kLayernormThreads / kWarp;
  SG_LAUNCH(kernel::layernorm_forward<Out>, dim3(blocks_for(N, rows_per_block)),
            dim3(kLayernormThreads), 0, s, out, mean, rstd, inp, weight, bias, N, C);
}

// Floats of the scratch layernorm_backward needs for N rows of C channels.
inline long layernorm_backward_scratch(int N, int C) {
  return static_cast<long>(blocks_for(N, kLayernormRowsPerBlock)) * 2 * C;
}

inline void layernorm_backward(float* dinp, float* dweight, float* dbias, float* scratch,
                               const float* dout, const float* inp, const float* weight,
                               const float* mean, const float* rstd, int N, int C, Stream s) {
  const int blocks = static_cast<int>(blocks_for(N, kLayernormRowsPerBlock));
  SG_LAUNCH(kernel::layernorm_backward, dim3(blocks), dim3(kLayernormThreads), 0, s, dinp, scratch,
            dout, inp, weight, mean, rstd, N, C);
  SG_LAUNCH(kernel::layernorm_backward_params, dim3(blocks_for(C, 256)), dim3(256), 0, s, dweight,
            dbias, scratch, blocks, C);
}

}  // namespace sg::cuda
