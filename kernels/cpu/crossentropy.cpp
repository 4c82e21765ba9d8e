// Softmax + cross-entropy over a padded vocabulary on the CPU. See kernels/crossentropy.h.
//
// One row (50304 floats = 200 KB) fits in a core's L2, so the forward reads the logits from
// memory once (max), then makes two passes in L2 (exp + sum, then scale). The fused
// forward-backward writes the logits gradient in that last pass, saving the backward's trip
// through memory (2 x 206 MB at the benchmark shape). exp is the vectorised
// polynomial of fast_exp.h. Rows are independent: OpenMP over rows, static schedule.
#include "kernels/crossentropy.h"

#include <cmath>

#include "kernels/cpu/fast_exp.h"

namespace sg::cpu::inline SG_CPU_ISA {

namespace {

// One row: writes scale * softmax(x[0:V]) to p (which may be x), zeros the padding, and returns
// -log softmax(x)[target].
inline float softmax_row(float* p, const float* x, int target, float scale, int V, int Vp) {
  float max_logit = -INFINITY;
#pragma omp simd reduction(max : max_logit)
  for (int v = 0; v < V; ++v) max_logit = x[v] > max_logit ? x[v] : max_logit;
  // Read before p overwrites x when computing in place.
  const float target_logit = x[target];
  // The max term contributes exactly exp(0) = 1; summing the others apart keeps the loss
  // log(1 + rest) accurate (log1p) when the prediction is confident and rest is tiny.
  float rest = 0.0f;
  int ties = 0;  // logits equal to the max: all but one belong to rest
#pragma omp simd reduction(+ : rest, ties)
  for (int v = 0; v < V; ++v) {
    const float x_v = x[v];  // read before p[v] overwrites it when in place
    const float e = detail::exp_vectorisable(x_v - max_logit);
    p[v] = e;
    const bool is_max = x_v == max_logit;
    rest += is_max ? 0.0f : e;
    ties += is_max ? 1 : 0;
  }
  rest += static_cast<float>(ties - 1);
  const float factor = scale / (1.0f + rest);
#pragma omp simd
  for (int v = 0; v < V; ++v) p[v] *= factor;
  for (int v = V; v < Vp; ++v) p[v] = 0.0f;
  return std::log1p(rest) - (target_logit - max_logit);
}

}  // namespace

void crossentropy_forward(float* losses, float* probs, const float* logits,
                          const int32_t* targets, int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const long row = static_cast<long>(n) * Vp;
    losses[n] = softmax_row(probs + row, logits + row, targets[n], 1.0f, V, Vp);
  }
}

void crossentropy_forward_backward(float* losses, float* dlogits, const float* logits,
                                   const int32_t* targets, float dloss, int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const long row = static_cast<long>(n) * Vp;
    losses[n] = softmax_row(dlogits + row, logits + row, targets[n], dloss, V, Vp);
    dlogits[row + targets[n]] -= dloss;
  }
}

void crossentropy_backward(float* dlogits, const float* probs, const int32_t* targets,
                           float dloss, int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* p = probs + static_cast<long>(n) * Vp;  // (Vp)
    float* d = dlogits + static_cast<long>(n) * Vp;      // (Vp), may be p itself
    const float p_target = p[targets[n]];  // read before d overwrites p when in place
#pragma omp simd
    for (int v = 0; v < V; ++v) d[v] = dloss * p[v];
    d[targets[n]] = dloss * (p_target - 1.0f);
    for (int v = V; v < Vp; ++v) d[v] = 0.0f;
  }
}

}  // namespace sg::cpu::SG_CPU_ISA
