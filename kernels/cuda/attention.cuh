#pragma once
// Causal multi-head attention without the T x T matrix (flash-attention style): the fallback of
// cuDNN's fused attention on GPUs, and its reference that runs on the CPU in the tests.
// qkv (B, T, 3C) holds q, k, v; head h uses channels [h*hs, (h+1)*hs) of each; scale 1/sqrt(hs).
//   forward:  out (B, T, C) and lse (B, NH, T), the log-sum-exp of each query's scores, saved
//             for the backward (it replaces the probabilities the CPU op keeps);
//   backward: dqkv (B, T, 3C) += from dout, recomputing the probabilities from q, k and lse.
// One thread per query (forward, dq) or per key (dk; dv), 32 per block, the other side's rows in
// shared-memory tiles. Each output is summed by one thread in increasing key (or query) order:
// no atomics, so the results do not depend on the scheduling. Head size at most 64 (GPT-2's).
//
// Each thread keeps whole rows (q, o; q, g, dq; k, v, dk; k, dv). The head sizes 16, 32 and 64
// have kernels of their own (HS > 0): their channel loops unroll, so ptxas keeps those rows in
// registers (at most 3 x 64 floats a thread, which is why dk and dv are two kernels: the four rows
// of one would be 256 floats, past the 255 registers). Any other head size runs the HS = 0
// kernels, which read it at run time and whose rows ptxas puts in local memory (stack frames of
// 512 to 768 bytes a thread). docs/gpu.md has the ptxas figures; scripts/check-spills checks them.
#include <type_traits>

#include "kernels/cuda/kernel_support.cuh"

