#pragma once
// Causal multi-head attention without the T x T matrix (flash-attention style): the fallback of
// cuDNN's fused attention on GPUs, and its reference that runs on the CPU in the tests.
// qkv (B, T, 3C) holds q, k, v; head h uses channels [h*hs, (h+1)*hs) of each; scale 1/sqrt(hs).
//   forward:  out (B, T, C) and lse (B, NH, T), the log-sum-exp of each query's scores, saved
//             for the backward (it replaces the probabilities the CPU op keeps);
//   backward: dqkv (B, T, 3C) += from dout, recomputing the probabilities from q, k and lse.
// One thread per query (forward, dq) or per key (dk, dv), 32 per block, the other side's rows in
// shared-memory tiles. Each output is summed by one thread in increasing key (or query) order:
// no atomics, so the results do not depend on the scheduling. Head size at most 64 (GPT-2's).
#include "kernels/cuda/kernel_support.cuh"

namespace sg::cuda {

constexpr int kAttentionTile = 32;
constexpr int kMaxHeadSize = 64;

namespace kernel {

// A tile's rows [first, first + kAttentionTile) of one head (hs channels from `at`, rows `stride`
// apart) into shared memory, zeros past T. The block's threads take consecutive channels of one
// row at a time: global reads coalesced, shared writes to consecutive banks. (Each thread taking
// a row of its own, as before, read 3C floats apart and wrote 64 floats apart: one bank, a
// 32-way conflict on every store.)
__device__ __forceinline__ void load_rows(float (*tile)[kMaxHeadSize], const float* at,
                                          long stride, int first, int T, int hs) {
  for (int r = 0; r < kAttentionTile; ++r) {
    const int row = first + r;
    for (int d = threadIdx.x; d < hs; d += blockDim.x) {
      tile[r][d] = row < T ? at[row * stride + d] : 0.0f;
    }
  }
}

__global__ void attention_forward(float* out, float* lse, const float* qkv, int T, int C, int NH) {
  __shared__ float keys[kAttentionTile][kMaxHeadSize];
  __shared__ float values[kAttentionTile][kMaxHeadSize];
  const int hs = C / NH, h = blockIdx.y, b = blockIdx.z;
  const int qi = blockIdx.x * kAttentionTile + threadIdx.x;
  const long stride = 3L * C;
  const float* base = qkv + static_cast<long>(b) * T * stride;
  const float scale = rsqrtf(static_cast<float>(hs));
  float q[kMaxHeadSize], o[kMaxHeadSize];
  for (int d = 0; d < hs; ++d) {
    q[d] = qi < T ? base[qi * stride + h * hs + d] : 0.0f;
    o[d] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int tile = 0; tile <= static_cast<int>(blockIdx.x); ++tile) {
    load_rows(keys, base + C + h * hs, stride, tile * kAttentionTile, T, hs);
    load_rows(values, base + 2 * C + h * hs, stride, tile * kAttentionTile, T, hs);
    __syncthreads();
    for (int j = 0; j < kAttentionTile && qi < T; ++j) {
      const int key = tile * kAttentionTile + j;
      if (key > qi) break;  // causal; keys ascend
      float s = 0.0f;
      for (int d = 0; d < hs; ++d) s += q[d] * keys[j][d];
      s *= scale;
      const float m_new = s > m ? s : m;
      const float correction = __expf(m - m_new), p = __expf(s - m_new);
      l = l * correction + p;
      for (int d = 0; d < hs; ++d) o[d] = o[d] * correction + p * values[j][d];
      m = m_new;
    }
    __syncthreads();  // the tiles are overwritten next
  }
  if (qi < T) {
    for (int d = 0; d < hs; ++d) out[(static_cast<long>(b) * T + qi) * C + h * hs + d] = o[d] / l;
    lse[(static_cast<long>(b) * NH + h) * T + qi] = m + __logf(l);
  }
}

// delta[b, h, t] = sum_d dout * out over the head's channels.
__global__ void attention_delta(float* delta, const float* dout, const float* out, int B, int T,
                                int C, int NH) {
  const long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
  if (i >= static_cast<long>(B) * NH * T) return;
  const int hs = C / NH;
  const long t = i % T, h = (i / T) % NH, b = i / (static_cast<long>(T) * NH);
  const long at = (b * T + t) * C + h * hs;
  float s = 0.0f;
  for (int d = 0; d < hs; ++d) s += dout[at + d] * out[at + d];
  delta[i] = s;
}

// One thread per key: dk and dv, over the queries at or after it, in order.
__global__ void attention_backward_kv(float* dqkv, const float* dout, const float* qkv,
                                      const float* lse, const float* delta, int T, int C, int NH) {
  __shared__ float queries[kAttentionTile][kMaxHeadSize];
  __shared__ float grads[kAttentionTile][kMaxHeadSize];
  __shared__ float tile_lse[kAttentionTile], tile_delta[kAttentionTile];
  const int hs = C / NH, h = blockIdx.y, b = blockIdx.z;
  const int kj = blockIdx.x * kAttentionTile + threadIdx.x;
  const long stride = 3L * C;
  const float* base = qkv + static_cast<long>(b) * T * stride;
  const float scale = rsqrtf(static_cast<float>(hs));
  float k[kMaxHeadSize], v[kMaxHeadSize], dk[kMaxHeadSize], dv[kMaxHeadSize];
  for (int d = 0; d < hs; ++d) {
    k[d] = kj < T ? base[kj * stride + C + h * hs + d] : 0.0f;
    v[d] = kj < T ? base[kj * stride + 2 * C + h * hs + d] : 0.0f;
    dk[d] = dv[d] = 0.0f;
  }
  const int tiles = (T + kAttentionTile - 1) / kAttentionTile;
  for (int tile = blockIdx.x; tile < tiles; ++tile) {
    const int qr = tile * kAttentionTile + threadIdx.x;
    load_rows(queries, base + h * hs, stride, tile * kAttentionTile, T, hs);
    load_rows(grads, dout + static_cast<long>(b) * T * C + h * hs, C, tile * kAttentionTile, T, hs);
    tile_lse[threadIdx.x] = qr < T ? lse[(static_cast<long>(b) * NH + h) * T + qr] : 0.0f;
    tile_delta[threadIdx.x] = qr < T ? delta[(static_cast<long>(b) * NH + h) * T + qr] : 0.0f;
    __syncthreads();
    for (int r = 0; r < kAttentionTile; ++r) {
      const int query = tile * kAttentionTile + r;
      if (kj >= T || query >= T || query < kj) continue;
      float s = 0.0f, dp = 0.0f;
      for (int d = 0; d < hs; ++d) {
        s += queries[r][d] * k[d];
        dp += grads[r][d] * v[d];
      }
      const float p = __expf(s * scale - tile_lse[r]);
      const float ds = p * (dp - tile_delta[r]) * scale;
      for (int d = 0; d < hs; ++d) {
        dv[d] += p * grads[r][d];
        dk[d] += ds * queries[r][d];
      }
    }
    __syncthreads();
  }
  if (kj < T) {
    float* row = dqkv + (static_cast<long>(b) * T + kj) * stride;
    for (int d = 0; d < hs; ++d) {
      row[C + h * hs + d] += dk[d];
      row[2 * C + h * hs + d] += dv[d];
    }
  }
}

// One thread per query: dq, over the keys up to it, in order.
__global__ void attention_backward_q(float* dqkv, const float* dout, const float* qkv,
                                     const float* lse, const float* delta, int T, int C, int NH) {
  __shared__ float keys[kAttentionTile][kMaxHeadSize];
  __shared__ float values[kAttentionTile][kMaxHeadSize];
  const int hs = C / NH, h = blockIdx.y, b = blockIdx.z;
  const int qi = blockIdx.x * kAttentionTile + threadIdx.x;
  const long stride = 3L * C;
  const float* base = qkv + static_cast<long>(b) * T * stride;
  const float scale = rsqrtf(static_cast<float>(hs));
  float q[kMaxHeadSize], g[kMaxHeadSize], dq[kMaxHeadSize];
  for (int d = 0; d < hs; ++d) {
    q[d] = qi < T ? base[qi * stride + h * hs + d] : 0.0f;
    g[d] = qi < T ? dout[(static_cast<long>(b) * T + qi) * C + h * hs + d] : 0.0f;
    dq[d] = 0.0f;
  }
  const float row_lse = qi < T ? lse[(static_cast<long>(b) * NH + h) * T + qi] : 0.0f;
  const float row_delta = qi < T ? delta[(static_cast<long>(b) * NH + h) * T + qi] : 0.0f;
  for (int tile = 0; tile <= static_cast<int>(blockIdx.x); ++tile) {
    load_rows(keys, base + C + h * hs, stride, tile * kAttentionTile, T, hs);
    load_rows(values, base + 2 * C + h * hs, stride, tile * kAttentionTile, T, hs);
    __syncthreads();
    for (int j = 0; j < kAttentionTile && qi < T; ++j) {
      const int key = tile * kAttentionTile + j;
      if (key > qi) break;
      float s = 0.0f, dp = 0.0f;
      for (int d = 0; d < hs; ++d) {
        s += q[d] * keys[j][d];
        dp += g[d] * values[j][d];
      }
      const float p = __expf(s * scale - row_lse);
      const float ds = p * (dp - row_delta) * scale;
      for (int d = 0; d < hs; ++d) dq[d] += ds * keys[j][d];
    }
    __syncthreads();
  }
  if (qi < T) {
    float* row = dqkv + (static_cast<long>(b) * T + qi) * stride;
    for (int d = 0; d < hs; ++d) row[h * hs + d] += dq[d];
  }
}

}  // namespace kernel

inline bool attention_supported(int C, int NH) { return C % NH == 0 && C / NH <= kMaxHeadSize; }

inline void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH,
                              Stream s) {
  const dim3 grid((T + kAttentionTile - 1) / kAttentionTile, NH, B);
  SG_LAUNCH(kernel::attention_forward, grid, dim3(kAttentionTile), 0, s, out, lse, qkv, T, C, NH);
}

// delta: scratch of B * NH * T floats.
inline void attention_backward(float* dqkv, float* delta, const float* dout, const float* out,
                               const float* qkv, const float* lse, int B, int T, int C, int NH,
                               Stream s) {
  const long rows = static_cast<long>(B) * NH * T;
  SG_LAUNCH(kernel::attention_delta, dim3(blocks_for(rows, 256)), dim3(256), 0, s, delta, dout, out,
            B, T, C, NH);
  const dim3 grid((T + kAttentionTile - 1) / kAttentionTile, NH, B);
  SG_LAUNCH(kernel::attention_backward_kv, grid, dim3(kAttentionTile), 0, s, dqkv, dout, qkv, lse,
            delta, T, C, NH);
  SG_LAUNCH(kernel::attention_backward_q, grid, dim3(kAttentionTile), 0, s, dqkv, dout, qkv, lse,
            delta, T, C, NH);
}

}  // namespace sg::cuda
