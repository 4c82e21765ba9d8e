#pragma once
// The convolutional networks' classifier and global average pooling (contracts:
// kernels/classifier_loss.h, pool.h's global average pooling); the batch norm's kernels are in
// batchnorm.cuh, max pooling in pool.cuh, convolutions go through cuDNN (cudnn_conv.h).
// Activations NHWC.
#include "kernels/cuda/casts.cuh"
#include "kernels/cuda/kernel_support.cuh"

namespace sg::cuda {

namespace kernel {

// One block per row: label-smoothed loss, and the logits' gradient when dlogits is not null.
__global__ void classifier_loss(float* losses, float* dlogits, const float* logits,
                                const int32_t* labels, float smoothing, float dloss, int K) {
  __shared__ float scratch[32];
  const long row = blockIdx.x;
  const float* x = logits + row * K;
  const int y = labels[row];
  const float off = smoothing / K, on = 1.0f - smoothing + off;
  float m = -INFINITY;
  for (int k = threadIdx.x; k < K; k += blockDim.x) m = x[k] > m ? x[k] : m;
  m = block_max(m, scratch);
  float sum = 0.0f, sum_x = 0.0f;
  for (int k = threadIdx.x; k < K; k += blockDim.x) {
    sum += __expf(x[k] - m);
    sum_x += x[k];
  }
  sum = block_sum(sum, scratch);
  sum_x = block_sum(sum_x, scratch);
  const float lse = __logf(sum) + m;
  const float x_y = x[y];
  __syncthreads();  // x[y] read everywhere before dlogits (which may be x) is written
  if (dlogits != nullptr) {
    float* d = dlogits + row * K;
    for (int k = threadIdx.x; k < K; k += blockDim.x) {
      d[k] = dloss * (__expf(x[k] - lse) - (k == y ? on : off));
    }
  }
  if (threadIdx.x == 0) losses[row] = lse - (on - off) * x_y - off * sum_x;
}

// One block per row: whether the label is the arg max (top-1) and among the 5 largest (top-5),
// with ties counted as the CPU does (an equal logit before the label ranks above it).
__global__ void classifier_correct(int32_t* top1, int32_t* top5, const float* logits,
                                   const int32_t* labels, int K) {
  __shared__ float scratch[32];
  const long row = blockIdx.x;
  const float* x = logits + row * K;
  const int y = labels[row];
  const float xy = x[y];
  float above = 0.0f;  // counts are small integers: exact in float
  for (int k = threadIdx.x; k < K; k += blockDim.x) above += (x[k] > xy || (x[k] == xy && k < y)) ? 1.0f : 0.0f;
  above = block_sum(above, scratch);
  if (threadIdx.x == 0) {
    top1[row] = above == 0.0f;
    top5[row] = above < 5.0f;
  }
}

// out (N, C) = mean over HW of inp (N, HW, C): one thread per (n, c). T: float, or
// __nv_bfloat16 for a bf16-stored input (docs/bf16.md): widened exactly, summed in fp32; the
// features are fp32 either way.
template <class T>
__global__ void global_avgpool_forward(float* out, const T* inp, int N, int HW, int C) {
  const long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<long>(N) * C) return;
  const long n = i / C, c = i % C;
  float sum = 0.0f;
  for (int p = 0; p < HW; ++p) sum += widen(inp[(n * HW + p) * C + c]);
  out[i] = sum * (1.0f / HW);
}

__global__ void global_avgpool_backward(float* dinp, const float* dout, int N, int HW, int C) {
  const long n_all = static_cast<long>(N) * HW * C;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n_all;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const long c = i % C, n = i / (static_cast<long>(HW) * C);
    dinp[i] = dout[n * C + c] * (1.0f / HW);
  }
}

}  // namespace kernel

inline void classifier_loss_forward_backward(float* losses, float* dlogits, const float* logits,
                                             const int32_t* labels, float smoothing, float dloss,
                                             int N, int K, Stream s) {
  SG_LAUNCH(kernel::classifier_loss, dim3(N), dim3(128), 0, s, losses, dlogits, logits, labels,
            smoothing, dloss, K);
}
// Per-row flags (int32, 0 or 1); the caller adds them up.
inline void classifier_correct(int32_t* top1, int32_t* top5, const float* logits,
                               const int32_t* labels, int N, int K, Stream s) {
  SG_LAUNCH(kernel::classifier_correct, dim3(N), dim3(128), 0, s, top1, top5, logits, labels, K);
}
template <class T>
void global_avgpool_forward(float* out, const T* inp, int N, int HW, int C, Stream s) {
  SG_LAUNCH(kernel::global_avgpool_forward<T>, dim3(blocks_for(static_cast<long>(N) * C, 256)),
            dim3(256), 0, s, out, inp, N, HW, C);
}
inline void global_avgpool_backward(float* dinp, const float* dout, int N, int HW, int C, Stream s) {
  SG_LAUNCH(kernel::global_avgpool_backward, dim3(grid_stride_blocks(static_cast<long>(N) * HW * C)),
            dim3(256), 0, s, dinp, dout, N, HW, C);
}

}  // namespace sg::cuda
