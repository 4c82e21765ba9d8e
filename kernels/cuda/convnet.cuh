#pragma once
// The convolutional networks' kernels of our own (contracts: kernels/classifier_loss.h, pool.h's
// global average pooling, batchnorm.h's split functions); convolution, the fused batch norm and
// max pooling go through cuDNN. Activations NHWC, batch norm over the rows of an (M, C) matrix.
// Every sum in a fixed order: per-channel sums over rows are taken in fixed row bands, then the
// bands added in band order (as the CPU's).
#include "kernels/cuda/kernel_support.cuh"

namespace sg::cuda {

constexpr long kBatchnormBand = 256;  // rows per partial sum (the CPU's band too)

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

// out (N, C) = mean over HW of inp (N, HW, C): one thread per (n, c).
__global__ void global_avgpool_forward(float* out, const float* inp, int N, int HW, int C) {
  const long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<long>(N) * C) return;
  const long n = i / C, c = i % C;
  float sum = 0.0f;
  for (int p = 0; p < HW; ++p) sum += inp[(n * HW + p) * C + c];
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

// Band b, channel c (thread): sums over the band's rows of f(row, c), two values per channel.
// mode 0: x and x^2; mode 1: dy and dy * xhat.
__global__ void batchnorm_band_sums(double* partial, const float* a, const float* b,
                                    const float* mean, const float* var, float eps, long M, int C,
                                    int mode) {
  // Bands stride over the grid's rows (strided_grid: at most 65535, reached above 16.8 M rows).
  const long bands = (M + kBatchnormBand - 1) / kBatchnormBand;
  for (long band = blockIdx.y; band < bands; band += gridDim.y) {
    const long first = band * kBatchnormBand;
    const long last = first + kBatchnormBand < M ? first + kBatchnormBand : M;
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < C; c += gridDim.x * blockDim.x) {
      double s0 = 0.0, s1 = 0.0;
      if (mode == 0) {
        for (long m = first; m < last; ++m) {
          const double v = a[m * C + c];
          s0 += v;
          s1 += v * v;
        }
      } else {
        const double mu = mean[c], rstd = 1.0 / sqrt(static_cast<double>(var[c]) + eps);
        for (long m = first; m < last; ++m) {
          const double dy = a[m * C + c];
          s0 += dy;
          s1 += dy * (b[m * C + c] - mu) * rstd;
        }
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

__global__ void batchnorm_normalize(float* out, const float* inp, const float* mean,
                                    const float* var, const float* gamma, const float* beta,
                                    long M, int C, float eps) {
  const long n_all = M * C;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n_all;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const int c = static_cast<int>(i % C);
    const float rstd = 1.0f / sqrtf(var[c] + eps);
    const float sc = gamma[c] * rstd;
    out[i] = inp[i] * sc + (beta[c] - mean[c] * sc);
  }
}

__global__ void batchnorm_backward_input(float* dinp, const double* sums, const float* dout,
                                         const float* inp, const float* mean, const float* var,
                                         const float* gamma, double count, long M, int C,
                                         float eps) {
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
    dinp[i] = a * dout[i] + b * inp[i] + d;
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
inline void global_avgpool_forward(float* out, const float* inp, int N, int HW, int C, Stream s) {
  SG_LAUNCH(kernel::global_avgpool_forward, dim3(blocks_for(static_cast<long>(N) * C, 256)),
            dim3(256), 0, s, out, inp, N, HW, C);
}
inline void global_avgpool_backward(float* dinp, const float* dout, int N, int HW, int C, Stream s) {
  SG_LAUNCH(kernel::global_avgpool_backward, dim3(grid_stride_blocks(static_cast<long>(N) * HW * C)),
            dim3(256), 0, s, dinp, dout, N, HW, C);
}

// Doubles of scratch the batch-norm sums need for M rows of C channels.
inline long batchnorm_sums_scratch(long M, int C) {
  return (M + kBatchnormBand - 1) / kBatchnormBand * 2 * C;
}

inline void batchnorm_sums(double* sums, double* scratch, const float* inp, long M, int C, Stream s) {
  const long bands = (M + kBatchnormBand - 1) / kBatchnormBand;
  SG_LAUNCH(kernel::batchnorm_band_sums, dim3(blocks_for(C, 128), strided_grid(bands)),
            dim3(128), 0, s, scratch, inp, nullptr, nullptr, nullptr, 0.0f, M, C, 0);
  SG_LAUNCH(kernel::batchnorm_reduce_bands, dim3(blocks_for(C, 128)), dim3(128), 0, s, sums,
            nullptr, nullptr, scratch, bands, C);
}
inline void batchnorm_stats(float* mean, float* var, const double* sums, double count, int C,
                            Stream s) {
  SG_LAUNCH(kernel::batchnorm_stats, dim3(blocks_for(C, 128)), dim3(128), 0, s, mean, var, sums,
            count, C);
}
inline void batchnorm_normalize(float* out, const float* inp, const float* mean, const float* var,
                                const float* gamma, const float* beta, long M, int C, float eps,
                                Stream s) {
  SG_LAUNCH(kernel::batchnorm_normalize, dim3(grid_stride_blocks(M * C)), dim3(256), 0, s, out, inp, mean,
            var, gamma, beta, M, C, eps);
}
inline void batchnorm_backward_sums(double* sums, double* scratch, float* dgamma, float* dbeta,
                                    const float* dout, const float* inp, const float* mean,
                                    const float* var, long M, int C, float eps, Stream s) {
  const long bands = (M + kBatchnormBand - 1) / kBatchnormBand;
  SG_LAUNCH(kernel::batchnorm_band_sums, dim3(blocks_for(C, 128), strided_grid(bands)),
            dim3(128), 0, s, scratch, dout, inp, mean, var, eps, M, C, 1);
  SG_LAUNCH(kernel::batchnorm_reduce_bands, dim3(blocks_for(C, 128)), dim3(128), 0, s, sums,
            dgamma, dbeta, scratch, bands, C);
}
inline void batchnorm_backward_input(float* dinp, const double* sums, const float* dout,
                                     const float* inp, const float* mean, const float* var,
                                     const float* gamma, double count, long M, int C, float eps,
                                     Stream s) {
  SG_LAUNCH(kernel::batchnorm_backward_input, dim3(grid_stride_blocks(M * C)), dim3(256), 0, s, dinp, sums,
            dout, inp, mean, var, gamma, count, M, C, eps);
}
inline void batchnorm_update_running(float* running_mean, float* running_var, const float* mean,
                                     const float* var, double count, int C, float momentum,
                                     Stream s) {
  SG_LAUNCH(kernel::batchnorm_update_running, dim3(blocks_for(C, 128)), dim3(128), 0, s,
            running_mean, running_var, mean, var, count, C, momentum);
}

}  // namespace sg::cuda
