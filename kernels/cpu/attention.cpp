// Causal multi-head self-attention core on the CPU. See kernels/attention.h for the contract.
//
// Per (batch, head), the four products (Q K^T, P V, and in backward dO V^T, dS K, dS^T Q, P^T dO)
// are sgemm calls on strided views of qkv: no copies. Causality is exploited by blocking the
// T x T score matrix into bands of kBand query rows: band i only needs keys [0, end of band i),
// which skips ~3/8 of the work at T = 256 and tends to 1/2 for long contexts.
//
// Threads: OpenMP over the B*NH (batch, head) pairs, each calling a single-threaded sgemm (see
// blas_threads.h for how both OpenBLAS builds are kept single-threaded inside the loop).
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>

#include <cblas.h>

#include "kernels/cpu/blas_threads.h"
#include "kernels/cpu/fast_exp.h"

namespace sg::cpu::inline SG_CPU_ISA {
namespace {

constexpr int kBand = 64;  // query rows per sgemm; multiple of the sgemm kernel's tile sizes

// In place causal softmax of row i of the scores: entries [0, i] become probabilities, entries
// (i, T) become 0 (those above the diagonal inside the band hold unmasked scores from sgemm).
inline void causal_softmax_row(float* row, int i, int T) {
  float max_score = -INFINITY;
#pragma omp simd reduction(max : max_score)
  for (int j = 0; j <= i; ++j) max_score = row[j] > max_score ? row[j] : max_score;
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j <= i; ++j) {
    const float e = detail::exp_vectorisable(row[j] - max_score);
    row[j] = e;
    sum += e;
  }
  const float inv_sum = 1.0f / sum;
#pragma omp simd
  for (int j = 0; j <= i; ++j) row[j] *= inv_sum;
  std::fill(row + i + 1, row + T, 0.0f);
}

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const int C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const detail::SerialBlasScope serial_blas;
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < B * NH; ++bh) {
    const int b = bh / NH;
    const int h = bh % NH;
    const float* q = qkv + static_cast<long>(b) * T * C3 + h * hs;  // (T,hs), row stride 3C
    const float* k = q + C;                                         // (T,hs), row stride 3C
    const float* v = q + 2 * C;                                     // (T,hs), row stride 3C
    float* p = att + static_cast<long>(bh) * T * T;                 // (T,T)
    float* o = out + static_cast<long>(b) * T * C + h * hs;         // (T,hs), row stride C
    for (int i0 = 0; i0 < T; i0 += kBand) {
      const int rows = std::min(kBand, T - i0);
      const int keys = i0 + rows;  // causal: this band sees keys [0, keys)
      // p[i0:i0+rows, 0:keys] = scale * q[band] @ k[0:keys]^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, hs, scale,
                  q + static_cast<long>(i0) * C3, C3, k, C3, 0.0f, p + static_cast<long>(i0) * T,
                  T);
      for (int i = i0; i < i0 + rows; ++i) causal_softmax_row(p + static_cast<long>(i) * T, i, T);
      // o[band] = p[band, 0:keys] @ v[0:keys]
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hs, keys, 1.0f,
                  p + static_cast<long>(i0) * T, T, v, C3, 0.0f, o + static_cast<long>(i0) * C, C);
    }
  }
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const int C3 = 3 * C;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const detail::SerialBlasScope serial_blas;
#pragma omp parallel for schedule(static)
  for (int bh = 0; bh < B * NH; ++bh) {
    const int b = bh / NH;
    const int h = bh % NH;
    const long qkv_offset = static_cast<long>(b) * T * C3 + h * hs;
    const float* q = qkv + qkv_offset;                               // (T,hs), row stride 3C
    const float* k = q + C;                                          // (T,hs), row stride 3C
    const float* v = q + 2 * C;                                      // (T,hs), row stride 3C
    float* dq = dqkv + qkv_offset;                                   // (T,hs), row stride 3C
    float* dk = dq + C;                                              // (T,hs), row stride 3C
    float* dv = dq + 2 * C;                                          // (T,hs), row stride 3C
    const float* p = att + static_cast<long>(bh) * T * T;            // (T,T)
    float* ds = scratch + static_cast<long>(bh) * T * T;             // (T,T) dP, then dS
    const float* dO = dout + static_cast<long>(b) * T * C + h * hs;  // (T,hs), row stride C

    // Bands of query rows: dP, the softmax backward, and dQ.
    for (int i0 = 0; i0 < T; i0 += kBand) {
      const int rows = std::min(kBand, T - i0);
      const int keys = i0 + rows;
      // ds[band, 0:keys] = dO[band] @ v[0:keys]^T   (dP)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, keys, hs, 1.0f,
                  dO + static_cast<long>(i0) * C, C, v, C3, 0.0f, ds + static_cast<long>(i0) * T,
                  T);
      // Softmax backward: dS = P * (dP - sum_j P dP). P is 0 above the diagonal, so dS is too;
      // those entries are written anyway because the dK product below reads them.
      for (int i = i0; i < i0 + rows; ++i) {
        const float* p_i = p + static_cast<long>(i) * T;  // (T)
        float* ds_i = ds + static_cast<long>(i) * T;      // (T)
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (int j = 0; j <= i; ++j) dot += p_i[j] * ds_i[j];
#pragma omp simd
        for (int j = 0; j <= i; ++j) ds_i[j] = p_i[j] * (ds_i[j] - dot);
        std::fill(ds_i + i + 1, ds_i + keys, 0.0f);
      }
      // dq[band] += scale * dS[band, 0:keys] @ k[0:keys]
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, hs, keys, scale,
                  ds + static_cast<long>(i0) * T, T, k, C3, 1.0f, dq + static_cast<long>(i0) * C3,
                  C3);
    }
    // Bands of key rows: key j receives from queries [j0, T) only.
    for (int j0 = 0; j0 < T; j0 += kBand) {
      const int cols = std::min(kBand, T - j0);
      const int queries = T - j0;
      const long corner = static_cast<long>(j0) * T + j0;  // element (j0, j0) of a (T,T)
      // dv[band] += P[j0:T, band]^T @ dO[j0:T]
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, hs, queries, 1.0f, p + corner, T,
                  dO + static_cast<long>(j0) * C, C, 1.0f, dv + static_cast<long>(j0) * C3, C3);
      // dk[band] += scale * dS[j0:T, band]^T @ q[j0:T]
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, cols, hs, queries, scale, ds + corner,
                  T, q + static_cast<long>(j0) * C3, C3, 1.0f, dk + static_cast<long>(j0) * C3,
                  C3);
    }
  }
}

}  // namespace sg::cpu::SG_CPU_ISA
