#pragma once
// Convolution filters between our layout, (K, C/groups, R, S) as PyTorch stores them (and so
// every checkpoint), and cuDNN's NHWC filter layout (K, R, S, C/groups), which its NHWC
// convolutions take. When R*S == 1 or C/groups == 1 the two are the same bytes and the caller
// skips these. Written per output element (coalesced writes, strided reads of a small tensor).
#include "kernels/cuda/kernel_support.cuh"

namespace sg::cuda {
namespace kernel {

// out (K, RS, Cg) = in (K, Cg, RS) transposed per filter.
__global__ void filter_kcrs_to_krsc(float* out, const float* in, int K, int Cg, int RS) {
  const long n = static_cast<long>(K) * Cg * RS;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const long c = i % Cg, rs = (i / Cg) % RS, k = i / (static_cast<long>(Cg) * RS);
    out[i] = in[(k * Cg + c) * RS + rs];
  }
}

// out (K, Cg, RS) += in (K, RS, Cg) transposed per filter (a weight gradient accumulates).
__global__ void filter_krsc_add_to_kcrs(float* out, const float* in, int K, int Cg, int RS) {
  const long n = static_cast<long>(K) * Cg * RS;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const long rs = i % RS, c = (i / RS) % Cg, k = i / (static_cast<long>(RS) * Cg);
    out[i] += in[(k * RS + rs) * Cg + c];
  }
}

}  // namespace kernel

inline void filter_kcrs_to_krsc(float* out, const float* in, int K, int Cg, int RS, Stream s) {
  SG_LAUNCH(kernel::filter_kcrs_to_krsc, dim3(grid_stride_blocks(static_cast<long>(K) * Cg * RS)),
            dim3(256), 0, s, out, in, K, Cg, RS);
}
inline void filter_krsc_add_to_kcrs(float* out, const float* in, int K, int Cg, int RS, Stream s) {
  SG_LAUNCH(kernel::filter_krsc_add_to_kcrs,
            dim3(grid_stride_blocks(static_cast<long>(K) * Cg * RS)), dim3(256), 0, s, out, in, K,
            Cg, RS);
}

}  // namespace sg::cuda
