#pragma once
// Softmax + cross-entropy over a padded vocabulary (contract: kernels/crossentropy.h), one block
// per row: the row's max, then its exp-sum, then the probabilities or the logits' gradient, each
// reduction in a fixed order (block_sum). The vocabulary-parallel pieces work on a rank's columns
// [v0, v0 + Vl) of the padded vocabulary; the caller reduces their row statistics across ranks.
// Outputs may alias the logits: each thread reads its columns before it writes them, after the
// reductions that read them all.
#include "kernels/cuda/casts.cuh"
#include "kernels/cuda/kernel_support.cuh"

namespace sg::cuda {
namespace kernel {

// Real (non-padding) columns of a rank that holds [v0, v0 + Vl) of a V-token vocabulary.
__device__ __forceinline__ int real_columns(int Vl, int v0, int V) {
  const int r = V - v0;
  return r < 0 ? 0 : (r > Vl ? Vl : r);
}

// scale * softmax(x[0:V]) (minus scale at the target when `gradient`) into p; the loss into *loss.
// T: float, or __nv_bfloat16 for logits stored in bf16 (docs/bf16.md): read exactly, the softmax
// and loss in fp32, p rounded on the store.
template <class T>
__global__ void softmax_crossentropy(float* losses, T* out, const T* logits,
                                     const int32_t* targets, float scale, int gradient, int V,
                                     int Vp) {
  __shared__ float scratch[32];
  const long row = blockIdx.x;
  const T* x = logits + row * Vp;
  T* p = out + row * Vp;
  const int target = targets[row];
  float m = -INFINITY;
  for (int v = threadIdx.x; v < V; v += blockDim.x) m = widen(x[v]) > m ? widen(x[v]) : m;
  m = block_max(m, scratch);
  float sum = 0.0f;
  for (int v = threadIdx.x; v < V; v += blockDim.x) sum += __expf(widen(x[v]) - m);
  sum = block_sum(sum, scratch);
  const float target_logit = widen(x[target]);
  __syncthreads();  // every thread has read x[target] before any writes p (which may be x)
  const float factor = scale / sum;
  for (int v = threadIdx.x; v < Vp; v += blockDim.x) {
    float value = v < V ? __expf(widen(x[v]) - m) * factor : 0.0f;
    if (gradient && v == target) value -= scale;
    p[v] = narrow<T>(value);
  }
  if (threadIdx.x == 0) losses[row] = __logf(sum) - (target_logit - m);
}

template <class T>
__global__ void crossentropy_backward(T* dlogits, const T* probs, const int32_t* targets,
                                      float dloss, int V, int Vp) {
  const long row = blockIdx.x;
  const T* p = probs + row * Vp;
  T* d = dlogits + row * Vp;
  const int target = targets[row];
  for (int v = threadIdx.x; v < Vp; v += blockDim.x) {
    const float value = v < V ? dloss * (widen(p[v]) - (v == target ? 1.0f : 0.0f)) : 0.0f;
    d[v] = narrow<T>(value);
  }
}

__global__ void vp_max(float* row_max, const float* logits, int Vl, int v0, int V) {
  __shared__ float scratch[32];
  const long row = blockIdx.x;
  const float* x = logits + row * Vl;
  const int Vr = real_columns(Vl, v0, V);
  float m = -INFINITY;
  for (int v = threadIdx.x; v < Vr; v += blockDim.x) m = x[v] > m ? x[v] : m;
  m = block_max(m, scratch);
  if (threadIdx.x == 0) row_max[row] = m;
}

__global__ void vp_sums(float* sum_exp, float* target_logit, const float* logits,
                        const float* row_max, const int32_t* targets, int Vl, int v0, int V) {
  __shared__ float scratch[32];
  const long row = blockIdx.x;
  const float* x = logits + row * Vl;
  const int Vr = real_columns(Vl, v0, V);
  const float m = row_max[row];
  float sum = 0.0f;
  for (int v = threadIdx.x; v < Vr; v += blockDim.x) sum += __expf(x[v] - m);
  sum = block_sum(sum, scratch);
  if (threadIdx.x == 0) {
    sum_exp[row] = sum;
    const int j = targets[row] - v0;
    target_logit[row] = j >= 0 && j < Vr ? x[j] : 0.0f;
  }
}

__global__ void vp_losses(float* losses, const float* row_max, const float* sum_exp,
                          const float* target_logit, int N) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  if (n < N) losses[n] = __logf(sum_exp[n]) - (target_logit[n] - row_max[n]);
}

__global__ void vp_backward(float* dlogits, const float* logits, const float* row_max,
                            const float* sum_exp, const int32_t* targets, float dloss, int Vl,
                            int v0, int V) {
  const long row = blockIdx.x;
  const float* x = logits + row * Vl;
  float* d = dlogits + row * Vl;
  const int Vr = real_columns(Vl, v0, V);
  const float m = row_max[row], factor = dloss / sum_exp[row];
  const int j = targets[row] - v0;
  for (int v = threadIdx.x; v < Vl; v += blockDim.x) {
    float value = v < Vr ? __expf(x[v] - m) * factor : 0.0f;
    if (v == j) value -= dloss;
    d[v] = value;
  }
}

}  // namespace kernel

