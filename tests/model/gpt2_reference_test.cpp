// Whole-model check against PyTorch: tests/reference/gpt2_reference.py computes, in float64, the
// logits, loss, every parameter gradient and the losses of 5 AdamW steps of a tiny GPT-2 from
// float32 initial weights, and writes them to gpt2_tiny.safetensors. Our fp32 model must agree
// to a relative 1e-5, measured per tensor as max|ours - ref| / max|ref| (an element-wise ratio
// would blow up on gradients that are nearly zero).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "tests/tolerance.h"
#include "config/job_spec.h"
#include "kernels/grad_norm.h"
#include "model/gpt2.h"
#include "model/gpt2_family.h"
#include "optim/optimizer.h"

namespace {

constexpr double kRelTolerance = 1e-5;

std::string golden_path() {
  return std::string(SINGULARITY_SOURCE_ROOT) + "/tests/reference/gpt2_tiny.safetensors";
}

double relative_error(const float* ours, const float* ref, size_t n) {
  return sg::test::relative_to_largest(ours, ref, n);
}

int meta_int(const sg::SafetensorsFile& f, const char* key) {
  return std::stoi(f.metadata().at(key));
}
double meta_double(const sg::SafetensorsFile& f, const char* key) {
  return std::stod(f.metadata().at(key));
}

struct Golden {
  sg::SafetensorsFile file{golden_path()};
  int B = meta_int(file, "batch"), T = meta_int(file, "context");
  sg::GPT2Shape shape{meta_int(file, "n_layer"), meta_int(file, "n_head"), meta_int(file, "n_embd"),
                      meta_int(file, "context"), meta_int(file, "vocab"),
                      (meta_int(file, "vocab") + 127) / 128 * 128};
  sg::ParameterLayout layout{sg::gpt2_description(shape)};
  std::vector<int32_t> inputs = std::vector<int32_t>(static_cast<size_t>(B) * T),
                       targets = inputs;

  Golden() {
    file.read_exact(inputs.data(), "inputs", sg::DType::I32, {B, T});
    file.read_exact(targets.data(), "targets", sg::DType::I32, {B, T});
  }

  // Golden tensor `prefix + name` in our layout (wte's padding rows left zero).
  std::vector<float> load(const std::string& prefix) const {
    std::vector<float> flat(layout.total(), 0.0f);
    for (const auto& t : layout.tensors()) {
      auto shape = t.shape;
      if (t.name == "wte") shape[0] = this->shape.vocab;
      file.read_f32(flat.data() + t.offset, prefix + t.name, shape);
    }
    return flat;
  }
};

}  // namespace

TEST_CASE("tiny GPT-2 matches the PyTorch float64 reference: logits, loss, gradients") {
  Golden g;
  const std::vector<float> params = g.load("param.");
  sg::GPT2 model(g.shape, g.layout, g.B, g.T);
  const int N = g.B * g.T, V = g.shape.vocab, Vp = g.shape.padded_vocab;

  model.forward(params.data(), g.inputs.data(), nullptr);
  std::vector<float> logits(static_cast<size_t>(N) * V), ref_logits(logits.size());
  for (int n = 0; n < N; ++n) {
    std::copy_n(model.logits().f32() + static_cast<size_t>(n) * Vp, V, logits.data() + n * V);
  }
  g.file.read_f32(ref_logits.data(), "logits", {g.B, g.T, V});
  const double logits_error = relative_error(logits.data(), ref_logits.data(), logits.size());
  MESSAGE("logits relative error " << logits_error);
  CHECK(logits_error <= kRelTolerance);

  const float loss = model.forward(params.data(), g.inputs.data(), g.targets.data());
  float ref_loss = 0;
  g.file.read_f32(&ref_loss, "loss", {1});
  MESSAGE("loss " << loss << " reference " << ref_loss);
  CHECK(std::fabs(loss - ref_loss) <= kRelTolerance * std::fabs(ref_loss));

  std::vector<float> grads(g.layout.total(), 0.0f);
  model.backward(grads.data(), params.data(), g.inputs.data(), g.targets.data(), 1.0f / N);
  const std::vector<float> ref_grads = g.load("grad.");
  double worst = 0;
  std::string worst_name;
  for (const auto& t : g.layout.tensors()) {
    const double e = relative_error(grads.data() + t.offset, ref_grads.data() + t.offset, t.numel);
    CHECK_MESSAGE(e <= kRelTolerance, "gradient of " << t.name << " relative error " << e);
    if (e > worst) worst = e, worst_name = t.name;
  }
  MESSAGE("worst gradient relative error " << worst << " (" << worst_name << ")");
  // wte's padding rows must receive no gradient at all.
  const auto& wte = g.layout.find("wte");
  for (size_t i = static_cast<size_t>(V) * g.shape.n_embd; i < wte.numel; ++i) {
    REQUIRE(grads[wte.offset + i] == 0.0f);
  }
}

