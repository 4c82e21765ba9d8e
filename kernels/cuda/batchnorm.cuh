#pragma once
// Batch normalisation's kernels (contracts: kernels/batchnorm.h's split functions, and the fused
// ReLU and residual forms of src/backend/backend.h) over the rows of an (M, C) matrix: NHWC
// activations with M = N*H*W. Every sum in a fixed order: per-channel sums over rows are taken
// in fixed row bands, then the bands added in band order (as the CPU's). The fused forms take
// the same sums in the same order and round nothing the unfused ops do not, so in fp32 they are
// bit for bit the unfused sequence (normalize then relu_forward or add_relu_inplace;
// relu_backward or add_inplace + relu_backward, then the backward's two passes).
//
// T: the activations' element type (x, the output, the input gradient): float, or
// __nv_bfloat16 where they are stored in bf16 (docs/bf16.md): loaded exactly, computed in fp32
// (the sums in double, as in fp32), rounded on the store. The output gradient (dout, g) and the
// statistics stay fp32.
#include "kernels/cuda/casts.cuh"
#include "kernels/cuda/kernel_support.cuh"

namespace sg::cuda {

constexpr long kBatchnormBand = 256;  // rows per partial sum (the CPU's band too)

// What the backward takes as the gradient dy of the batch norm's output, from dout (fp32).
enum BatchnormGrad : int {
  kGradPlain = 0,    // dy = dout
  kGradRelu = 1,     // dy = out > 0 ? dout : 0 (out: the fused ReLU's output): relu_backward
  kGradAddRelu = 2,  // dy = out > 0 ? dout + g : 0, written into dout by the first pass:
                     // add_relu_backward (out: the ReLU after the residual add)
};

namespace kernel {

// Band b, channel c (thread): sum of x and of x^2 over the band's rows.
template <class T>
__global__ void batchnorm_band_sums(double* partial, const T* x, long M, int C) {
  // Bands stride over the grid's rows (strided_grid: at most 65535, reached above 16.8 M rows).
  const long bands = (M + kBatchnormBand - 1) / kBatchnormBand;
  for (long band = blockIdx.y; band < bands; band += gridDim.y) {
    const long first = band * kBatchnormBand;
    const long last = first + kBatchnormBand < M ? first + kBatchnormBand : M;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
      double s0 = 0.0, s1 = 0.0;
      for (long m = first; m < last; ++m) {
        const double v = widen(x[m * C + c]);
        s0 += v;
        s1 += v * v;
      }
      partial[band * 2 * C + c] = s0;
      partial[band * 2 * C + C + c] = s1;
    }
  }
}

// Band b, channel c (thread): sum of dy and of dy * xhat over the band's rows, dy as `grad`
// says (kGradAddRelu writes it into dy_store, which is dout: each element read, then written,
// by the one thread of its channel).
template <class T>
__global__ void batchnorm_backward_band_sums(double* partial, float* dy_store, const float* dout,
                                             const float* g, const T* out, const T* x,
                                             const float* mean, const float* var, float eps,
                                             long M, int C, int grad) {
  const long bands = (M + kBatchnormBand - 1) / kBatchnormBand;
  for (long band = blockIdx.y; band < bands; band += gridDim.y) {
    const long first = band * kBatchnormBand;
    const long last = first + kBatchnormBand < M ? first + kBatchnormBand : M;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
      const double mu = mean[c], rstd = 1.0 / sqrt(static_cast<double>(var[c]) + eps);
      double s0 = 0.0, s1 = 0.0;
      for (long m = first; m < last; ++m) {
        const long i = m * C + c;
        float d = dout[i];
        if (grad == kGradRelu) {
          d = widen(out[i]) > 0.0f ? d : 0.0f;
        } else if (grad == kGradAddRelu) {
          d = widen(out[i]) > 0.0f ? d + g[i] : 0.0f;
          dy_store[i] = d;
        }
        const double dy = d;
        s0 += dy;
        s1 += dy * (widen(x[i]) - mu) * rstd;
      }
      partial[band * 2 * C + c] = s0;
      partial[band * 2 * C + C + c] = s1;
    }
  }
}

// sums[c], sums[C + c]: the bands' partials added in band order; with dgamma/dbeta (backward)
// also this replica's parameter gradients (+=).
__global__ void batchnorm_reduce_bands(double* sums, float* dgamma, float* dbeta,
                                       const double* partial, long bands, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  double s0 = 0.0, s1 = 0.0;
  for (long b = 0; b < bands; ++b) {
    s0 += partial[b * 2 * C + c];
    s1 += partial[b * 2 * C + C + c];
  }
  sums[c] = s0;
  sums[C + c] = s1;
  if (dbeta != nullptr) dbeta[c] += static_cast<float>(s0);
  if (dgamma != nullptr) dgamma[c] += static_cast<float>(s1);
}

__global__ void batchnorm_stats(float* mean, float* var, const double* sums, double count, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const double mu = sums[c] / count;
  const double v = sums[C + c] / count - mu * mu;
  mean[c] = static_cast<float>(mu);
  var[c] = static_cast<float>(v > 0.0 ? v : 0.0);
}

