// Softmax + cross-entropy over a padded vocabulary on the CPU. See kernels/crossentropy.h.
//
// One row (50304 floats = 200 KB) fits in a core's L2, so the forward reads the logits from
// memory once (max), then makes two passes in L2 (exp + sum, then scale). The fused
// forward-backward writes the logits gradient in that last pass, saving the backward's trip
// through memory (2 x 206 MB at the benchmark shape). exp is the vectorised
// polynomial of fast_exp.h. Rows are independent: OpenMP over rows, static schedule.
#include "kernels/crossentropy.h"

#include <cmath>
#include <vector>

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/fast_exp.h"

namespace sg::cpu::inline SG_CPU_ISA {

namespace {

// The exponentials of one row of logits x (float or bf16) into e (which may be x when both are
// float), relative to the row's max. Returns the sum of all but one max term: the max term
// contributes exactly exp(0) = 1, and summing the others apart keeps the loss log(1 + rest)
// accurate (log1p) when the prediction is confident and rest is tiny.
template <class T>
inline float row_exponentials(float* e, const T* x, int V, float& max_logit) {
  max_logit = -INFINITY;
#pragma omp simd reduction(max : max_logit)
  for (int v = 0; v < V; ++v) {
    const float x_v = detail::load(x + v);
    max_logit = x_v > max_logit ? x_v : max_logit;
  }
  float rest = 0.0f;
  int ties = 0;  // logits equal to the max: all but one belong to rest
#pragma omp simd reduction(+ : rest, ties)
  for (int v = 0; v < V; ++v) {
    const float x_v = detail::load(x + v);  // read before e[v] overwrites it when in place
    const float e_v = detail::exp_vectorisable(x_v - max_logit);
    e[v] = e_v;
    const bool is_max = x_v == max_logit;
    rest += is_max ? 0.0f : e_v;
    ties += is_max ? 1 : 0;
  }
  return rest + static_cast<float>(ties - 1);
}

// One row: writes scale * softmax(x[0:V]) to p (which may be x), zeros the padding, and returns
// -log softmax(x)[target].
inline float softmax_row(float* p, const float* x, int target, float scale, int V, int Vp) {
  const float target_logit = x[target];  // read before p overwrites x when computing in place
  float max_logit;
  const float rest = row_exponentials(p, x, V, max_logit);
  const float factor = scale / (1.0f + rest);
#pragma omp simd
  for (int v = 0; v < V; ++v) p[v] *= factor;
  for (int v = V; v < Vp; ++v) p[v] = 0.0f;
  return std::log1p(rest) - (target_logit - max_logit);
}

// The same on bf16 logits into bf16 p (which may be x): the exponentials in the thread's fp32
// row `e`, then scale * e / sum rounded once, less `target_delta` at the target before the
// rounding (the fused gradient). The arithmetic is softmax_row's, so p is its output rounded
// and the loss its loss on the same values.
inline float softmax_row_bf16(uint16_t* p, const uint16_t* x, int target, float scale,
                              float target_delta, int V, int Vp, float* e) {
  const float target_logit = detail::from_bf16(x[target]);
  float max_logit;
  const float rest = row_exponentials(e, x, V, max_logit);
  const float factor = scale / (1.0f + rest);
  const float p_target = e[target] * factor - target_delta;
#pragma omp simd
  for (int v = 0; v < V; ++v) p[v] = detail::to_bf16(e[v] * factor);
  p[target] = detail::to_bf16(p_target);
  for (int v = V; v < Vp; ++v) p[v] = 0;
  return std::log1p(rest) - (target_logit - max_logit);
}

// A thread's fp32 row for softmax_row_bf16, kept between calls. An array of one, as attention's
// band_buffer: its destructor is then a local function of this file, where a lone vector's would
// be registered by address and emitted as a weak std:: symbol outside the variant's namespace
// (tests/portable/isa_symbols_test.sh, kernels/cpu/isa.h).
float* row_buffer(int Vp) {
  thread_local std::vector<float> rows[1];
  std::vector<float>& row = rows[0];
  if (row.size() < static_cast<size_t>(Vp)) row.resize(static_cast<size_t>(Vp));
  return row.data();
}

}  // namespace

void crossentropy_forward_bf16(float* losses, uint16_t* probs, const uint16_t* logits,
                               const int32_t* targets, int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const long row = static_cast<long>(n) * Vp;
    losses[n] = softmax_row_bf16(probs + row, logits + row, targets[n], 1.0f, 0.0f, V, Vp,
                                 row_buffer(Vp));
  }
}

void crossentropy_forward_backward_bf16(float* losses, uint16_t* dlogits, const uint16_t* logits,
                                        const int32_t* targets, float dloss, int N, int V,
                                        int Vp) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const long row = static_cast<long>(n) * Vp;
    losses[n] = softmax_row_bf16(dlogits + row, logits + row, targets[n], dloss, dloss, V, Vp,
                                 row_buffer(Vp));
  }
}

void crossentropy_backward_bf16(uint16_t* dlogits, const uint16_t* probs, const int32_t* targets,
                                float dloss, int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const uint16_t* p = probs + static_cast<long>(n) * Vp;
    uint16_t* d = dlogits + static_cast<long>(n) * Vp;
    const float p_target = detail::from_bf16(p[targets[n]]);
#pragma omp simd
    for (int v = 0; v < V; ++v) d[v] = detail::to_bf16(dloss * detail::from_bf16(p[v]));
    d[targets[n]] = detail::to_bf16(dloss * (p_target - 1.0f));
    for (int v = V; v < Vp; ++v) d[v] = 0;
  }
}

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
