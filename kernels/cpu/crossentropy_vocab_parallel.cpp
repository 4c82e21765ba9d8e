// Vocabulary-parallel softmax + cross-entropy on the CPU. See kernels/crossentropy.h ("vp").
//
// Each rank holds columns [v0, v0+Vl) of the padded vocabulary; of those, the first
// real_columns() are real (global index < V) and the rest padding. The four calls are the
// per-rank passes between the caller's all-reduces: max, then sum of exp and the target logit,
// then the loss, and the gradient from the global max and sum. exp is the vectorised
// polynomial of fast_exp.h, as in crossentropy.cpp. Rows are independent: OpenMP over rows,
// static schedule; within a row the order is fixed, so no result depends on the thread count.
#include <algorithm>
#include <cmath>

#include "kernels/crossentropy.h"
#include "kernels/cpu/fast_exp.h"

namespace sg::cpu::inline SG_CPU_ISA {

namespace {

// Number of local columns with a global index below V (0 when the rank holds only padding).
inline int real_columns(int Vl, int v0, int V) {
  return static_cast<int>(std::clamp(static_cast<long>(V) - v0, 0L, static_cast<long>(Vl)));
}

// Local column of the target, or -1 when another rank holds it.
inline int local_target(int32_t target, int Vr, int v0) {
  const long j = static_cast<long>(target) - v0;
  return j >= 0 && j < Vr ? static_cast<int>(j) : -1;
}

}  // namespace

void crossentropy_vp_max(float* row_max, const float* logits, int N, int Vl, int v0, int V) {
  const int Vr = real_columns(Vl, v0, V);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* x = logits + static_cast<long>(n) * Vl;  // (Vl)
    float m = -INFINITY;
#pragma omp simd reduction(max : m)
    for (int v = 0; v < Vr; ++v) m = x[v] > m ? x[v] : m;
    row_max[n] = m;
  }
}

void crossentropy_vp_sums(float* sum_exp, float* target_logit, const float* logits,
                          const float* row_max, const int32_t* targets, int N, int Vl, int v0,
                          int V) {
  const int Vr = real_columns(Vl, v0, V);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* x = logits + static_cast<long>(n) * Vl;  // (Vl)
    const float m = row_max[n];
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int v = 0; v < Vr; ++v) sum += detail::exp_vectorisable(x[v] - m);
    sum_exp[n] = sum;
    const int j = local_target(targets[n], Vr, v0);
    target_logit[n] = j >= 0 ? x[j] : 0.0f;
  }
}

void crossentropy_vp_losses(float* losses, const float* row_max, const float* sum_exp,
                            const float* target_logit, int N) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) losses[n] = std::log(sum_exp[n]) - (target_logit[n] - row_max[n]);
}

void crossentropy_vp_backward(float* dlogits, const float* logits, const float* row_max,
                              const float* sum_exp, const int32_t* targets, float dloss, int N,
                              int Vl, int v0, int V) {
  const int Vr = real_columns(Vl, v0, V);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* x = logits + static_cast<long>(n) * Vl;  // (Vl)
    float* d = dlogits + static_cast<long>(n) * Vl;       // (Vl), may be x itself
    const float m = row_max[n];
    const float factor = dloss / sum_exp[n];
    // d[v] depends on x[v] alone, so computing in place is safe.
#pragma omp simd
    for (int v = 0; v < Vr; ++v) d[v] = detail::exp_vectorisable(x[v] - m) * factor;
    for (int v = Vr; v < Vl; ++v) d[v] = 0.0f;
    const int j = local_target(targets[n], Vr, v0);
    if (j >= 0) d[j] -= dloss;
  }
}

}  // namespace sg::cpu::SG_CPU_ISA
