#pragma once
// AdamW over a flat parameter buffer: moments m and v share the parameters' layout, weight
// decay only on tensors the layout marks (2-D weights). Global-norm clipping happens first.
// An optimizer may own only a range [begin, end) of the buffer: under ZeRO-1/2 each
// data-parallel process keeps the moments of its own range and updates only those parameters.
#include <cstddef>
#include <vector>

#include "config/job_spec.h"
#include "model/parameter_layout.h"

namespace sg {

class AdamWOptimizer {
 public:
  // The whole buffer.
  AdamWOptimizer(const ParameterLayout& layout, const OptimSpec& spec);
  // The range [begin, end) of the flat buffer (end <= layout.total()).
  AdamWOptimizer(const ParameterLayout& layout, const OptimSpec& spec, size_t begin, size_t end);

  // Whole-buffer step: clips grads in place to optim.grad_clip (if > 0), then updates params.
  // `step` is the 1-based optimizer step. Returns the gradient norm before clipping.
  float step(float* params, float* grads, double lr, int step);

  // Range step with a norm computed by the caller over all ranges: clips and applies
  // grads[begin,end) to params[begin,end). Pointers are to the start of the full buffers.
  void update_range(float* params, float* grads, double norm, double lr, int step);

  size_t begin() const { return begin_; }
  size_t end() const { return end_; }
  std::vector<float>& m() { return m_; }  // end - begin floats
  std::vector<float>& v() { return v_; }

 private:
  const ParameterLayout& layout_;
  OptimSpec spec_;
  size_t begin_, end_;
  std::vector<float> m_, v_;
};

}  // namespace sg