namespace sg::cuda {

constexpr int kAttentionTile = 32;
constexpr int kMaxHeadSize = 64;

namespace kernel {

// The floats of a per-thread row (and of a tile's row) for the kernels of head size HS.
template <int HS>
constexpr int kRowFloats = HS > 0 ? HS : kMaxHeadSize;

// A tile's rows [first, first + kAttentionTile) of one head (hs channels from `at`, rows `stride`
// apart) into shared memory, zeros past T. The block's threads take consecutive channels of one
// row at a time: global reads coalesced, shared writes to consecutive banks. (Each thread taking
// a row of its own, as before, read 3C floats apart and wrote 64 floats apart: one bank, a
// 32-way conflict on every store.)
template <int HS>
__device__ __forceinline__ void load_rows(float (*tile)[kRowFloats<HS>], const float* at,
                                          long stride, int first, int T, int hs) {
  for (int r = 0; r < kAttentionTile; ++r) {
    const int row = first + r;
    for (int d = threadIdx.x; d < hs; d += blockDim.x) {
      tile[r][d] = row < T ? at[row * stride + d] : 0.0f;
    }
  }
}

template <int HS>
__device__ __forceinline__ int head_size(int C, int NH) {
  return HS > 0 ? HS : C / NH;
}

template <int HS>
__global__ void __launch_bounds__(kAttentionTile)
    attention_forward(float* out, float* lse, const float* qkv, int T, int C, int NH) {
  constexpr int R = kRowFloats<HS>;
  __shared__ float keys[kAttentionTile][R];
  __shared__ float values[kAttentionTile][R];
  const int hs = head_size<HS>(C, NH), h = blockIdx.y, b = blockIdx.z;
  const int qi = blockIdx.x * kAttentionTile + threadIdx.x;
  const long stride = 3L * C;
  const float* base = qkv + static_cast<long>(b) * T * stride;
  const float scale = rsqrtf(static_cast<float>(hs));
  float q[R], o[R];
  SG_UNROLL
  for (int d = 0; d < hs; ++d) {
    q[d] = qi < T ? base[qi * stride + h * hs + d] : 0.0f;
    o[d] = 0.0f;
  }
  float m = -INFINITY, l = 0.0f;
  for (int tile = 0; tile <= static_cast<int>(blockIdx.x); ++tile) {
    load_rows<HS>(keys, base + C + h * hs, stride, tile * kAttentionTile, T, hs);
    load_rows<HS>(values, base + 2 * C + h * hs, stride, tile * kAttentionTile, T, hs);
    __syncthreads();
    for (int j = 0; j < kAttentionTile && qi < T; ++j) {
      const int key = tile * kAttentionTile + j;
      if (key > qi) break;  // causal; keys ascend
      float s = 0.0f;
      SG_UNROLL
      for (int d = 0; d < hs; ++d) s += q[d] * keys[j][d];
      s *= scale;
      const float m_new = s > m ? s : m;
      const float correction = __expf(m - m_new), p = __expf(s - m_new);
      l = l * correction + p;
      SG_UNROLL
      for (int d = 0; d < hs; ++d) o[d] = o[d] * correction + p * values[j][d];
      m = m_new;
    }
    __syncthreads();  // the tiles are overwritten next
  }
  if (qi < T) {
    SG_UNROLL
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

// One thread per key: dk (kDk) or dv, over the queries at or after it, in order. The two kernels
// below share this walk over the query tiles; dk also needs the key's v and delta.
template <int HS, bool kDk>
__device__ __forceinline__ void attention_backward_kv(float* dqkv, const float* dout,
                                                      const float* qkv, const float* lse,
                                                      const float* delta, int T, int C, int NH) {
  constexpr int R = kRowFloats<HS>;
  __shared__ float queries[kAttentionTile][R];
  __shared__ float grads[kAttentionTile][R];
  __shared__ float tile_lse[kAttentionTile], tile_delta[kAttentionTile];
  const int hs = head_size<HS>(C, NH), h = blockIdx.y, b = blockIdx.z;
  const int kj = blockIdx.x * kAttentionTile + threadIdx.x;
  const long stride = 3L * C;
  const float* base = qkv + static_cast<long>(b) * T * stride;
  const float scale = rsqrtf(static_cast<float>(hs));
  // dv's kernel leaves v unused (no loads; the compiler drops it).
  float k[R], v[R], grad[R];
  SG_UNROLL
  for (int d = 0; d < hs; ++d) {
    k[d] = kj < T ? base[kj * stride + C + h * hs + d] : 0.0f;
    v[d] = kDk && kj < T ? base[kj * stride + 2 * C + h * hs + d] : 0.0f;
    grad[d] = 0.0f;
  }
  const int tiles = (T + kAttentionTile - 1) / kAttentionTile;
  for (int tile = blockIdx.x; tile < tiles; ++tile) {
    const int qr = tile * kAttentionTile + threadIdx.x;
    load_rows<HS>(queries, base + h * hs, stride, tile * kAttentionTile, T, hs);
    load_rows<HS>(grads, dout + static_cast<long>(b) * T * C + h * hs, C, tile * kAttentionTile,
                  T, hs);
    tile_lse[threadIdx.x] = qr < T ? lse[(static_cast<long>(b) * NH + h) * T + qr] : 0.0f;
    tile_delta[threadIdx.x] =
        kDk && qr < T ? delta[(static_cast<long>(b) * NH + h) * T + qr] : 0.0f;
    __syncthreads();
    for (int r = 0; r < kAttentionTile; ++r) {
      const int query = tile * kAttentionTile + r;
      if (kj >= T || query >= T || query < kj) continue;
      float s = 0.0f;
      SG_UNROLL
      for (int d = 0; d < hs; ++d) s += queries[r][d] * k[d];
      const float p = __expf(s * scale - tile_lse[r]);
      if constexpr (kDk) {
        float dp = 0.0f;
        SG_UNROLL
        for (int d = 0; d < hs; ++d) dp += grads[r][d] * v[d];
        const float ds = p * (dp - tile_delta[r]) * scale;
        const volatile float* query_row = queries[r];  // read again: as dq's key_row
        SG_UNROLL
        for (int d = 0; d < hs; ++d) grad[d] += ds * query_row[d];
      } else {
        SG_UNROLL
        for (int d = 0; d < hs; ++d) grad[d] += p * grads[r][d];
      }
    }
    __syncthreads();
  }
  if (kj < T) {
    float* row = dqkv + (static_cast<long>(b) * T + kj) * stride + (kDk ? C : 2 * C) + h * hs;
    SG_UNROLL
    for (int d = 0; d < hs; ++d) row[d] += grad[d];
  }
}

template <int HS>
__global__ void __launch_bounds__(kAttentionTile)
    attention_backward_k(float* dqkv, const float* dout, const float* qkv, const float* lse,
                         const float* delta, int T, int C, int NH) {
  attention_backward_kv<HS, true>(dqkv, dout, qkv, lse, delta, T, C, NH);
}

template <int HS>
__global__ void __launch_bounds__(kAttentionTile)
    attention_backward_v(float* dqkv, const float* dout, const float* qkv, const float* lse,
                         const float* delta, int T, int C, int NH) {
  attention_backward_kv<HS, false>(dqkv, dout, qkv, lse, delta, T, C, NH);
}

// One thread per query: dq, over the keys up to it, in order.
template <int HS>
__global__ void __launch_bounds__(kAttentionTile)
    attention_backward_q(float* dqkv, const float* dout, const float* qkv, const float* lse,
                         const float* delta, int T, int C, int NH) {
  constexpr int R = kRowFloats<HS>;
  __shared__ float keys[kAttentionTile][R];
  __shared__ float values[kAttentionTile][R];
  const int hs = head_size<HS>(C, NH), h = blockIdx.y, b = blockIdx.z;
  const int qi = blockIdx.x * kAttentionTile + threadIdx.x;
  const long stride = 3L * C;
  const float* base = qkv + static_cast<long>(b) * T * stride;
  const float scale = rsqrtf(static_cast<float>(hs));
  float q[R], g[R], dq[R];
  SG_UNROLL
  for (int d = 0; d < hs; ++d) {
    q[d] = qi < T ? base[qi * stride + h * hs + d] : 0.0f;
    g[d] = qi < T ? dout[(static_cast<long>(b) * T + qi) * C + h * hs + d] : 0.0f;
    dq[d] = 0.0f;
  }
  const float row_lse = qi < T ? lse[(static_cast<long>(b) * NH + h) * T + qi] : 0.0f;
  const float row_delta = qi < T ? delta[(static_cast<long>(b) * NH + h) * T + qi] : 0.0f;
  for (int tile = 0; tile <= static_cast<int>(blockIdx.x); ++tile) {
    load_rows<HS>(keys, base + C + h * hs, stride, tile * kAttentionTile, T, hs);
    load_rows<HS>(values, base + 2 * C + h * hs, stride, tile * kAttentionTile, T, hs);
    __syncthreads();
    for (int j = 0; j < kAttentionTile && qi < T; ++j) {
      const int key = tile * kAttentionTile + j;
      if (key > qi) break;
      float s = 0.0f, dp = 0.0f;
      SG_UNROLL
      for (int d = 0; d < hs; ++d) {
        s += q[d] * keys[j][d];
        dp += g[d] * values[j][d];
      }
      const float p = __expf(s * scale - row_lse);
      const float ds = p * (dp - row_delta) * scale;
      // Read again, not kept from the dot products above: ptxas would hold the 64 channels of
      // the key in registers for this loop, and with q, g and dq that spills at HS = 64.
      const volatile float* key_row = keys[j];
      SG_UNROLL
      for (int d = 0; d < hs; ++d) dq[d] += ds * key_row[d];
    }
    __syncthreads();
  }
  if (qi < T) {
    float* row = dqkv + (static_cast<long>(b) * T + qi) * stride;
    SG_UNROLL
    for (int d = 0; d < hs; ++d) row[h * hs + d] += dq[d];
  }
}

}  // namespace kernel

inline bool attention_supported(int C, int NH) {
  return NH > 0 && C % NH == 0 && C / NH <= kMaxHeadSize;
}

// Calls launch(std::integral_constant<int, HS>) with the kernels' head size for hs: its own
// for 16, 32 and 64, else 0 (read at run time).
template <class Launch>
void with_head_size(int hs, Launch&& launch) {
  switch (hs) {
    case 16: launch(std::integral_constant<int, 16>{}); break;
    case 32: launch(std::integral_constant<int, 32>{}); break;
    case 64: launch(std::integral_constant<int, 64>{}); break;
    default: launch(std::integral_constant<int, 0>{}); break;
  }
}

inline void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH,
                              Stream s) {
  const dim3 grid((T + kAttentionTile - 1) / kAttentionTile, NH, B);
  with_head_size(C / NH, [&](auto head) {
    constexpr int HS = decltype(head)::value;
    SG_LAUNCH(kernel::attention_forward<HS>, grid, dim3(kAttentionTile), 0, s, out, lse, qkv, T,
              C, NH);
  });
}

// delta: scratch of B * NH * T floats.
inline void attention_backward(float* dqkv, float* delta, const float* dout, const float* out,
                               const float* qkv, const float* lse, int B, int T, int C, int NH,
                               Stream s) {
  const long rows = static_cast<long>(B) * NH * T;
  SG_LAUNCH(kernel::attention_delta, dim3(blocks_for(rows, 256)), dim3(256), 0, s, delta, dout, out,
            B, T, C, NH);
  const dim3 grid((T + kAttentionTile - 1) / kAttentionTile, NH, B);
  with_head_size(C / NH, [&](auto head) {
    constexpr int HS = decltype(head)::value;
    SG_LAUNCH(kernel::attention_backward_k<HS>, grid, dim3(kAttentionTile), 0, s, dqkv, dout, qkv,
              lse, delta, T, C, NH);
    SG_LAUNCH(kernel::attention_backward_v<HS>, grid, dim3(kAttentionTile), 0, s, dqkv, dout, qkv,
              lse, delta, T, C, NH);
    SG_LAUNCH(kernel::attention_backward_q<HS>, grid, dim3(kAttentionTile), 0, s, dqkv, dout, qkv,
              lse, delta, T, C, NH);
  });
}

}  // namespace sg::cuda
