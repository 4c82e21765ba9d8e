// Causal multi-head self-attention core on the CPU, blocked and fused: the T x T matrix of
// probabilities is never written. See kernels/attention.h for the contract.
//
// Per (batch, head), query rows go in bands of kBand. A band's scores against the keys it may
// see (causality: band i needs keys [0, end of band i), which skips ~3/8 of the work at T = 256
// and tends to 1/2 for long contexts) live in a per-thread (kBand, T) buffer that stays in
// cache: the forward turns them into probabilities, multiplies by V and keeps only each row's
// log-sum-exp; the backward recomputes the band's probabilities from the scores and the
// log-sum-exp, and from them and dP = dO V^T the band's dS, whose products give dQ for the band
// and the band's contributions to dK and dV. Memory per layer: B*NH*T floats instead of
// 2*B*NH*T*T (at GPT-2 small's T = 1024, B = 8: 0.4 MB instead of 800 MB).
//
// The products are sgemm calls on strided views of qkv (no copies). Threads: OpenMP over the
// B*NH (batch, head) pairs, each calling oneDNN's sgemm, which runs on the calling thread inside
// the loop; a head's dK and dV are written by the thread that owns the head, so the result does
// not depend on the thread count. oneDNN rather than OpenBLAS for these small products (64 rows,
// 64-256 wide): at the GPT bench's shape, ten alternated runs of `kernels_bench attention`,
// forward 1.65-2.30 against 1.89-2.75 ms, backward 3.16-4.90 against 3.50-4.86
// (docs/performance.md).
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/fast_exp.h"
#include "kernels/cpu/onednn_gemm.h"

