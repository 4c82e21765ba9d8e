// Whole-model check of ResNet against PyTorch: tests/reference/resnet_reference.py builds tiny
// ResNets from torchvision's own blocks (a BasicBlock ResNet-10 and a Bottleneck ResNet-14,
// width 4) and writes, in float64 from float32 weights, the training-mode logits and
// label-smoothed loss, every parameter gradient, the running statistics after that forward, the
// weights after one SGD step (momentum, Nesterov, weight decay on weights only) and the
// evaluation-mode logits after it. Our fp32 model must agree to a relative 1e-4, measured per
// tensor as max|ours - ref| / max|ref|. The whole ResNet-18/34/50/101/152 architectures are
// checked by their parameter counts (torchvision's published numbers).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "checkpoint/safetensors.h"
#include "tests/tolerance.h"
#include "model/resnet.h"
#include "model/resnet_family.h"
#include "optim/optimizer.h"

namespace {

constexpr double kRelTolerance = 1e-4;

double relative_error(const float* ours, const float* ref, size_t n) {
  return sg::test::relative_to_largest(ours, ref, n);
}

struct Golden {
  sg::SafetensorsFile file{std::string(SINGULARITY_SOURCE_ROOT) +
                           "/tests/reference/resnet_tiny.safetensors"};
  int B = std::stoi(file.metadata().at("batch"));
  int S = std::stoi(file.metadata().at("image_size"));
  int classes = std::stoi(file.metadata().at("classes"));

  // Golden tensors "<prefix><name>" of every tensor in `list`, in a flat buffer of `total`.
  std::vector<float> load(const std::vector<sg::ParamTensor>& list, size_t total,
                          const std::string& prefix) const {
    std::vector<float> flat(std::max<size_t>(total, 1), 0.0f);
    for (const auto& t : list) file.read_f32(flat.data() + t.offset, prefix + t.name, t.shape);
    return flat;
  }
};

// Each tensor of `list` in `ours` against the golden "<prefix><name>"; returns the worst error.
double check_tensors(const Golden& g, const std::vector<sg::ParamTensor>& list, size_t total,
                     const std::vector<float>& ours, const std::string& prefix,
                     std::string* worst_name = nullptr) {
  const std::vector<float> ref = g.load(list, total, prefix);
  double worst = 0;
  for (const auto& t : list) {
    const double e = relative_error(ours.data() + t.offset, ref.data() + t.offset, t.numel);
    CHECK_MESSAGE(e <= kRelTolerance, prefix << t.name << " relative error " << e);
    if (e > worst) {
      worst = e;
      if (worst_name != nullptr) *worst_name = t.name;
    }
  }
  return worst;
}

void check_model(const Golden& g, const std::string& m, int depth, int width) {
  CAPTURE(m);
  sg::ResNetShape shape;
  shape.depth = depth;
  shape.width = width;
  shape.classes = g.classes;
  shape.image_size = g.S;
  shape.label_smoothing = std::stof(g.file.metadata().at("label_smoothing"));
  const sg::ResNetFamily family(shape);
  const sg::ParameterLayout layout(family.description());
  std::vector<float> params = g.load(layout.tensors(), layout.total(), m + ".param.");
  std::vector<float> buffers = g.load(layout.buffers(), layout.buffer_total(), m + ".buffer.");
  // Every tensor of the golden model is one of ours, and the other way round.
  size_t golden_params = 0;
  for (const auto& name : g.file.names()) golden_params += name.starts_with(m + ".param.");
  CHECK(golden_params == layout.tensors().size());

  sg::StageContext context;
  context.backend = &sg::cpu_backend();
  context.micro_batch = g.B;
  auto stage = family.make_stage(layout, context);
  auto& resnet = dynamic_cast<sg::ResNet&>(*stage);
  sg::MicroBatch batch(family.batch_fields(g.B));
  g.file.read_f32(batch.data<float>(0), "images", {g.B, 3, g.S, g.S});
  g.file.read_exact(batch.data<int32_t>(1), "labels", sg::DType::I32, {g.B});
  batch.upload(sg::cpu_backend());  // the stage reads the backend's copy, as the runner makes it

  // Training-mode logits (no running-statistics update yet), then the fused loss and gradient.
  sg::ForwardOptions look;
  resnet.forward(0, params.data(), buffers.data(), batch, look);
  std::vector<float> ref(static_cast<size_t>(g.B) * g.classes);
  g.file.read_f32(ref.data(), m + ".logits", {g.B, g.classes});
  const double logits_error = relative_error(resnet.logits(0), ref.data(), ref.size());
  MESSAGE(m << " logits relative error " << logits_error);
  CHECK(logits_error <= kRelTolerance);

  const float dloss = 1.0f / static_cast<float>(g.B);
  sg::ForwardOptions train;
  train.update_buffers = true;
  train.fused_dloss = dloss;
  const float loss = resnet.forward(0, params.data(), buffers.data(), batch, train);
  float ref_loss = 0;
  g.file.read_f32(&ref_loss, m + ".loss", {1});
  MESSAGE(m << " loss " << loss << " reference " << ref_loss);
  CHECK(std::fabs(loss - ref_loss) <= kRelTolerance * std::fabs(ref_loss));

  std::vector<float> grads(layout.total(), 0.0f);
  resnet.backward(0, grads.data(), params.data(), batch, dloss, {});
  std::string worst_name;
  const double worst = check_tensors(g, layout.tensors(), layout.total(), grads, m + ".grad.", &worst_name);
  MESSAGE(m << " worst gradient relative error " << worst << " (" << worst_name << ")");

  const double worst_running =
      check_tensors(g, layout.buffers(), layout.buffer_total(), buffers, m + ".running.");
  MESSAGE(m << " worst running-statistics relative error " << worst_running);

  sg::OptimSpec sgd;
  sgd.name = sg::OptimizerKind::Sgd;
  sgd.momentum = std::stod(g.file.metadata().at("momentum"));
  sgd.nesterov = true;
  sgd.weight_decay = std::stod(g.file.metadata().at("weight_decay"));
  sgd.grad_clip = 0;
  auto optimizer = sg::make_optimizer(sgd, layout, 0, layout.total());
  optimizer->update_range(params.data(), grads.data(), 0.0, std::stod(g.file.metadata().at("lr")), 1);
  const double worst_step = check_tensors(g, layout.tensors(), layout.total(), params, m + ".stepped.");
  MESSAGE(m << " worst stepped-weight relative error " << worst_step);

  sg::ForwardOptions eval;
  eval.training = false;
  resnet.forward(0, params.data(), buffers.data(), batch, eval);
  g.file.read_f32(ref.data(), m + ".eval_logits", {g.B, g.classes});
  const double eval_error = relative_error(resnet.logits(0), ref.data(), ref.size());
  MESSAGE(m << " evaluation logits relative error " << eval_error);
  CHECK(eval_error <= kRelTolerance);
}

}  // namespace

