#pragma once
// Dynamic loss scaling for train.precision fp16 (as PyTorch's GradScaler and Megatron): the
// loss gradient is multiplied by the scale, so gradients too small for fp16's range survive the
// fp16 products; the optimizer divides them back. A step whose gradients overflowed (a
// non-finite global norm) is skipped and the scale halved; after kGrowthInterval clean steps in
// a row it doubles. Scales are powers of two, so scaling and unscaling are exact: a run that
// never overflows computes what fp32 scaling by one would. The scale and the clean-step count
// are trainer state, saved in checkpoints.
#include <cstdint>

#include "train/train_checkpoint.h"

namespace sg {

constexpr int64_t kLossScaleGrowthInterval = 1000;
constexpr float kDefaultLossScale = 65536.0f;
constexpr float kMinLossScale = 1.0f;

// After a step: `applied` says whether its gradients were finite (and the update happened).
// Returns true when the scale changed.
inline bool update_loss_scale(TrainerState& state, bool applied) {
  if (!applied) {
    state.loss_scale_clean_steps = 0;
    if (state.loss_scale > kMinLossScale) {
      state.loss_scale *= 0.5f;
      return true;
    }
    return false;
  }
  if (++state.loss_scale_clean_steps >= kLossScaleGrowthInterval) {
    state.loss_scale_clean_steps = 0;
    state.loss_scale *= 2.0f;
    return true;
  }
  return false;
}

}  // namespace sg
