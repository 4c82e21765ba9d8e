#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

namespace sg {

double learning_rate_at(const OptimSpec& optim, int step, int total_steps) {
  if (step < optim.warmup_steps) {
    return optim.lr * (step + 1) / optim.warmup_steps;
  }
  if (optim.decay == LrDecay::Constant) return optim.lr;
  if (optim.decay == LrDecay::Step) {  // counted from step 0: "x0.1 at epochs 30, 60, 80"
    return optim.lr * std::pow(optim.decay_gamma, step / std::max(1, optim.decay_every));
  }
  const int decay_steps = std::max(1, total_steps - 1 - optim.warmup_steps);
  const double progress =
      std::clamp(static_cast<double>(step - optim.warmup_steps) / decay_steps, 0.0, 1.0);
  double coefficient = 1.0 - progress;  // linear
  if (optim.decay == LrDecay::Cosine) coefficient = 0.5 * (1.0 + std::cos(M_PI * progress));
  return optim.min_lr + coefficient * (optim.lr - optim.min_lr);
}

}  // namespace sg
