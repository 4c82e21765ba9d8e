#include "model/lm_loss.h"

namespace sg {

void LmLoss::forward(float* losses, Act logits, float* stats, const int32_t* targets,
                     float fused_dloss) const {
  if (tp == nullptr) {
    if (fused_dloss != 0.0f) {
      backend->crossentropy_forward_backward(losses, logits, logits, targets, fused_dloss, N, V,
                                             Vl);
    } else {
      backend->crossentropy_forward(losses, logits, logits, targets, N, V, Vl);
    }
    return;
  }
  float *row_max = stats, *sum_exp = stats + N, *target_logit = stats + 2 * N;
  backend->crossentropy_vp_max(row_max, logits.f32(), N, Vl, v0, V);
  tp->all_reduce_max(row_max, static_cast<size_t>(N));
  backend->crossentropy_vp_sums(sum_exp, target_logit, logits.f32(), row_max, targets, N, Vl, v0,
                                V);
  tp->all_reduce_sum(sum_exp, 2 * static_cast<size_t>(N));  // sum_exp, target_logit adjacent
  backend->crossentropy_vp_losses(losses, row_max, sum_exp, target_logit, N);
  if (fused_dloss != 0.0f) {
    backend->crossentropy_vp_backward(logits.f32(), logits.f32(), row_max, sum_exp, targets,
                                      fused_dloss, N, Vl, v0, V);
  }
}

void LmLoss::backward(Act logits, const float* stats, const int32_t* targets, float dloss) const {
  if (tp == nullptr) {
    backend->crossentropy_backward(logits, logits, targets, dloss, N, V, Vl);
  } else {
    backend->crossentropy_vp_backward(logits.f32(), logits.f32(), stats, stats + N, targets, dloss,
                                      N, Vl, v0, V);
  }
}

float LmLoss::mean(const float* losses, std::vector<float>& host) const {
  host.resize(static_cast<size_t>(N));
  backend->copy_to_host(host.data(), losses, host.size() * sizeof(float));
  double sum = 0;  // fixed order: deterministic
  for (float l : host) sum += l;
  return static_cast<float>(sum / N);
}

}  // namespace sg
