#pragma once
// Convolution filters between our layout, (K, C/groups, R, S) as PyTorch stores them (and so
// every checkpoint), and cuDNN's NHWC filter layout (K, R, S, C/groups), which its NHWC
// convolutions take. When R*S == 1 or C/groups == 1 the two are the same bytes: the fp32 path
// skips these, the bf16 path (cudnn_conv.h) still runs them as its cast to and from bf16 (the
// index arithmetic is then the identity). Written per output element (coalesced writes, strided
// reads of a small tensor).
#include "kernels/cuda/casts.cuh"
#include "kernels/cuda/kernel_support.cuh"

namespace sg::cuda {
namespace kernel {

// out (K, RS, Cg) = in (K, Cg, RS) transposed per filter, in the output's type T (float, or
// __nv_bfloat16: rounded to nearest even) from the input's S (exact when S is T).
template <class T, class S>
__global__ void filter_kcrs_to_krsc(T* out, const S* in, int K, int Cg, int RS) {
  const long n = static_cast<long>(K) * Cg * RS;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const long c = i % Cg, rs = (i / Cg) % RS, k = i / (static_cast<long>(Cg) * RS);
    out[i] = narrow<T>(widen(in[(k * Cg + c) * RS + rs]));
  }
}

// out (K, Cg, RS) += in (K, RS, Cg) transposed per filter (a weight gradient accumulates in
// fp32), the source S float or __nv_bfloat16 (widened exactly).
template <class S>
__global__ void filter_krsc_add_to_kcrs(float* out, const S* in, int K, int Cg, int RS) {
  const long n = static_cast<long>(K) * Cg * RS;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const long rs = i % RS, c = (i / RS) % Cg, k = i / (static_cast<long>(RS) * Cg);
    out[i] += widen(in[(k * RS + rs) * Cg + c]);
  }
}

}  // namespace kernel

template <class T, class S>
void filter_kcrs_to_krsc(T* out, const S* in, int K, int Cg, int RS, Stream s) {
  // One name for the template's two arguments: a comma would split SG_LAUNCH's.
  auto* const filter_kcrs_to_krsc_kernel = kernel::filter_kcrs_to_krsc<T, S>;
  SG_LAUNCH(filter_kcrs_to_krsc_kernel,
            dim3(grid_stride_blocks(static_cast<long>(K) * Cg * RS)), dim3(256), 0, s, out, in, K,
            Cg, RS);
}
template <class S>
void filter_krsc_add_to_kcrs(float* out, const S* in, int K, int Cg, int RS, Stream s) {
  SG_LAUNCH(kernel::filter_krsc_add_to_kcrs<S>,
            dim3(grid_stride_blocks(static_cast<long>(K) * Cg * RS)), dim3(256), 0, s, out, in, K,
            Cg, RS);
}

}  // namespace sg::cuda
