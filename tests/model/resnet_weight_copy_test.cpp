// ResNet's bf16 filters (docs/bf16.md): under bf16 storage the convolutions take a bf16 working
// copy of their filters made by prepare_weights, once a step (Backend::conv2d_filter). A forward
// on parameters the copy was not made from is refused (a missed call would silently train on
// stale weights), and a fresh copy after the parameters change gives bitwise the loss of a model
// built on the new values.
#include <doctest/doctest.h>

#include <vector>

#include "backend/backend.h"
#include "model/model_family.h"
#include "model/resnet.h"
#include "model/resnet_family.h"
#include "tests/kernels/kernel_test_util.h"
#include "util/error.h"

namespace {

// The CPU backend in bf16 for the test's scope (it is one per process).
struct Bf16Cpu {
  Bf16Cpu() { sg::cpu_backend().set_precision(sg::Precision::BF16); }
  ~Bf16Cpu() { sg::cpu_backend().set_precision(sg::Precision::FP32); }
};

}  // namespace

TEST_CASE("ResNet's bf16 filters: refused unless prepared from these parameters, fresh after a change") {
  const Bf16Cpu bf16;
  REQUIRE(sg::cpu_backend().activation_dtype() == sg::DType::BF16);
  sg::ResNetShape shape;
  shape.depth = 10;
  shape.width = 8;
  shape.classes = 10;
  shape.image_size = 32;
  sg::ResNetFamily family(shape);
  sg::ActivationPolicy policy;
  policy.storage = sg::DType::BF16;
  family.set_activation_policy(policy);
  const sg::ParameterLayout layout(family.description());
  CHECK(family.weight_copy_bytes(layout) == 2 * layout.total());
  CHECK(sg::resnet_weight_copy_bytes(layout, sg::DType::F32) == 0);
  std::vector<float> params(layout.total()), buffers(layout.buffer_total());
  family.initialize(params.data(), buffers.data(), layout, 7);

  const int B = 4;
  sg::StageContext context;
  context.backend = &sg::cpu_backend();
  context.micro_batch = B;
  sg::MicroBatch batch(family.batch_fields(B));
  const auto images = sg::test::random_floats(size_t(B) * 3 * 32 * 32, 8);
  std::copy(images.begin(), images.end(), batch.data<float>(0));
  for (int i = 0; i < B; ++i) batch.data<int32_t>(1)[i] = (3 * i) % shape.classes;
  batch.upload(sg::cpu_backend());
  const auto loss_of = [&](sg::StageModel& model) {
    model.prepare_weights(params.data());
    return model.forward(0, params.data(), buffers.data(), batch, sg::ForwardOptions{});
  };

  auto model = family.make_stage(layout, context);
  CHECK_THROWS_WITH_AS(model->forward(0, params.data(), buffers.data(), batch, {}),
                       doctest::Contains("prepare_weights"), sg::RunError);
  const float before = loss_of(*model);
  std::vector<float> other = params;  // other parameters at another address: refused too
  CHECK_THROWS_AS(model->forward(0, other.data(), buffers.data(), batch, {}), sg::RunError);

  // The parameters change in place (an optimizer step): a new copy, and the loss is that of a
  // model that never saw the old values.
  for (float& p : params) p *= 0.5f;
  const float after = loss_of(*model);
  CHECK(after != before);
  auto fresh = family.make_stage(layout, context);
  CHECK(loss_of(*fresh) == after);
}