TEST_CASE("tiny ResNet-10 (BasicBlock) matches the PyTorch float64 reference") {
  check_model(Golden{}, "r10", 10, 4);
}

TEST_CASE("tiny ResNet-14 (Bottleneck, v1.5) matches the PyTorch float64 reference") {
  check_model(Golden{}, "b14", 14, 4);
}

TEST_CASE("ResNet-18 to 152 have torchvision's parameter counts; the blocks and stages") {
  const std::pair<int, int64_t> published[] = {
      {18, 11689512}, {34, 21797672}, {50, 25557032}, {101, 44549160}, {152, 60192808}};
  for (const auto& [depth, count] : published) {
    sg::ResNetShape shape;
    shape.depth = depth;
    const sg::ResNetFamily family(shape);
    CHECK_MESSAGE(family.parameter_count() == count, "ResNet-" << depth);
    const sg::ParameterLayout layout(family.description());
    CHECK(layout.buffer_total() > 0);
  }
  sg::ResNetShape r50;
  const sg::ResNetFamily family(r50);
  CHECK(family.description().blocks == 16);
  // Forward FLOPs of one 224x224 image: 4.09 G multiply-adds x 2 for ResNet-50.
  CHECK(sg::resnet_forward_flops(r50) == doctest::Approx(2 * 4.09e9).epsilon(0.01));
  // Two stages split the 16 blocks by compute, not by count.
  const auto [first, count] = sg::stage_blocks(family.description(), 0, 2);
  CHECK(first == 0);
  CHECK(count > 4);
  CHECK(count < 12);
}
