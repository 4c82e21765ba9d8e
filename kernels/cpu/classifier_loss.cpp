// Label-smoothed softmax cross-entropy and top-k accuracy on the CPU. See
// kernels/classifier_loss.h for the contract.
#include "kernels/classifier_loss.h"

#include <cmath>

namespace sg::cpu::inline SG_CPU_ISA {

void classifier_loss_forward_backward(float* losses, float* dlogits, const float* logits,
                                      const int32_t* labels, float smoothing, float dloss, int N,
                                      int K) {
  const double off = static_cast<double>(smoothing) / K;  // target mass on every class
  const double on = 1.0 - smoothing + off;                // ... and on the label
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* x = logits + static_cast<long>(n) * K;
    double top = x[0];
    for (int k = 1; k < K; ++k) top = x[k] > top ? x[k] : top;
    double sum = 0, sum_logits = 0;
    for (int k = 0; k < K; ++k) {
      sum += std::exp(x[k] - top);
      sum_logits += x[k];
    }
    const double log_sum = std::log(sum) + top;  // log sum exp
    const int y = labels[n];
    // -sum_k target_k (x_k - lse) = lse - (1-s) x_y - (s/K) sum_k x_k
    losses[n] = static_cast<float>(log_sum - (on - off) * x[y] - off * sum_logits);
    if (dlogits != nullptr) {
      float* d = dlogits + static_cast<long>(n) * K;  // may alias x: x[k] is read before d[k]
      for (int k = 0; k < K; ++k) {
        const double p = std::exp(x[k] - log_sum);
        d[k] = static_cast<float>(dloss * (p - (k == y ? on : off)));
      }
    }
  }
}

void classifier_correct(int64_t* top1, int64_t* top5, const float* logits, const int32_t* labels,
                        int N, int K) {
  int64_t c1 = 0, c5 = 0;
#pragma omp parallel for schedule(static) reduction(+ : c1, c5)
  for (int n = 0; n < N; ++n) {
    const float* x = logits + static_cast<long>(n) * K;
    const int y = labels[n];
    // Rank of the label: classes strictly above it, plus equal ones before it (first wins).
    int above = 0;
    for (int k = 0; k < K; ++k) above += x[k] > x[y] || (x[k] == x[y] && k < y);
    c1 += above == 0;
    c5 += above < 5;
  }
  *top1 += c1;
  *top5 += c5;
}

}  // namespace sg::cpu::SG_CPU_ISA