constexpr unsigned kRowThreads = 256;

template <class T>
void crossentropy_forward(float* losses, T* probs, const T* logits, const int32_t* targets, int N,
                          int V, int Vp, Stream s) {
  SG_LAUNCH(kernel::softmax_crossentropy<T>, dim3(N), dim3(kRowThreads), 0, s, losses, probs,
            logits, targets, 1.0f, 0, V, Vp);
}
template <class T>
void crossentropy_forward_backward(float* losses, T* dlogits, const T* logits,
                                   const int32_t* targets, float dloss, int N, int V, int Vp,
                                   Stream s) {
  SG_LAUNCH(kernel::softmax_crossentropy<T>, dim3(N), dim3(kRowThreads), 0, s, losses, dlogits,
            logits, targets, dloss, 1, V, Vp);
}
template <class T>
void crossentropy_backward(T* dlogits, const T* probs, const int32_t* targets, float dloss, int N,
                           int V, int Vp, Stream s) {
  SG_LAUNCH(kernel::crossentropy_backward<T>, dim3(N), dim3(kRowThreads), 0, s, dlogits, probs,
            targets, dloss, V, Vp);
}
inline void crossentropy_vp_max(float* row_max, const float* logits, int N, int Vl, int v0, int V,
                                Stream s) {
  SG_LAUNCH(kernel::vp_max, dim3(N), dim3(kRowThreads), 0, s, row_max, logits, Vl, v0, V);
}
inline void crossentropy_vp_sums(float* sum_exp, float* target_logit, const float* logits,
                                 const float* row_max, const int32_t* targets, int N, int Vl,
                                 int v0, int V, Stream s) {
  SG_LAUNCH(kernel::vp_sums, dim3(N), dim3(kRowThreads), 0, s, sum_exp, target_logit, logits,
            row_max, targets, Vl, v0, V);
}
inline void crossentropy_vp_losses(float* losses, const float* row_max, const float* sum_exp,
                                   const float* target_logit, int N, Stream s) {
  SG_LAUNCH(kernel::vp_losses, dim3(blocks_for(N, 256)), dim3(256), 0, s, losses, row_max, sum_exp,
            target_logit, N);
}
inline void crossentropy_vp_backward(float* dlogits, const float* logits, const float* row_max,
                                     const float* sum_exp, const int32_t* targets, float dloss,
                                     int N, int Vl, int v0, int V, Stream s) {
  SG_LAUNCH(kernel::vp_backward, dim3(N), dim3(kRowThreads), 0, s, dlogits, logits, row_max,
            sum_exp, targets, dloss, Vl, v0, V);
}

}  // namespace sg::cuda
