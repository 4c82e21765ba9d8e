#pragma once
// Token and position embeddings (contract: kernels/encoder.h), and their backward without
// atomics: wpe's gradient one thread per (t, c) summing over b in order; wte's gradient one block
// per distinct token of the batch, summing that token's positions in (b, t) order. The host
// lists the distinct tokens and their positions (bucket_tokens: the ids come from the host batch
// anyway), so every element of dwte is summed in the same order whatever the launch.
#include <algorithm>
#include <vector>

#include "kernels/cuda/kernel_support.cuh"

namespace sg::cuda {

// The tokens of a batch in [v0, v0 + Vl), bucketed: token k of `tokens` (a row of the local
// table) occurs at positions[offsets[k] .. offsets[k + 1]), in increasing (b, t) order.
struct TokenBuckets {
  std::vector<int32_t> tokens, offsets, positions;
};

inline TokenBuckets bucket_tokens(const int32_t* inp, int N, int v0, int Vl) {
  std::vector<std::pair<int32_t, int32_t>> pairs;  // (local row, position)
  for (int n = 0; n < N; ++n) {
    const long row = static_cast<long>(inp[n]) - v0;
    if (row >= 0 && row < Vl) pairs.emplace_back(static_cast<int32_t>(row), n);
  }
  std::sort(pairs.begin(), pairs.end());  // by row, then position
  TokenBuckets b;
  for (size_t i = 0; i < pairs.size(); ++i) {
    if (i == 0 || pairs[i].first != pairs[i - 1].first) {
      b.tokens.push_back(pairs[i].first);
      b.offsets.push_back(static_cast<int32_t>(i));
    }
    b.positions.push_back(pairs[i].second);
  }
  b.offsets.push_back(static_cast<int32_t>(pairs.size()));
  return b;
}

namespace kernel {

__global__ void encoder_forward(float* out, const int32_t* inp, const float* wte,
                                const float* wpe, int B, int T, int C) {
  const long n_all = static_cast<long>(B) * T * C;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n_all;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const long bt = i / C, c = i % C, t = bt % T;
    out[i] = wte[static_cast<long>(inp[bt]) * C + c] + wpe[t * C + c];
  }
}

__global__ void embedding_vocab_range(float* out, const int32_t* inp, const float* wte_local,
                                      int N, int C, int v0, int Vl) {
  const long n_all = static_cast<long>(N) * C;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n_all;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const long n = i / C, c = i % C, row = static_cast<long>(inp[n]) - v0;
    out[i] = row >= 0 && row < Vl ? wte_local[row * C + c] : 0.0f;
  }
}

__global__ void position_add(float* out, const float* wpe, int B, int T, int C) {
  const long n_all = static_cast<long>(B) * T * C;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n_all;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    out[i] += wpe[(i / C) % T * C + i % C];
  }
}

__global__ void position_backward(float* dwpe, const float* dout, int B, int T, int C) {
  const long tc = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x;
  if (tc >= static_cast<long>(T) * C) return;
  float sum = 0.0f;
  for (int b = 0; b < B; ++b) sum += dout[static_cast<long>(b) * T * C + tc];
  dwpe[tc] += sum;
}

// Block k: distinct token k; threads over the channels.
__global__ void token_backward(float* dwte_local, const float* dout, const int32_t* tokens,
                               const int32_t* offsets, const int32_t* positions, int C) {
  const int k = blockIdx.x;
  const int row = tokens[k], first = offsets[k], last = offsets[k + 1];
  for (int c = threadIdx.x; c < C; c += blockDim.x) {
    float sum = 0.0f;
    for (int p = first; p < last; ++p) sum += dout[static_cast<long>(positions[p]) * C + c];
    dwte_local[static_cast<long>(row) * C + c] += sum;
  }
}

}  // namespace kernel

inline void encoder_forward(float* out, const int32_t* inp, const float* wte, const float* wpe,
                            int B, int T, int C, Stream s) {
  SG_LAUNCH(kernel::encoder_forward, dim3(grid_stride_blocks(static_cast<long>(B) * T * C)), dim3(256), 0, s,
            out, inp, wte, wpe, B, T, C);
}
inline void embedding_forward_vocab_range(float* out, const int32_t* inp, const float* wte_local,
                                          int N, int C, int v0, int Vl, Stream s) {
  SG_LAUNCH(kernel::embedding_vocab_range, dim3(grid_stride_blocks(static_cast<long>(N) * C)), dim3(256), 0,
            s, out, inp, wte_local, N, C, v0, Vl);
}
inline void position_add(float* out, const float* wpe, int B, int T, int C, Stream s) {
  SG_LAUNCH(kernel::position_add, dim3(grid_stride_blocks(static_cast<long>(B) * T * C)), dim3(256), 0, s,
            out, wpe, B, T, C);
}
// dwte_local (+=) from the buckets (device copies of bucket_tokens' arrays, `distinct` tokens);
// dwpe (+=) when not null.
inline void encoder_backward(float* dwte_local, float* dwpe, const float* dout,
                             const int32_t* tokens, const int32_t* offsets,
                             const int32_t* positions, int distinct, int B, int T, int C,
                             Stream s) {
  if (distinct > 0) {
    SG_LAUNCH(kernel::token_backward, dim3(distinct), dim3(128), 0, s, dwte_local, dout, tokens,
              offsets, positions, C);
  }
  if (dwpe != nullptr) {
    SG_LAUNCH(kernel::position_backward, dim3(blocks_for(static_cast<long>(T) * C, 256)), dim3(256),
              0, s, dwpe, dout, B, T, C);
  }
}

}  // namespace sg::cuda
