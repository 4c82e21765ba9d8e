// GPT-2's bf16 working copy of its weights (docs/bf16.md): under bf16 storage the products
// multiply a copy made by prepare_weights, once a step. A forward on parameters the copy was not
// made from is refused (a missed call would silently train on stale weights), and a fresh copy
// after the parameters change gives bitwise the loss of a model built on the new values.
#include <doctest/doctest.h>

#include <vector>

#include "backend/backend.h"
#include "model/gpt2.h"
#include "model/gpt2_family.h"
#include "util/error.h"

namespace {

const sg::GPT2Shape kShape{2, 2, 16, 16, 50, 64};

// The CPU backend in bf16 for the test's scope (it is one per process).
struct Bf16Cpu {
  Bf16Cpu() { sg::cpu_backend().set_precision(sg::Precision::BF16); }
  ~Bf16Cpu() { sg::cpu_backend().set_precision(sg::Precision::FP32); }
};

float loss_of(sg::GPT2& model, const std::vector<float>& params, const std::vector<int32_t>& x,
              const std::vector<int32_t>& y) {
  model.prepare_weights(params.data());
  return model.forward(params.data(), x.data(), y.data());
}

}  // namespace

TEST_CASE("bf16 weights: refused unless prepared from these parameters, fresh after a change") {
  const Bf16Cpu bf16;
  REQUIRE(sg::cpu_backend().activation_dtype() == sg::DType::BF16);
  const sg::ParameterLayout layout{sg::gpt2_description(kShape)};
  CHECK(sg::gpt2_weight_copy_bytes(layout, sg::DType::BF16) == 2 * layout.total());
  CHECK(sg::gpt2_weight_copy_bytes(layout, sg::DType::F32) == 0);
  std::vector<float> params(layout.total());
  sg::init_gpt2_parameters(params.data(), kShape, layout, 0.2f, 7);
  const int B = 2, T = 8;
  std::vector<int32_t> x(B * T), y(B * T);
  for (int i = 0; i < B * T; ++i) x[i] = (3 * i) % kShape.vocab, y[i] = (5 * i + 1) % kShape.vocab;

  sg::GPT2 model(kShape, layout, B, T);
  CHECK_THROWS_WITH_AS(model.forward(params.data(), x.data(), y.data()),
                       doctest::Contains("prepare_weights"), sg::RunError);
  const float before = loss_of(model, params, x, y);
  std::vector<float> other = params;  // other parameters at another address: refused too
  CHECK_THROWS_AS(model.forward(other.data(), x.data(), y.data()), sg::RunError);

  // The parameters change in place (an optimizer step): a new copy, and the loss is that of a
  // model that never saw the old values.
  for (float& p : params) p *= 0.5f;
  const float after = loss_of(model, params, x, y);
  CHECK(after != before);
  sg::GPT2 fresh(kShape, layout, B, T);
  CHECK(loss_of(fresh, params, x, y) == after);
}
