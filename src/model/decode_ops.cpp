#include "model/decode_ops.h"

#include <algorithm>
#include <cmath>

#include <cblas.h>

namespace sg {

void decode_linear(Backend& backend, float* out, const float* inp, const float* weight,
                   const float* bias, int N, int C, int OC) {
  if (N > 1) {
    backend.matmul_forward(out, inp, weight, bias, N, C, OC);
    return;
  }
  if (bias != nullptr) std::copy_n(bias, OC, out);
  cblas_sgemv(CblasRowMajor, CblasNoTrans, OC, C, 1.0f, weight, C, inp, 1,
              bias != nullptr ? 1.0f : 0.0f, out, 1);
}

void attend_cached(float* out, const float* q, const float* K, const float* V, int keys, int C,
                   int NH, float* scores_all) {
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
#pragma omp parallel for schedule(static)
  for (int h = 0; h < NH; ++h) {
    const float* qh = q + h * hs;
    float* scores = scores_all + static_cast<size_t>(h) * keys;
    float max_score = -INFINITY;
    for (int t = 0; t < keys; ++t) {
      const float* kt = K + static_cast<size_t>(t) * C + h * hs;
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (int i = 0; i < hs; ++i) dot += qh[i] * kt[i];
      scores[t] = dot * scale;
      max_score = std::max(max_score, scores[t]);
    }
    float sum = 0.0f;
    for (int t = 0; t < keys; ++t) sum += scores[t] = std::exp(scores[t] - max_score);
    float* oh = out + h * hs;
    std::fill(oh, oh + hs, 0.0f);
    for (int t = 0; t < keys; ++t) {
      const float p = scores[t] / sum;
      const float* vt = V + static_cast<size_t>(t) * C + h * hs;
#pragma omp simd
      for (int i = 0; i < hs; ++i) oh[i] += p * vt[i];
    }
  }
}

void decode_attention(Backend& backend, float* out, float* att, const float* qkv, float* K,
                      float* V, int start, int P, int C, int NH) {
  for (int p = 0; p < P; ++p) {
    const float* row = qkv + static_cast<size_t>(p) * 3 * C;  // q, k, v
    std::copy_n(row + C, C, K + static_cast<size_t>(start + p) * C);
    std::copy_n(row + 2 * C, C, V + static_cast<size_t>(start + p) * C);
  }
  if (start == 0) {
    backend.attention_forward(out, att, qkv, 1, P, C, NH);
  } else {
    attend_cached(out, qkv, K, V, start + 1, C, NH, att);
  }
}

}  // namespace sg