// out = bn(inp); with a residual, bn(inp) rounded to T (as the unfused batch norm stores it)
// plus the residual; with relu, the ReLU of that. One rounding to T on the store.
template <class T>
__global__ void batchnorm_normalize(T* out, const T* inp, const T* residual, const float* mean,
                                    const float* var, const float* gamma, const float* beta,
                                    long M, int C, float eps, int relu) {
  const long n_all = M * C;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n_all;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(i % C);
    const float rstd = 1.0f / sqrtf(var[c] + eps);
    const float sc = gamma[c] * rstd;
    float y = widen(inp[i]) * sc + (beta[c] - mean[c] * sc);
    if (residual != nullptr) y = widen(narrow<T>(y)) + widen(residual[i]);
    if (relu != 0) y = y > 0.0f ? y : 0.0f;
    out[i] = narrow<T>(y);
  }
}

// dinp from dout (masked where out is not positive when out is not null: the fused ReLU's).
// dinp may be dout's memory (fp32): each element's gradient is read before it is written.
template <class T>
__global__ void batchnorm_backward_input(T* dinp, const double* sums, const float* dout,
                                         const T* out, const T* inp, const float* mean,
                                         const float* var, const float* gamma, double count,
                                         long M, int C, float eps) {
  const long n_all = M * C;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n_all;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(i % C);
    const double rstd = 1.0 / sqrt(static_cast<double>(var[c]) + eps);
    const double g = static_cast<double>(gamma[c]) * rstd;
    const double mean_dy = sums[c] / count, mean_dy_xhat = sums[C + c] / count;
    const float a = static_cast<float>(g);
    const float b = static_cast<float>(-g * mean_dy_xhat * rstd);
    const float d = static_cast<float>(-g * mean_dy + g * mean_dy_xhat * rstd * mean[c]);
    float dy = dout[i];
    if (out != nullptr) dy = widen(out[i]) > 0.0f ? dy : 0.0f;
    dinp[i] = narrow<T>(a * dy + b * widen(inp[i]) + d);
  }
}

__global__ void batchnorm_update_running(float* running_mean, float* running_var,
                                         const float* mean, const float* var, double count,
                                         int C, float momentum) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const double unbias = count > 1 ? count / (count - 1) : 1.0;
  running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * mean[c];
  running_var[c] = (1.0f - momentum) * running_var[c] +
                   momentum * static_cast<float>(static_cast<double>(var[c]) * unbias);
}

}  // namespace kernel

// Doubles of scratch the batch-norm sums need for M rows of C channels.
inline long batchnorm_sums_scratch(long M, int C) {
  return (M + kBatchnormBand - 1) / kBatchnormBand * 2 * C;
}

// sums (2C, =): column sums of inp and of its squares. Two launches (bands, then their sum).
template <class T>
void batchnorm_sums(double* sums, double* scratch, const T* inp, long M, int C, Stream s) {
  const long bands = (M + kBatchnormBand - 1) / kBatchnormBand;
  SG_LAUNCH(kernel::batchnorm_band_sums<T>, dim3(blocks_for(C, 128), strided_grid(bands)),
            dim3(128), 0, s, scratch, inp, M, C);
  SG_LAUNCH(kernel::batchnorm_reduce_bands, dim3(blocks_for(C, 128)), dim3(128), 0, s, sums,
            nullptr, nullptr, scratch, bands, C);
}
inline void batchnorm_stats(float* mean, float* var, const double* sums, double count, int C,
                            Stream s) {
  SG_LAUNCH(kernel::batchnorm_stats, dim3(blocks_for(C, 128)), dim3(128), 0, s, mean, var, sums,
            count, C);
}

namespace detail {
template <class T>
void batchnorm_normalize(T* out, const T* inp, const T* residual, const float* mean,
                         const float* var, const float* gamma, const float* beta, long M, int C,
                         float eps, int relu, Stream s) {
  SG_LAUNCH(kernel::batchnorm_normalize<T>, dim3(grid_stride_blocks(M * C)), dim3(256), 0, s,
            out, inp, residual, mean, var, gamma, beta, M, C, eps, relu);
}
template <class T>
void batchnorm_backward_sums(double* sums, double* scratch, float* dgamma, float* dbeta,
                             float* dy_store, const float* dout, const float* g, const T* out,
                             const T* inp, const float* mean, const float* var, long M, int C,
                             float eps, int grad, Stream s) {
  const long bands = (M + kBatchnormBand - 1) / kBatchnormBand;
  SG_LAUNCH(kernel::batchnorm_backward_band_sums<T>,
            dim3(blocks_for(C, 128), strided_grid(bands)), dim3(128), 0, s, scratch, dy_store,
            dout, g, out, inp, mean, var, eps, M, C, grad);
  SG_LAUNCH(kernel::batchnorm_reduce_bands, dim3(blocks_for(C, 128)), dim3(128), 0, s, sums,
            dgamma, dbeta, scratch, bands, C);
}
template <class T>
void batchnorm_backward_input(T* dinp, const double* sums, const float* dout, const T* out,
                              const T* inp, const float* mean, const float* var,
                              const float* gamma, double count, long M, int C, float eps,
                              Stream s) {
  SG_LAUNCH(kernel::batchnorm_backward_input<T>, dim3(grid_stride_blocks(M * C)), dim3(256), 0,
            s, dinp, sums, dout, out, inp, mean, var, gamma, count, M, C, eps);
}
}  // namespace detail