namespace sg::cpu::inline SG_CPU_ISA {
namespace {

constexpr int kBand = 64;  // query rows per sgemm; multiple of the sgemm kernel's tile sizes

// Row i of a band, keys [0, keys): scores in, probabilities out (0 above the diagonal, which
// sgemm filled with unmasked scores). Returns the row's log-sum-exp of the scores [0, i].
inline float causal_softmax_row(float* row, int i, int keys) {
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
  std::fill(row + i + 1, row + keys, 0.0f);
  return max_score + std::log(sum);
}

// The same probabilities again, from the scores and the saved log-sum-exp.
inline void causal_probabilities_row(float* row, int i, int keys, float lse) {
#pragma omp simd
  for (int j = 0; j <= i; ++j) row[j] = detail::exp_vectorisable(row[j] - lse);
  std::fill(row + i + 1, row + keys, 0.0f);
}

// p (rows, keys), row stride T = scale * q[band] @ k[0:keys]^T: the forward's scores, and the
// backward's again (the same call on the same data: the same bits). Returns oneDNN's status.
inline int band_scores(float* p, const float* q_band, const float* k, int rows, int keys, int hs,
                       int ld, int T, float scale) {
  return onednn_sgemm('N', 'T', rows, keys, hs, scale, q_band, ld, k, ld, 0.0f, p, T);
}

// A thread's buffers, grown as asked and kept between calls: 0 and 1 the (kBand, T) bands, 2
// a head's fp32 copies under bf16 storage.
float* band_buffer(int which, size_t floats) {
  thread_local std::vector<float> buffers[3];
  std::vector<float>& b = buffers[which];
  if (b.size() < floats) b.resize(floats);
  return b.data();
}

// One head's forward: q, k, v (T,hs) with row stride ld, o (T,hs) with row stride ldo. Returns
// oneDNN's worst status.
int forward_head(float* o, int ldo, float* head_lse, const float* q, const float* k,
                 const float* v, int ld, int T, int hs, float scale) {
  float* p = band_buffer(0, static_cast<size_t>(kBand) * T);  // (rows, keys), stride T
  int failed = 0;
  for (int i0 = 0; i0 < T; i0 += kBand) {
    const int rows = std::min(kBand, T - i0);
    const int keys = i0 + rows;  // causal: this band sees keys [0, keys)
    int status = band_scores(p, q + static_cast<long>(i0) * ld, k, rows, keys, hs, ld, T, scale);
    for (int r = 0; r < rows; ++r) {
      head_lse[i0 + r] = causal_softmax_row(p + static_cast<long>(r) * T, i0 + r, keys);
    }
    // o[band] = p @ v[0:keys]
    status = std::max(status, onednn_sgemm('N', 'N', rows, hs, keys, 1.0f, p, T, v, ld, 0.0f,
                                           o + static_cast<long>(i0) * ldo, ldo));
    failed = std::max(failed, status);
  }
  return failed;
}

// One head's backward: dq, dk, dv (T,hs) with row stride ldd (+=), dO (T,hs) with row stride
// ldo, q, k, v with row stride ld.
int backward_head(float* dq, float* dk, float* dv, int ldd, const float* dO, int ldo,
                  const float* q, const float* k, const float* v, int ld, const float* head_lse,
                  int T, int hs, float scale) {
  float* p = band_buffer(0, static_cast<size_t>(kBand) * T);   // (rows, keys), stride T
  float* ds = band_buffer(1, static_cast<size_t>(kBand) * T);  // dP, then dS
  int failed = 0;
  for (int i0 = 0; i0 < T; i0 += kBand) {
    const int rows = std::min(kBand, T - i0);
    const int keys = i0 + rows;
    const float* q_band = q + static_cast<long>(i0) * ld;
    const float* dO_band = dO + static_cast<long>(i0) * ldo;
    // P again: the forward's scores, then exp(score - lse).
    int status = band_scores(p, q_band, k, rows, keys, hs, ld, T, scale);
    for (int r = 0; r < rows; ++r) {
      causal_probabilities_row(p + static_cast<long>(r) * T, i0 + r, keys, head_lse[i0 + r]);
    }
    // dP = dO[band] @ v[0:keys]^T
    status = std::max(status, onednn_sgemm('N', 'T', rows, keys, hs, 1.0f, dO_band, ldo, v, ld,
                                           0.0f, ds, T));
    // Softmax backward: dS = P * (dP - sum_j P dP); 0 above the diagonal (P is), written
    // because the products below read the whole (rows, keys) block.
    for (int r = 0; r < rows; ++r) {
      const int i = i0 + r;
      const float* p_r = p + static_cast<long>(r) * T;
      float* ds_r = ds + static_cast<long>(r) * T;
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int j = 0; j <= i; ++j) dot += p_r[j] * ds_r[j];
#pragma omp simd
      for (int j = 0; j <= i; ++j) ds_r[j] = p_r[j] * (ds_r[j] - dot);
      std::fill(ds_r + i + 1, ds_r + keys, 0.0f);
    }
    // dq[band] += scale * dS @ k[0:keys]
    status = std::max(status, onednn_sgemm('N', 'N', rows, hs, keys, scale, ds, T, k, ld, 1.0f,
                                           dq + static_cast<long>(i0) * ldd, ldd));
    // dk[0:keys] += scale * dS^T @ q[band];  dv[0:keys] += P^T @ dO[band]
    status = std::max(status, onednn_sgemm('T', 'N', keys, hs, rows, scale, ds, T, q_band, ld,
                                           1.0f, dk, ldd));
    status = std::max(status, onednn_sgemm('T', 'N', keys, hs, rows, 1.0f, p, T, dO_band, ldo,
                                           1.0f, dv, ldd));
    failed = std::max(failed, status);
  }
  return failed;
}

// rows (T) of `width` bf16 values with row stride ld, as dense fp32 (T, width).
void widen_rows(float* out, const uint16_t* in, int T, int width, long ld) {
  for (int t = 0; t < T; ++t) {
    const uint16_t* row = in + t * ld;
    float* o = out + static_cast<long>(t) * width;
#pragma omp simd
    for (int i = 0; i < width; ++i) o[i] = detail::from_bf16(row[i]);
  }
}

}  // namespace

namespace {

// Runs head(b, h) for every (batch, head) pair on the OpenMP threads, each pair on one thread,
// and throws oneDNN's worst status after the parallel region.
template <class Head>
void for_each_head(int B, int NH, const Head& head) {
  int failed = 0;
#pragma omp parallel for schedule(static) reduction(max : failed)
  for (int bh = 0; bh < B * NH; ++bh) failed = std::max(failed, head(bh / NH, bh % NH));
  if (failed != 0) throw_onednn_sgemm_error(failed);
}

float scale_of(int hs) { return 1.0f / std::sqrt(static_cast<float>(hs)); }

}  // namespace

