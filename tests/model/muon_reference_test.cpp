// Muon (optim/muon.h) against torch.optim.Muon: tests/reference/muon_reference.py runs torch's
// Muon on a tall and a wide hidden matrix and torch's AdamW on an embedding and a norm (as
// optim.name muon splits them) for six steps of fixed gradients, in float64 with torch's
// Newton-Schulz iteration in float64 (its bf16 is the one change), and writes the parameters
// after each step. Ours, fp32, must agree to a relative 1e-5 per tensor after every step.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "optim/muon.h"
#include "tests/tolerance.h"

namespace {

struct Golden {
  sg::SafetensorsFile file{std::string(SINGULARITY_SOURCE_ROOT) +
                           "/tests/reference/muon_steps.safetensors"};
  double meta(const char* key) const { return std::stod(file.metadata().at(key)); }
};

sg::ModelDescription four_tensors() {
  sg::ModelDescription d;
  d.blocks = 1;
  d.tensors = {{"embed", {50, 16}, sg::TensorSplit::kWhole, true, true, -1, false},
               {"layer.w_tall", {24, 16}, sg::TensorSplit::kWhole, true, true, 0, false},
               {"layer.w_wide", {16, 40}, sg::TensorSplit::kWhole, true, true, 0, false},
               {"layer.norm", {16}, sg::TensorSplit::kWhole, false, true, 0, false}};
  return d;
}

}  // namespace

TEST_CASE("Muon (matrices) with AdamW (the rest) follows torch.optim.Muon and AdamW step by step") {
  Golden g;
  const sg::ParameterLayout layout(four_tensors());
  sg::OptimSpec spec;
  spec.name = sg::OptimizerKind::Muon;
  spec.lr = g.meta("lr");
  spec.muon_lr = g.meta("muon_lr");
  spec.weight_decay = g.meta("weight_decay");
  spec.muon_momentum = g.meta("momentum");
  spec.betas = {g.meta("beta1"), g.meta("beta2")};
  spec.eps = g.meta("eps");
  spec.grad_clip = 0;  // torch's Muon does not clip
  auto optimizer = sg::make_optimizer(spec, layout, 0, layout.total());
  CHECK(optimizer->name() == "muon");
  CHECK(sg::is_muon_tensor(layout.find("layer.w_tall"), layout));
  CHECK_FALSE(sg::is_muon_tensor(layout.find("embed"), layout));
  CHECK_FALSE(sg::is_muon_tensor(layout.find("layer.norm"), layout));

  std::vector<float> params(layout.total()), grads(layout.total()), ref(layout.total());
  const auto read_all = [&](const std::string& prefix, std::vector<float>& out) {
    for (const auto& t : layout.tensors()) g.file.read_f32(out.data() + t.offset, prefix + t.name, t.shape);
  };
  read_all("init.", params);
  const int steps = static_cast<int>(g.meta("steps"));
  for (int step = 0; step < steps; ++step) {
    read_all("grad." + std::to_string(step) + ".", grads);
    optimizer->update_range(params.data(), grads.data(), 0.0, spec.lr, step + 1);
    read_all("param." + std::to_string(step) + ".", ref);
    for (const auto& t : layout.tensors()) {
      const double e = sg::test::relative_to_largest(params.data() + t.offset, ref.data() + t.offset, t.numel);
      CHECK_MESSAGE(e <= 1e-5, "step " << step + 1 << " " << t.name << " relative error " << e);
    }
  }
}

TEST_CASE("Newton-Schulz: an orthogonal matrix's direction is kept, a tall one is transposed") {
  // The iteration takes a matrix toward U V^T of its SVD (singular values near 1, in about
  // [0.7, 1.2] after 5 steps); an orthogonal input's singular values are all 1 / sqrt(n)
  // after the Frobenius normalisation, which the quintic pushes up, keeping its directions.
  const int n = 8;
  std::vector<float> eye(n * n, 0.0f), out(n * n);
  for (int i = 0; i < n; ++i) eye[i * n + i] = 1.0f;
  sg::newton_schulz(out.data(), eye.data(), n, n, 5);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) {
      if (i == j) CHECK(out[i * n + j] > 0.5f);
      else CHECK(out[i * n + j] == 0.0f);
    }
  // Tall (rows > cols) and its transpose give transposed results.
  const int r = 6, c = 3;
  std::vector<float> tall(r * c), wide(c * r), o_tall(r * c), o_wide(c * r);
  for (int i = 0; i < r * c; ++i) tall[i] = std::sin(1.0f + static_cast<float>(i));
  for (int i = 0; i < r; ++i)
    for (int j = 0; j < c; ++j) wide[j * r + i] = tall[i * c + j];
  sg::newton_schulz(o_tall.data(), tall.data(), r, c, 5);
  sg::newton_schulz(o_wide.data(), wide.data(), c, r, 5);
  for (int i = 0; i < r; ++i)
    for (int j = 0; j < c; ++j) CHECK(o_tall[i * c + j] == o_wide[j * r + i]);
}
