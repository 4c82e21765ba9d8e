#pragma once
// Casts between fp32 and the 16-bit types of reduced precision (__nv_bfloat16, __half), rounding
// to nearest even: the inputs and outputs of cuDNN's fused attention (attention_op.cu), the
// operands of 16-bit GEMMs, and the loads and stores of the kernels that take activations stored
// in 16 bits (docs/bf16.md: narrow<T> and widen are the identity for float). Templates only, so
// any translation unit may include them.
#include <cuda_fp16.h>

#include "kernels/cuda/kernel_support.cuh"

namespace sg::cuda {
namespace kernel {

template <class T>
__device__ __forceinline__ T narrow(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 narrow<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);
}
template <>
__device__ __forceinline__ __half narrow<__half>(float x) {
  return __float2half(x);
}
template <>
__device__ __forceinline__ float narrow<float>(float x) {
  return x;
}
__device__ __forceinline__ float widen(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float widen(__half x) { return __half2float(x); }
__device__ __forceinline__ float widen(float x) { return x; }

#define SG_CAST_LOOP(i, n) \
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<long>(gridDim.x) * blockDim.x)

template <class T>
__global__ void cast_to_16bit(T* out, const float* in, long n) {
  SG_CAST_LOOP(i, n) out[i] = narrow<T>(in[i]);
}

template <class T>
__global__ void cast_from_16bit(float* out, const T* in, long n) {
  SG_CAST_LOOP(i, n) out[i] = widen(in[i]);
}

template <class T>
__global__ void accumulate_16bit(float* out, const T* in, long n) {
  SG_CAST_LOOP(i, n) out[i] += widen(in[i]);
}

#undef SG_CAST_LOOP

}  // namespace kernel

// Grid-stride launches of 256 threads (grid_stride_blocks' assumption).
// out (=) in T from fp32 in.
template <class T>
void cast_to_16bit(T* out, const float* in, long n, Stream s) {
  SG_LAUNCH(kernel::cast_to_16bit<T>, dim3(grid_stride_blocks(n)), dim3(256), 0, s, out, in, n);
}
// out (=) in fp32 from T in.
template <class T>
void cast_from_16bit(float* out, const T* in, long n, Stream s) {
  SG_LAUNCH(kernel::cast_from_16bit<T>, dim3(grid_stride_blocks(n)), dim3(256), 0, s, out, in, n);
}
// out (+=) in fp32 from T in.
template <class T>
void accumulate_16bit(float* out, const T* in, long n, Stream s) {
  SG_LAUNCH(kernel::accumulate_16bit<T>, dim3(grid_stride_blocks(n)), dim3(256), 0, s, out, in, n);
}

}  // namespace sg::cuda