void attention_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH, C3 = 3 * C;
  for_each_head(B, NH, [&](int b, int h) {
    const float* q = qkv + static_cast<long>(b) * T * C3 + h * hs;  // (T,hs), row stride 3C
    float* o = out + static_cast<long>(b) * T * C + h * hs;         // (T,hs), row stride C
    return forward_head(o, C, lse + (static_cast<long>(b) * NH + h) * T, q, q + C, q + 2 * C, C3,
                        T, hs, scale_of(hs));
  });
}

void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* lse, int B,
                        int T, int C, int NH) {
  const int hs = C / NH, C3 = 3 * C;
  for_each_head(B, NH, [&](int b, int h) {
    const long qkv_offset = static_cast<long>(b) * T * C3 + h * hs;
    const float* q = qkv + qkv_offset;                               // (T,hs), row stride 3C
    float* dq = dqkv + qkv_offset;                                   // (T,hs), row stride 3C
    const float* dO = dout + static_cast<long>(b) * T * C + h * hs;  // (T,hs), row stride C
    return backward_head(dq, dq + C, dq + 2 * C, C3, dO, C, q, q + C, q + 2 * C, C3,
                         lse + (static_cast<long>(b) * NH + h) * T, T, hs, scale_of(hs));
  });
}

// bf16 storage: each head's q, k, v (and dO) widened into dense fp32 copies in the thread's
// buffer, the same fp32 kernels on them, the output rounded to bf16; dqkv stays fp32 (+=).
void attention_forward_bf16(uint16_t* out, float* lse, const uint16_t* qkv, int B, int T, int C,
                            int NH) {
  const int hs = C / NH, C3 = 3 * C;
  const long Th = static_cast<long>(T) * hs;
  for_each_head(B, NH, [&](int b, int h) {
    const uint16_t* q = qkv + static_cast<long>(b) * T * C3 + h * hs;
    float* heads = band_buffer(2, static_cast<size_t>(4 * Th));  // q, k, v, o: (T,hs) each
    for (int part = 0; part < 3; ++part) widen_rows(heads + part * Th, q + part * C, T, hs, C3);
    float* o = heads + 3 * Th;
    const int status = forward_head(o, hs, lse + (static_cast<long>(b) * NH + h) * T, heads,
                                    heads + Th, heads + 2 * Th, hs, T, hs, scale_of(hs));
    uint16_t* o16 = out + static_cast<long>(b) * T * C + h * hs;
    for (int t = 0; t < T; ++t) {
#pragma omp simd
      for (int i = 0; i < hs; ++i) o16[static_cast<long>(t) * C + i] = detail::to_bf16(o[t * hs + i]);
    }
    return status;
  });
}

void attention_backward_bf16(float* dqkv, const uint16_t* dout, const uint16_t* qkv,
                             const float* lse, int B, int T, int C, int NH) {
  const int hs = C / NH, C3 = 3 * C;
  const long Th = static_cast<long>(T) * hs;
  for_each_head(B, NH, [&](int b, int h) {
    const long qkv_offset = static_cast<long>(b) * T * C3 + h * hs;
    float* heads = band_buffer(2, static_cast<size_t>(4 * Th));  // q, k, v, dO: (T,hs) each
    for (int part = 0; part < 3; ++part) {
      widen_rows(heads + part * Th, qkv + qkv_offset + part * C, T, hs, C3);
    }
    widen_rows(heads + 3 * Th, dout + static_cast<long>(b) * T * C + h * hs, T, hs, C);
    float* dq = dqkv + qkv_offset;
    return backward_head(dq, dq + C, dq + 2 * C, C3, heads + 3 * Th, hs, heads, heads + Th,
                         heads + 2 * Th, hs, lse + (static_cast<long>(b) * NH + h) * T, T, hs,
                         scale_of(hs));
  });
}

}  // namespace sg::cpu::SG_CPU_ISA