// out = bn(inp) (=), one pass.
template <class T>
void batchnorm_normalize(T* out, const T* inp, const float* mean, const float* var,
                         const float* gamma, const float* beta, long M, int C, float eps,
                         Stream s) {
  detail::batchnorm_normalize<T>(out, inp, nullptr, mean, var, gamma, beta, M, C, eps, 0, s);
}
// out = max(0, bn(inp)) (=), one pass: batchnorm_normalize then relu_forward, bit for bit.
template <class T>
void batchnorm_normalize_relu(T* out, const T* inp, const float* mean, const float* var,
                              const float* gamma, const float* beta, long M, int C, float eps,
                              Stream s) {
  detail::batchnorm_normalize<T>(out, inp, nullptr, mean, var, gamma, beta, M, C, eps, 1, s);
}
// out = max(0, bn(inp) + residual) (=), one pass: batchnorm_normalize then add_relu_inplace,
// bit for bit (in bf16 too: bn(inp) is rounded before the add, as the pair stores it).
template <class T>
void batchnorm_normalize_add_relu(T* out, const T* inp, const T* residual, const float* mean,
                                  const float* var, const float* gamma, const float* beta,
                                  long M, int C, float eps, Stream s) {
  detail::batchnorm_normalize<T>(out, inp, residual, mean, var, gamma, beta, M, C, eps, 1, s);
}

// sums (2C, =): sum of dy and of dy * xhat; dgamma, dbeta (+=) this replica's part. dy = dout.
template <class T>
void batchnorm_backward_sums(double* sums, double* scratch, float* dgamma, float* dbeta,
                             const float* dout, const T* inp, const float* mean,
                             const float* var, long M, int C, float eps, Stream s) {
  detail::batchnorm_backward_sums<T>(sums, scratch, dgamma, dbeta, nullptr, dout, nullptr,
                                     nullptr, inp, mean, var, M, C, eps, kGradPlain, s);
}
// The same with dy = out > 0 ? dout : 0 read on the fly (out: the fused ReLU's output).
template <class T>
void batchnorm_relu_backward_sums(double* sums, double* scratch, float* dgamma, float* dbeta,
                                  const float* dout, const T* out, const T* inp,
                                  const float* mean, const float* var, long M, int C, float eps,
                                  Stream s) {
  detail::batchnorm_backward_sums<T>(sums, scratch, dgamma, dbeta, nullptr, dout, nullptr, out,
                                     inp, mean, var, M, C, eps, kGradRelu, s);
}
// The same with dy = out > 0 ? dout + g : 0, also written into dout (=): add_relu_backward made
// in this pass.
template <class T>
void batchnorm_add_relu_backward_sums(double* sums, double* scratch, float* dgamma,
                                      float* dbeta, float* dout, const float* g, const T* out,
                                      const T* inp, const float* mean, const float* var, long M,
                                      int C, float eps, Stream s) {
  detail::batchnorm_backward_sums<T>(sums, scratch, dgamma, dbeta, dout, dout, g, out, inp,
                                     mean, var, M, C, eps, kGradAddRelu, s);
}
// dinp (=, rounded to T) from the (possibly all-reduced) sums over `count` rows in all.
template <class T>
void batchnorm_backward_input(T* dinp, const double* sums, const float* dout, const T* inp,
                              const float* mean, const float* var, const float* gamma,
                              double count, long M, int C, float eps, Stream s) {
  detail::batchnorm_backward_input<T>(dinp, sums, dout, nullptr, inp, mean, var, gamma, count, M,
                                      C, eps, s);
}
// The same with dout masked where out (the fused ReLU's output) is not positive.
template <class T>
void batchnorm_relu_backward_input(T* dinp, const double* sums, const float* dout, const T* out,
                                   const T* inp, const float* mean, const float* var,
                                   const float* gamma, double count, long M, int C, float eps,
                                   Stream s) {
  detail::batchnorm_backward_input<T>(dinp, sums, dout, out, inp, mean, var, gamma, count, M, C,
                                      eps, s);
}
inline void batchnorm_update_running(float* running_mean, float* running_var, const float* mean,
                                     const float* var, double count, int C, float momentum,
                                     Stream s) {
  SG_LAUNCH(kernel::batchnorm_update_running, dim3(blocks_for(C, 128)), dim3(128), 0, s,
            running_mean, running_var, mean, var, count, C, momentum);
}

}  // namespace sg::cuda