TEST_CASE("the fused loss-and-gradient forward gives the reference gradients too") {
  Golden g;
  const std::vector<float> params = g.load("param.");
  sg::GPT2 model(g.shape, g.layout, g.B, g.T);
  const int N = g.B * g.T;
  const float loss = model.forward(params.data(), g.inputs.data(), g.targets.data(), 1.0f / N);
  float ref_loss = 0;
  g.file.read_f32(&ref_loss, "loss", {1});
  CHECK(std::fabs(loss - ref_loss) <= kRelTolerance * std::fabs(ref_loss));
  std::vector<float> grads(g.layout.total(), 0.0f);
  model.backward(grads.data(), params.data(), g.inputs.data(), g.targets.data(), 1.0f / N);
  const std::vector<float> ref_grads = g.load("grad.");
  for (const auto& t : g.layout.tensors()) {
    const double e = relative_error(grads.data() + t.offset, ref_grads.data() + t.offset, t.numel);
    CHECK_MESSAGE(e <= kRelTolerance, "gradient of " << t.name << " relative error " << e);
  }
  // backward() with another dloss than the fused one is refused.
  model.forward(params.data(), g.inputs.data(), g.targets.data(), 1.0f / N);
  CHECK_THROWS(model.backward(grads.data(), params.data(), g.inputs.data(), g.targets.data(), 0.5f));
}

TEST_CASE("tiny GPT-2: 5 AdamW steps with clipping follow the reference losses") {
  Golden g;
  std::vector<float> params = g.load("param.");
  sg::OptimSpec optim;
  optim.lr = meta_double(g.file, "adamw_lr");
  optim.betas = {meta_double(g.file, "adamw_beta1"), meta_double(g.file, "adamw_beta2")};
  optim.eps = meta_double(g.file, "adamw_eps");
  optim.weight_decay = meta_double(g.file, "adamw_weight_decay");
  optim.grad_clip = meta_double(g.file, "grad_clip");
  sg::AdamWOptimizer adamw(g.layout, optim);
  sg::GPT2 model(g.shape, g.layout, g.B, g.T);
  const int N = g.B * g.T;

  std::vector<float> ref_losses(5);
  g.file.read_f32(ref_losses.data(), "adamw_losses", {5});
  std::vector<float> grads(g.layout.total());
  for (int step = 0; step < 5; ++step) {
    const float loss = model.forward(params.data(), g.inputs.data(), g.targets.data());
    const double e = std::fabs(loss - ref_losses[step]) / std::fabs(ref_losses[step]);
    MESSAGE("step " << step << " loss " << loss << " reference " << ref_losses[step]
                    << " relative error " << e);
    CHECK(e <= kRelTolerance);
    std::fill(grads.begin(), grads.end(), 0.0f);
    model.backward(grads.data(), params.data(), g.inputs.data(), g.targets.data(), 1.0f / N);
    adamw.step(params.data(), grads.data(), optim.lr, step + 1);
  }
}

TEST_CASE("tiny GPT-2: clipping scales the update as clipping the gradient first would, "
          "and leaves the gradient alone") {
  Golden g;
  const std::vector<float> params0 = g.load("param.");
  sg::GPT2 model(g.shape, g.layout, g.B, g.T);
  const int N = g.B * g.T;
  model.forward(params0.data(), g.inputs.data(), g.targets.data());
  std::vector<float> grads(g.layout.total(), 0.0f);
  model.backward(grads.data(), params0.data(), g.inputs.data(), g.targets.data(), 1.0f / N);
  const std::vector<float> grads0 = grads;
  // The optimizer's norm: the same fixed-order sum.
  const double norm = std::sqrt(sg::cpu::sum_of_squares(grads.data(), long(grads.size())));

  sg::OptimSpec optim;
  optim.lr = 1e-2;
  optim.grad_clip = norm / 3;  // well above the clipping threshold
  sg::AdamWOptimizer clipped(g.layout, optim);
  std::vector<float> p1 = params0;
  const float reported = clipped.step(p1.data(), grads.data(), optim.lr, 1);
  CHECK(grads == grads0);  // the factor rode along with the update
  CHECK(reported == doctest::Approx(norm).epsilon(1e-6));

  // The reference: torch's clip_grad_norm_ factor applied to the gradient, then no clipping.
  const float max_norm = static_cast<float>(optim.grad_clip);
  const float scale = static_cast<float>(max_norm / (norm + 1e-6));
  std::vector<float> scaled = grads0;
  for (float& x : scaled) x *= scale;
  optim.grad_clip = 0;
  sg::AdamWOptimizer plain(g.layout, optim);
  std::vector<float> p2 = params0;
  plain.step(p2.data(), scaled.data(), optim.lr, 1);
  CHECK(p1 == p2);
}
