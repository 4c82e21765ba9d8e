#pragma once
// AdamW over a flat parameter buffer: moments m and v share the parameters' layout, weight
// decay only on tensors the layout marks (2-D weights). Global-norm clipping happens first.
#include <vector>

#include "config/job_spec.h"
#include "model/parameter_layout.h"

namespace sg {

class AdamWOptimizer {
 public:
  AdamWOptimizer(const ParameterLayout& layout, const OptimSpec& spec);

  // Clips grads in place to optim.grad_clip (if > 0), then updates params. `step` is the 1-based
  // optimizer step. Returns the gradient norm before clipping.
  float step(float* params, float* grads, double lr, int step);

  std::vector<float>& m() { return m_; }
  std::vector<float>& v() { return v_; }

 private:
  const ParameterLayout& layout_;
  OptimSpec spec_;
  std::vector<float> m_, v_;
};

}  // namespace sg
