#pragma once
// The Llama family's kernels on CUDA: RMSNorm (contract: kernels/rmsnorm.h), SwiGLU
// (kernels/swiglu.h) and the rotary embedding with grouped-query key/value sharing
// (kernels/rope.h).
// RMSNorm: one warp per row; dweight (+=) summed over rows in a fixed order without atomics, as
// layernorm.cuh's: a block's rows into its partial sums, then the blocks' partials in block order.
// SwiGLU: one thread per output element. RoPE: one thread per (row, pair of a head's halves);
// the backward sums a group's key and value gradients in head order.
#include "kernels/cuda/kernel_support.cuh"

namespace sg::cuda {

constexpr int kRmsnormRowsPerBlock = 32;

namespace kernel {

__global__ void rmsnorm_forward(float* __restrict__ out, float* __restrict__ rstd,
                                const float* __restrict__ inp, const float* __restrict__ weight,
                                int N, int C, float eps) {
  const int warps = blockDim.x / kWarp;
  const int row = blockIdx.x * warps + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;  // whole warps only: no barrier follows
  const float* x = inp + static_cast<long>(row) * C;
  float sum_sq = 0.0f;
  for (int c = lane; c < C; c += kWarp) sum_sq += x[c] * x[c];
  const float s = rsqrtf(warp_sum(sum_sq) / C + eps);
  float* y = out + static_cast<long>(row) * C;
  for (int c = lane; c < C; c += kWarp) y[c] = weight[c] * (x[c] * s);
  if (lane == 0) rstd[row] = s;
}

__global__ void rmsnorm_backward(float* __restrict__ dinp, float* __restrict__ partial,
                                 const float* __restrict__ dout, const float* __restrict__ inp,
                                 const float* __restrict__ weight, const float* __restrict__ rstd,
                                 int N, int C) {
  const int warps = blockDim.x / kWarp;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
  const int first = blockIdx.x * kRmsnormRowsPerBlock;
  const int last = first + kRmsnormRowsPerBlock < N ? first + kRmsnormRowsPerBlock : N;
  for (int row = first + warp; row < last; row += warps) {
    const float* dy = dout + static_cast<long>(row) * C;
    const float* x = inp + static_cast<long>(row) * C;
    float* dx = dinp + static_cast<long>(row) * C;
    const float s = rstd[row];
    float dot = 0.0f;
    for (int c = lane; c < C; c += kWarp) dot += dy[c] * weight[c] * (x[c] * s);
    const float mean_dot = warp_sum(dot) / C;
    for (int c = lane; c < C; c += kWarp) dx[c] += s * (dy[c] * weight[c] - x[c] * s * mean_dot);
  }
  float* dweight_b = partial + static_cast<long>(blockIdx.x) * C;
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float dw = 0.0f;
    for (int row = first; row < last; ++row) {
      const long i = static_cast<long>(row) * C + c;
      dw += dout[i] * (inp[i] * rstd[row]);
    }
    dweight_b[c] = dw;
  }
}

__global__ void rmsnorm_backward_weight(float* __restrict__ dweight,
                                        const float* __restrict__ partial, int blocks, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float dw = 0.0f;
  for (int b = 0; b < blocks; ++b) dw += partial[static_cast<long>(b) * C + c];
  dweight[c] += dw;
}

__device__ inline float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

__global__ void swiglu_forward(float* __restrict__ out, const float* __restrict__ inp, long N,
                               int I) {
  const long k = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= N * I) return;
  const long n = k / I, i = k % I;
  const float g = inp[n * 2 * I + i], u = inp[n * 2 * I + I + i];
  out[k] = g * sigmoid(g) * u;
}

__global__ void swiglu_backward(float* __restrict__ dinp, const float* __restrict__ inp,
                                const float* __restrict__ dout, long N, int I) {
  const long k = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= N * I) return;
  const long n = k / I, i = k % I;
  const float g = inp[n * 2 * I + i], u = inp[n * 2 * I + I + i];
  const float s = sigmoid(g), dy = dout[k];
  dinp[n * 2 * I + i] = dy * u * s * (1.0f + g * (1.0f - s));
  dinp[n * 2 * I + I + i] = dy * g * s;
}

// Thread k: row r = k / (3 NH half), then which of q/k/v, the head and the pair.
__global__ void rope_qkv_forward(float* __restrict__ out, const float* __restrict__ qkv,
                                 const float* __restrict__ cos_table,
                                 const float* __restrict__ sin_table, int rows, int T, int NH,
                                 int NKV, int HS) {
  const int half = HS / 2;
  const long per_row = 3L * NH * half;
  const long k = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= rows * per_row) return;
  const long r = k / per_row;
  const int rest = static_cast<int>(k % per_row);
  const int part = rest / (NH * half), h = (rest / half) % NH, i = rest % half;
  const int kv = h / (NH / NKV);
  const long C = static_cast<long>(NH) * HS;
  const float* in = qkv + r * (NH + 2L * NKV) * HS;
  float* o = out + r * 3 * C + part * C + static_cast<long>(h) * HS;
  if (part == 2) {  // values: copied
    const float* v = in + C + static_cast<long>(NKV) * HS + static_cast<long>(kv) * HS;
    o[i] = v[i];
    o[i + half] = v[i + half];
    return;
  }
  const float* x = part == 0 ? in + static_cast<long>(h) * HS : in + C + static_cast<long>(kv) * HS;
  const int t = static_cast<int>(r % T);
  const float c = cos_table[t * half + i], s = sin_table[t * half + i];
  const float a = x[i], b = x[i + half];
  o[i] = a * c - b * s;
  o[i + half] = b * c + a * s;
}

