#pragma once
// The optimizer interface (docs/architecture.md, "Tensors, models and optimizers"): an update rule
// over a range [begin, end) of the flat parameter buffer, with named state of one element per
// parameter of that range ("m" and "v" for AdamW, "momentum" for SGD). Under ZeRO each
// data-parallel process keeps one range, so ZeRO shards any optimizer's state; checkpoints store
// each state tensor by name. Global-norm clipping scales the gradient as the update reads it (no
// pass of its own), weight decay only where the layout's tensor says so.
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "config/job_spec.h"
#include "model/parameter_layout.h"

namespace sg {

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual std::string name() const = 0;                     // optim.name
  virtual std::vector<std::string> state_names() const = 0;  // checkpoint prefixes
  float* state(size_t i) { return state_[i].as<float>(); }   // end() - begin() floats each
  const float* state(size_t i) const { return state_[i].as<float>(); }
  size_t begin() const { return begin_; }
  size_t end() const { return end_; }

  // Updates params[begin, end), the gradient clipped to optim.grad_clip by the global norm
  // `norm` (computed by the caller over every range); grads are left as they are. Pointers are to
  // the whole buffers; `step` is the 1-based optimizer step.
  void update_range(float* params, float* grads, double norm, double lr, int step);
  // The whole range on its own: its norm, then update_range. Returns the norm before clipping.
  float step(float* params, float* grads, double lr, int step);

 protected:
  Optimizer(const ParameterLayout& layout, const OptimSpec& spec, size_t begin, size_t end,
            Backend& backend, size_t state_count);
  // Updates the ranges of params, state and grads (the first two pointers at begin(): index 0
  // is parameter begin()), reading each gradient times grad_scale (the clipping factor).
  virtual void apply(float* params, const float* grads, std::span<const UpdateRange> ranges,
                     double lr, int step, float grad_scale) = 0;

  const ParameterLayout& layout_;
  OptimSpec spec_;
  Backend& backend_;

 private:
  size_t begin_, end_;
  std::vector<Buffer> state_;
  std::vector<UpdateRange> ranges_;  // [begin, end) by weight decay, relative to begin_
};

// AdamW (kernels/adamw.h): state m, v.
class AdamWOptimizer final : public Optimizer {
 public:
  AdamWOptimizer(const ParameterLayout& layout, const OptimSpec& spec)
      : AdamWOptimizer(layout, spec, 0, layout.total()) {}
  AdamWOptimizer(const ParameterLayout& layout, const OptimSpec& spec, size_t begin, size_t end,
                 Backend& backend = cpu_backend())
      : Optimizer(layout, spec, begin, end, backend, 2) {}
  std::string name() const override { return "adamw"; }
  std::vector<std::string> state_names() const override { return {"m", "v"}; }

 private:
  void apply(float* params, const float* grads, std::span<const UpdateRange> ranges, double lr,
             int step, float grad_scale) override;
};

// SGD with momentum, optionally Nesterov (kernels/sgd.h): state momentum.
class SgdOptimizer final : public Optimizer {
 public:
  SgdOptimizer(const ParameterLayout& layout, const OptimSpec& spec, size_t begin, size_t end,
               Backend& backend = cpu_backend())
      : Optimizer(layout, spec, begin, end, backend, 1) {}
  std::string name() const override { return "sgd"; }
  std::vector<std::string> state_names() const override { return {"momentum"}; }

 private:
  void apply(float* params, const float* grads, std::span<const UpdateRange> ranges, double lr,
             int step, float grad_scale) override;
};

struct OptimizerGroups;
// The optimizer optim.name names, over [begin, end) (clamped to the layout). groups: what Muon
// gathers whole matrices over (optim/muon.h); none: one process.
std::unique_ptr<Optimizer> make_optimizer(const OptimSpec& spec, const ParameterLayout& layout,
                                          size_t begin, size_t end,
                                          Backend& backend = cpu_backend(),
                                          const OptimizerGroups* groups = nullptr);

}  // namespace sg
