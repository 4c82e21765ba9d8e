#pragma once
// What every CUDA kernel body of ours includes. Compiled by nvcc it is plain CUDA; compiled by the
// host compiler (the `cuda` test suite, on machines without a GPU) the same bodies run on the CPU
// through emulation.h. Kernels are launched with SG_LAUNCH instead of <<<>>>, take dynamic shared
// memory through SG_DYNAMIC_SHARED, and use only what emulation.h provides.
//
// Conventions (as kernels/README.md): outputs first, shapes in comments, backward outputs += unless
// the op says =. No atomics on floats: every sum runs in a fixed order, so results do not depend
// on the launch configuration's scheduling (deterministic mode relies on it).
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
// A bad launch configuration is reported by cudaGetLastError right after the launch: checked
// here, so every launch of ours names its kernel when it fails.
#define SG_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                    \
  do {                                                                             \
    kernel<<<(grid), (block), (shared_bytes), (stream)>>>(__VA_ARGS__);            \
    SG_CUDA_CHECK_LAUNCH(#kernel);                                                 \
  } while (0)
#define SG_DYNAMIC_SHARED(type, name)                   \
  extern __shared__ __align__(16) unsigned char sg_dynamic_shared_bytes[]; \
  type* name = reinterpret_cast<type*>(sg_dynamic_shared_bytes)
namespace sg::cuda {
using Stream = cudaStream_t;
}
#else
#include "kernels/cuda/emulation.h"
#define SG_LAUNCH(kernel, grid, block, shared_bytes, stream, ...) \
  ((void)(stream), ::sg::emu::launch((grid), (block), (shared_bytes), [&] { kernel(__VA_ARGS__); }))
#define SG_DYNAMIC_SHARED(type, name) type* name = ::sg::emu::dynamic_shared<type>()
namespace sg::cuda {
using Stream = void*;
}
#endif

// Unrolls the loop that follows where nvcc compiles it (a loop over a compile-time count then
// indexes its per-thread arrays with constants, which keeps them in registers).
#if defined(__CUDACC__)
#define SG_UNROLL _Pragma("unroll")
#else
#define SG_UNROLL
#endif

namespace sg::cuda {

constexpr unsigned kWarp = 32;

inline unsigned blocks_for(long n, unsigned threads) {
  return static_cast<unsigned>((n + threads - 1) / threads);
}

// Grid blocks (along x, or rows along y) for `wanted` units of a kernel that strides over what
// the grid does not cover: at least 1 and at most 65535 (a launch's limit along y, and enough to
// fill a GPU along x). The CPU emulation takes at most 8, since such a kernel does not depend on
// the grid's size, every emulated block costs two barriers of all its threads, and its tests
// then reach the stride.
inline unsigned strided_grid(long wanted) {
#if defined(__CUDACC__)
  constexpr long kMaxBlocks = 65535;
#else
  constexpr long kMaxBlocks = 8;
#endif
  return static_cast<unsigned>(wanted < 1 ? 1 : (wanted > kMaxBlocks ? kMaxBlocks : wanted));
}

// Blocks of 256 threads for a grid-stride loop over n elements.
inline unsigned grid_stride_blocks(long n) { return strided_grid(blocks_for(n, 256)); }

// Sum over a warp, the same order in every lane (butterfly).
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float o = __shfl_xor_sync(0xffffffffu, v, offset);
    v = o > v ? o : v;
  }
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024): every thread gets the total.
// `scratch` holds 32 values; the block synchronises twice.
template <class T>
__device__ __forceinline__ T block_sum(T v, T* scratch) {
  const unsigned lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const unsigned warps = blockDim.x / kWarp;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T total = lane < warps ? scratch[lane] : T(0);
  total = warp_sum(total);
  __syncthreads();  // scratch may be reused right after
  return total;
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
  const unsigned lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const unsigned warps = blockDim.x / kWarp;
  v = warp_max(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float m = lane < warps ? scratch[lane] : -INFINITY;
  m = warp_max(m);
  __syncthreads();
  return m;
}

}  // namespace sg::cuda