// Thread k: row r, then a query head's pair, or a key/value head's pair (its group summed).
__global__ void rope_qkv_backward(float* __restrict__ dqkv, const float* __restrict__ dout,
                                  const float* __restrict__ cos_table,
                                  const float* __restrict__ sin_table, int rows, int T, int NH,
                                  int NKV, int HS) {
  const int half = HS / 2, group = NH / NKV;
  const long per_row = static_cast<long>(NH + NKV) * half;
  const long k = static_cast<long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (k >= rows * per_row) return;
  const long r = k / per_row;
  const int rest = static_cast<int>(k % per_row);
  const long C = static_cast<long>(NH) * HS;
  const float* d = dout + r * 3 * C;
  float* dq = dqkv + r * (NH + 2L * NKV) * HS;
  const int t = static_cast<int>(r % T);
  const int i = rest % half;
  const float c = cos_table[t * half + i], s = sin_table[t * half + i];
  if (rest < NH * half) {  // a query head: turned back
    const int h = rest / half;
    const float ga = d[static_cast<long>(h) * HS + i], gb = d[static_cast<long>(h) * HS + i + half];
    dq[static_cast<long>(h) * HS + i] = ga * c + gb * s;
    dq[static_cast<long>(h) * HS + i + half] = gb * c - ga * s;
    return;
  }
  const int j = (rest - NH * half) / half;  // the key/value head
  float ka = 0.0f, kb = 0.0f, va = 0.0f, vb = 0.0f;
  for (int h = j * group; h < (j + 1) * group; ++h) {
    ka += d[C + static_cast<long>(h) * HS + i];
    kb += d[C + static_cast<long>(h) * HS + i + half];
    va += d[2 * C + static_cast<long>(h) * HS + i];
    vb += d[2 * C + static_cast<long>(h) * HS + i + half];
  }
  float* dk = dq + C + static_cast<long>(j) * HS;
  float* dv = dq + C + static_cast<long>(NKV) * HS + static_cast<long>(j) * HS;
  dk[i] = ka * c + kb * s;
  dk[i + half] = kb * c - ka * s;
  dv[i] = va;
  dv[i + half] = vb;
}

}  // namespace kernel

constexpr unsigned kRmsnormThreads = 256;  // 8 warps: 8 rows per block in the forward

inline void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N,
                            int C, float eps, Stream s) {
  SG_LAUNCH(kernel::rmsnorm_forward, dim3(blocks_for(N, kRmsnormThreads / kWarp)),
            dim3(kRmsnormThreads), 0, s, out, rstd, inp, weight, N, C, eps);
}

// Floats of the scratch rmsnorm_backward needs for N rows of C channels.
inline long rmsnorm_backward_scratch(int N, int C) {
  return static_cast<long>(blocks_for(N, kRmsnormRowsPerBlock)) * C;
}

inline void rmsnorm_backward(float* dinp, float* dweight, float* scratch, const float* dout,
                             const float* inp, const float* weight, const float* rstd, int N,
                             int C, Stream s) {
  const int blocks = static_cast<int>(blocks_for(N, kRmsnormRowsPerBlock));
  SG_LAUNCH(kernel::rmsnorm_backward, dim3(blocks), dim3(kRmsnormThreads), 0, s, dinp, scratch,
            dout, inp, weight, rstd, N, C);
  SG_LAUNCH(kernel::rmsnorm_backward_weight, dim3(blocks_for(C, 256)), dim3(256), 0, s, dweight,
            scratch, blocks, C);
}

inline void swiglu_forward(float* out, const float* inp, long N, int I, Stream s) {
  SG_LAUNCH(kernel::swiglu_forward, dim3(blocks_for(N * I, 256)), dim3(256), 0, s, out, inp, N, I);
}

inline void swiglu_backward(float* dinp, const float* inp, const float* dout, long N, int I,
                            Stream s) {
  SG_LAUNCH(kernel::swiglu_backward, dim3(blocks_for(N * I, 256)), dim3(256), 0, s, dinp, inp,
            dout, N, I);
}

inline void rope_qkv_forward(float* out, const float* qkv, const float* cos_table,
                             const float* sin_table, int B, int T, int NH, int NKV, int HS,
                             Stream s) {
  const long threads = static_cast<long>(B) * T * 3 * NH * (HS / 2);
  SG_LAUNCH(kernel::rope_qkv_forward, dim3(blocks_for(threads, 256)), dim3(256), 0, s, out, qkv,
            cos_table, sin_table, B * T, T, NH, NKV, HS);
}

inline void rope_qkv_backward(float* dqkv, const float* dout, const float* cos_table,
                              const float* sin_table, int B, int T, int NH, int NKV, int HS,
                              Stream s) {
  const long threads = static_cast<long>(B) * T * (NH + NKV) * (HS / 2);
  SG_LAUNCH(kernel::rope_qkv_backward, dim3(blocks_for(threads, 256)), dim3(256), 0, s, dqkv,
            dout, cos_table, sin_table, B * T, T, NH, NKV, HS);
}

}  // namespace sg::cuda
