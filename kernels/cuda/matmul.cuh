#pragma once
// The linear layer's kernels of our own around cuBLASLt's GEMMs (cublaslt_gemm.cu; contract:
// kernels/matmul.h): the bias broadcast a GEMM accumulates onto when the bias pointer is too
// little aligned for cuBLASLt's bias epilogue, and the bias gradient dbias[o] += sum_n dout[n, o].
// cuBLASLt's BGRADB epilogue is not used for the latter: its summation order is cuBLASLt's own.
// Here the order is fixed: bands of rows, each summed per column in row order by one thread (a
// warp reads 32 consecutive floats of a row), then the bands' partial sums added in band order.
// No atomics, so the result does not depend on scheduling.
#include "kernels/cuda/casts.cuh"
#include "kernels/cuda/kernel_support.cuh"

namespace sg::cuda {

constexpr int kBiasBandRows = 256;  // rows per partial sum (more when a grid's y would overflow)
constexpr unsigned kBiasThreads = 128;

namespace kernel {

// out[n, o] = bias[o] for out (N, OC); T float, or __nv_bfloat16 for a bf16-stored output.
template <class T>
__global__ void broadcast_bias(T* out, const float* bias, long N, int OC) {
  const long n_all = N * OC;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n_all;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    out[i] = narrow<T>(bias[i % OC]);
  }
}

// partial[band, o] = sum over the band's rows of dout[n, o] (dout fp32 or bf16, summed in fp32).
template <class T>
__global__ void bias_band_sums(float* partial, const T* dout, int N, int OC, int band_rows) {
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= OC) return;
  const long first = static_cast<long>(blockIdx.y) * band_rows;
  const long last = first + band_rows < N ? first + band_rows : N;
  float sum = 0.0f;
  for (long n = first; n < last; ++n) sum += widen(dout[n * OC + o]);
  partial[static_cast<long>(blockIdx.y) * OC + o] = sum;
}

// dbias[o] += the bands' partials in band order.
__global__ void bias_add_bands(float* dbias, const float* partial, int bands, int OC) {
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= OC) return;
  float sum = 0.0f;
  for (int b = 0; b < bands; ++b) sum += partial[static_cast<long>(b) * OC + o];
  dbias[o] += sum;
}

}  // namespace kernel

template <class T>
void broadcast_bias(T* out, const float* bias, long N, int OC, Stream s) {
  SG_LAUNCH(kernel::broadcast_bias<T>, dim3(grid_stride_blocks(N * OC)), dim3(256), 0, s, out,
            bias, N, OC);
}

// Rows per band for N rows: 256, doubled while the bands would exceed a grid's y extent.
inline int bias_band_rows(int N) {
  long rows = kBiasBandRows;
  while ((N + rows - 1) / rows > 65535) rows *= 2;
  return static_cast<int>(rows);
}

// Floats of scratch bias_backward needs.
inline long bias_backward_scratch(int N, int OC) {
  const int rows = bias_band_rows(N);
  return (static_cast<long>(N) + rows - 1) / rows * OC;
}

// dbias (OC) += column sums of dout (N, OC); scratch: bias_backward_scratch(N, OC) floats.
template <class T>
void bias_backward(float* dbias, float* scratch, const T* dout, int N, int OC, Stream s) {
  if (N <= 0 || OC <= 0) return;
  const int rows = bias_band_rows(N);
  const int bands = static_cast<int>((static_cast<long>(N) + rows - 1) / rows);
  SG_LAUNCH(kernel::bias_band_sums<T>, dim3(blocks_for(OC, kBiasThreads), static_cast<unsigned>(bands)),
            dim3(kBiasThreads), 0, s, scratch, dout, N, OC, rows);
  SG_LAUNCH(kernel::bias_add_bands, dim3(blocks_for(OC, kBiasThreads)), dim3(kBiasThreads), 0, s,
            dbias, scratch, bands, OC);
}

}  // namespace sg::cuda
