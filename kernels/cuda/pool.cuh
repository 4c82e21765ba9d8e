#pragma once
// Max pooling over NHWC activations (contract: kernels/pool.h), deterministic both ways.
// Forward: one thread per output element (n, p, q, c); the first maximum of the window wins and
// padding never does; argmax keeps the input position h * W + w (as the CPU reference does).
// Backward: a gather, one thread per input element (n, h, w, c) summing the gradients of the
// output windows that cover it and chose it, in increasing (p, q) order: the CPU reference's
// order, without atomics. dinp is written with =.
#include "kernels/cuda/casts.cuh"
#include "kernels/cuda/kernel_support.cuh"
#include "kernels/pool.h"

namespace sg::cuda {
namespace kernel {

// Only s's fields are read here (its member functions are host code): P and Q come separately.
// T: float, or __nv_bfloat16 for bf16-stored activations (docs/bf16.md): the maximum is one of
// the inputs, stored exactly.
template <class T>
__global__ void maxpool_forward(T* out, int32_t* argmax, const T* inp, Pool2dShape s, int P,
                                int Q) {
  const long n_all = static_cast<long>(s.N) * P * Q * s.C;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n_all;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(i % s.C);
    const int q = static_cast<int>((i / s.C) % Q);
    const int p = static_cast<int>((i / (static_cast<long>(s.C) * Q)) % P);
    const long n = i / (static_cast<long>(s.C) * Q * P);
    float best = -INFINITY;
    int32_t where = -1;
    for (int r = 0; r < s.R; ++r) {
      const int h = p * s.stride - s.pad + r;
      if (h < 0 || h >= s.H) continue;
      for (int t = 0; t < s.S; ++t) {
        const int w = q * s.stride - s.pad + t;
        if (w < 0 || w >= s.W) continue;
        const float v = widen(inp[((n * s.H + h) * s.W + w) * s.C + c]);
        if (where < 0 || v > best) {
          best = v;
          where = h * s.W + w;
        }
      }
    }
    out[i] = narrow<T>(best);
    argmax[i] = where;
  }
}

// First output index (p or q) whose window, of `window` taps from o * stride - pad, covers x.
__device__ __forceinline__ int first_window(int x, int window, int stride, int pad) {
  const int from = x + pad - (window - 1);
  return from <= 0 ? 0 : (from + stride - 1) / stride;
}

__global__ void maxpool_backward(float* dinp, const float* dout, const int32_t* argmax,
                                 Pool2dShape s, int P, int Q) {
  const long n_all = static_cast<long>(s.N) * s.H * s.W * s.C;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n_all;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(i % s.C);
    const int w = static_cast<int>((i / s.C) % s.W);
    const int h = static_cast<int>((i / (static_cast<long>(s.C) * s.W)) % s.H);
    const long n = i / (static_cast<long>(s.C) * s.W * s.H);
    const int p_last = (h + s.pad) / s.stride < P - 1 ? (h + s.pad) / s.stride : P - 1;
    const int q_last = (w + s.pad) / s.stride < Q - 1 ? (w + s.pad) / s.stride : Q - 1;
    const int self = h * s.W + w;
    float sum = 0.0f;
    for (int p = first_window(h, s.R, s.stride, s.pad); p <= p_last; ++p) {
      for (int q = first_window(w, s.S, s.stride, s.pad); q <= q_last; ++q) {
        const long o = ((n * P + p) * Q + q) * s.C + c;
        if (argmax[o] == self) sum += dout[o];
      }
    }
    dinp[i] = sum;
  }
}

}  // namespace kernel

template <class T>
void maxpool_forward(T* out, int32_t* argmax, const T* inp, const Pool2dShape& s, Stream stream) {
  SG_LAUNCH(kernel::maxpool_forward<T>, dim3(grid_stride_blocks(s.out_size())), dim3(256), 0,
            stream, out, argmax, inp, s, s.P(), s.Q());
}
inline void maxpool_backward(float* dinp, const float* dout, const int32_t* argmax,
                             const Pool2dShape& s, Stream stream) {
  SG_LAUNCH(kernel::maxpool_backward, dim3(grid_stride_blocks(s.in_size())), dim3(256), 0, stream,
            dinp, dout, argmax, s, s.P(), s.Q());
}

}  // namespace sg::cuda
