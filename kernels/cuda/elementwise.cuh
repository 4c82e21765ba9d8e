#pragma once
// Elementwise kernels (contracts as kernels/gelu.h, relu.h, residual.h, pool.h's nchw_to_nhwc),
// and the casts of mixed precision. Grid-stride loops, one element per thread per step.
#include "kernels/cuda/casts.cuh"
#include "kernels/cuda/kernel_support.cuh"

namespace sg::cuda {
namespace kernel {

#define SG_GRID_STRIDE(i, n) \
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<long>(gridDim.x) * blockDim.x)

// T: float, or __nv_bfloat16 for activations stored in bf16 (docs/bf16.md): loaded exactly,
// computed in fp32, stored rounded.
template <class T>
__global__ void gelu_forward(T* out, const T* inp, long n) {
  const float s = 0.7978845608028654f;  // sqrt(2/pi)
  SG_GRID_STRIDE(i, n) {
    const float x = widen(inp[i]);
    out[i] = narrow<T>(0.5f * x * (1.0f + tanhf(s * (x + 0.044715f * x * x * x))));
  }
}

template <class T>
__global__ void gelu_backward(T* dinp, const T* inp, const T* dout, long n) {
  const float s = 0.7978845608028654f;
  SG_GRID_STRIDE(i, n) {
    const float x = widen(inp[i]);
    const float cube = 0.044715f * x * x * x;
    const float t = tanhf(s * (x + cube));
    const float sech2 = 1.0f - t * t;
    const float local = 0.5f * (1.0f + t) + 0.5f * x * sech2 * s * (1.0f + 3.0f * 0.044715f * x * x);
    dinp[i] = narrow<T>(local * widen(dout[i]));
  }
}

// The ReLUs' activations (out, inp) in T as GELU's; their gradients stay fp32 (ResNet keeps the
// gradients of its units' outputs in fp32, docs/bf16.md).
template <class T>
__global__ void relu_forward(T* out, const T* inp, long n) {
  SG_GRID_STRIDE(i, n) {
    const float x = widen(inp[i]);
    out[i] = narrow<T>(x > 0.0f ? x : 0.0f);
  }
}

template <class T>
__global__ void relu_backward(float* dinp, const T* out, const float* dout, long n) {
  SG_GRID_STRIDE(i, n) dinp[i] = widen(out[i]) > 0.0f ? dout[i] : 0.0f;
}

__global__ void residual_forward(float* out, const float* a, const float* b, long n) {
  SG_GRID_STRIDE(i, n) out[i] = a[i] + b[i];
}

__global__ void add_inplace(float* out, const float* in, long n) {
  SG_GRID_STRIDE(i, n) out[i] += in[i];
}

template <class T>
__global__ void add_relu_inplace(T* out, const T* in, long n) {
  SG_GRID_STRIDE(i, n) {
    const float sum = widen(out[i]) + widen(in[i]);
    out[i] = narrow<T>(sum > 0.0f ? sum : 0.0f);
  }
}

// acc = out > 0 ? acc + g : 0: add_inplace then relu_backward in one pass, bit for bit.
template <class T>
__global__ void add_relu_backward(float* acc, const float* g, const T* out, long n) {
  SG_GRID_STRIDE(i, n) acc[i] = widen(out[i]) > 0.0f ? acc[i] + g[i] : 0.0f;
}

__global__ void add_bias(float* out, const float* bias, long N, long C) {
  SG_GRID_STRIDE(i, N * C) out[i] += bias[i % C];
}

__global__ void scale(float* x, float factor, long n) {
  SG_GRID_STRIDE(i, n) x[i] *= factor;
}

__global__ void fill(float* x, float value, long n) {
  SG_GRID_STRIDE(i, n) x[i] = value;
}

// out (N, HW, C) from inp (N, C, HW): fp32 images in, T out (rounded to bf16 where the network
// stores its activations in bf16).
template <class T>
__global__ void nchw_to_nhwc(T* out, const float* inp, int N, int C, int HW) {
  const long n_all = static_cast<long>(N) * C * HW;
  SG_GRID_STRIDE(i, n_all) {
    const long c = i % C, hw = (i / C) % HW, n = i / (static_cast<long>(C) * HW);
    out[i] = narrow<T>(inp[(n * C + c) * HW + hw]);
  }
}

#undef SG_GRID_STRIDE

}  // namespace kernel

constexpr unsigned kElementwiseThreads = 256;  // as grid_stride_blocks assumes

#define SG_ELEMENTWISE(name, n, stream, ...) \
  SG_LAUNCH(kernel::name, dim3(grid_stride_blocks(n)), dim3(kElementwiseThreads), 0, stream, __VA_ARGS__)

template <class T>
void gelu_forward(T* out, const T* inp, long n, Stream s) {
  SG_ELEMENTWISE(gelu_forward<T>, n, s, out, inp, n);
}
template <class T>
void gelu_backward(T* dinp, const T* inp, const T* dout, long n, Stream s) {
  SG_ELEMENTWISE(gelu_backward<T>, n, s, dinp, inp, dout, n);
}
template <class T>
void relu_forward(T* out, const T* inp, long n, Stream s) {
  SG_ELEMENTWISE(relu_forward<T>, n, s, out, inp, n);
}
template <class T>
void relu_backward(float* dinp, const T* out, const float* dout, long n, Stream s) {
  SG_ELEMENTWISE(relu_backward<T>, n, s, dinp, out, dout, n);
}
inline void residual_forward(float* out, const float* a, const float* b, long n, Stream s) {
  SG_ELEMENTWISE(residual_forward, n, s, out, a, b, n);
}
inline void add_inplace(float* out, const float* in, long n, Stream s) {
  SG_ELEMENTWISE(add_inplace, n, s, out, in, n);
}
template <class T>
void add_relu_inplace(T* out, const T* in, long n, Stream s) {
  SG_ELEMENTWISE(add_relu_inplace<T>, n, s, out, in, n);
}
template <class T>
void add_relu_backward(float* acc, const float* g, const T* out, long n, Stream s) {
  SG_ELEMENTWISE(add_relu_backward<T>, n, s, acc, g, out, n);
}
inline void add_bias(float* out, const float* bias, long N, long C, Stream s) {
  SG_ELEMENTWISE(add_bias, N * C, s, out, bias, N, C);
}
inline void scale(float* x, float factor, long n, Stream s) { SG_ELEMENTWISE(scale, n, s, x, factor, n); }
inline void fill(float* x, float value, long n, Stream s) { SG_ELEMENTWISE(fill, n, s, x, value, n); }
// The casts of mixed precision (casts.cuh), for bf16.
inline void cast_to_bf16(__nv_bfloat16* out, const float* in, long n, Stream s) {
  cast_to_16bit(out, in, n, s);
}
inline void cast_from_bf16(float* out, const __nv_bfloat16* in, long n, Stream s) {
  cast_from_16bit(out, in, n, s);
}
template <class T>
void nchw_to_nhwc(T* out, const float* inp, int N, int C, int HW, Stream s) {
  SG_ELEMENTWISE(nchw_to_nhwc<T>, static_cast<long>(N) * C * HW, s, out, inp, N, C, HW);
}

#undef SG_ELEMENTWISE

}  // namespace sg::cuda
