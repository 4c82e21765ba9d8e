#include "model/resnet_family.h"

#include "config/job_spec.h"

#include <cmath>

#include <fmt/format.h>

#include "model/resnet.h"
#include "util/error.h"
#include "util/rng.h"

namespace sg {
namespace {

ConvBn conv_bn(std::string conv, std::string bn, int C, int K, int kernel, int stride, int size,
               bool relu) {
  ConvBn u;
  u.conv = std::move(conv);
  u.bn = std::move(bn);
  u.shape.N = 1;
  u.shape.H = u.shape.W = size;
  u.shape.C = C;
  u.shape.K = K;
  u.shape.R = u.shape.S = kernel;
  u.shape.stride = stride;
  u.shape.pad = kernel / 2;  // 7x7: 3, 3x3: 1, 1x1: 0
  u.relu = relu;
  return u;
}

double conv_flops(const Conv2dShape& s) {
  return 2.0 * s.K * (s.C / s.groups) * s.R * s.S * static_cast<double>(s.P()) * s.Q();
}

double block_flops(const ResidualBlock& b) {
  double f = 0;
  for (const ConvBn& u : b.units) f += conv_flops(u.shape);
  if (b.downsample) f += conv_flops(b.shortcut.shape);
  return f;
}

}  // namespace

ResNetGraph resnet_graph(const ResNetShape& shape) {
  const ResNetPlan plan = resnet_plan(shape.depth);
  ResNetGraph g;
  g.stem = conv_bn("conv1", "bn1", 3, shape.width, 7, 2, shape.image_size, true);
  const int stem_out = g.stem.shape.P();
  g.pool.N = 1;
  g.pool.H = g.pool.W = stem_out;
  g.pool.C = shape.width;
  g.pool.R = g.pool.S = 3;
  g.pool.stride = 2;
  g.pool.pad = 1;
  int channels = shape.width, size = g.pool.P();
  const int expansion = plan.bottleneck ? 4 : 1;
  for (int layer = 0; layer < 4; ++layer) {
    const int planes = shape.width << layer;
    for (int j = 0; j < plan.blocks_per_layer[static_cast<size_t>(layer)]; ++j) {
      const int stride = j == 0 && layer > 0 ? 2 : 1;
      const std::string p = fmt::format("layer{}.{}.", layer + 1, j);
      ResidualBlock b;
      b.in_channels = channels;
      b.in_size = size;
      b.out_channels = planes * expansion;
      if (plan.bottleneck) {  // v1.5: the stride on the 3x3
        b.units.push_back(conv_bn(p + "conv1", p + "bn1", channels, planes, 1, 1, size, true));
        b.units.push_back(conv_bn(p + "conv2", p + "bn2", planes, planes, 3, stride, size, true));
        const int mid = b.units.back().shape.P();
        b.units.push_back(conv_bn(p + "conv3", p + "bn3", planes, b.out_channels, 1, 1, mid, false));
      } else {
        b.units.push_back(conv_bn(p + "conv1", p + "bn1", channels, planes, 3, stride, size, true));
        const int mid = b.units.back().shape.P();
        b.units.push_back(conv_bn(p + "conv2", p + "bn2", planes, planes, 3, 1, mid, false));
      }
      b.out_size = b.units.back().shape.P();
      b.downsample = stride != 1 || channels != b.out_channels;
      if (b.downsample) {
        b.shortcut = conv_bn(p + "downsample.0", p + "downsample.1", channels, b.out_channels, 1,
                             stride, size, false);
      }
      g.blocks.push_back(std::move(b));
      channels = planes * expansion;
      size = g.blocks.back().out_size;
    }
  }
  g.features = channels;
  g.final_size = size;
  return g;
}

ModelDescription resnet_description(const ResNetShape& shape) {
  const ResNetGraph g = resnet_graph(shape);
  ModelDescription d;
  d.blocks = static_cast<int>(g.blocks.size());
  auto add_unit = [&](const ConvBn& u, int block) {
    const Conv2dShape& s = u.shape;
    d.tensors.push_back({u.conv + ".weight", {s.K, s.C / s.groups, s.R, s.S}, TensorSplit::kWhole,
                         true, true, block, false});
    for (const char* name : {".weight", ".bias"}) {
      d.tensors.push_back({u.bn + name, {s.K}, TensorSplit::kWhole, false, true, block, false});
    }
    for (const char* name : {".running_mean", ".running_var"}) {
      d.tensors.push_back({u.bn + name, {s.K}, TensorSplit::kWhole, false, false, block, false});
    }
  };
  add_unit(g.stem, -1);
  d.first_cost = conv_flops(g.stem.shape);
  for (size_t b = 0; b < g.blocks.size(); ++b) {
    for (const ConvBn& u : g.blocks[b].units) add_unit(u, static_cast<int>(b));
    if (g.blocks[b].downsample) add_unit(g.blocks[b].shortcut, static_cast<int>(b));
    d.block_costs.push_back(block_flops(g.blocks[b]));
  }
  d.tensors.push_back({"fc.weight", {shape.classes, g.features}, TensorSplit::kWhole, true, true,
                       d.blocks, false});
  d.tensors.push_back({"fc.bias", {shape.classes}, TensorSplit::kWhole, false, true, d.blocks, false});
  d.last_cost = 2.0 * g.features * shape.classes;
  return d;
}

double resnet_forward_flops(const ResNetShape& shape) {
  const ResNetGraph g = resnet_graph(shape);
  double f = conv_flops(g.stem.shape) + 2.0 * g.features * shape.classes;
  for (const ResidualBlock& b : g.blocks) f += block_flops(b);
  return f;
}

ResNetFamily::ResNetFamily(const ResNetShape& shape)
    : shape_(shape), graph_(resnet_graph(shape)), description_(resnet_description(shape)) {
  if (graph_.final_size < 1) {
    throw SpecError("model.image_size " + std::to_string(shape.image_size) +
                    " is too small for a ResNet (it halves the size five times); use at least 32");
  }
}

nlohmann::json ResNetFamily::shape_record() const {
  return {{"family", "resnet"},          {"depth", shape_.depth},
          {"width", shape_.width},       {"classes", shape_.classes},
          {"image_size", shape_.image_size}};
}

std::string ResNetFamily::summary() const {
  return fmt::format("ResNet-{} ({} wide, {} classes, {}x{} images{})", shape_.depth,
                     shape_.width, shape_.classes, shape_.image_size, shape_.image_size,
                     shape_.sync_bn ? ", synchronised batch norm" : "");
}

int64_t ResNetFamily::parameter_count() const {
  int64_t n = 0;
  for (const TensorSpec& t : description_.tensors) {
    if (t.trainable) n += element_count(t.shape);
  }
  return n;
}

void ResNetFamily::check_split(int tensors, int stages) const {
  const std::string problem = resnet_split_problem(shape_.depth, tensors, stages);
  if (!problem.empty()) throw SpecError(problem);
}

std::unique_ptr<ModelFamily> ResNetConfig::make_family(const JobSpec&) const {
  ResNetShape shape;
  shape.depth = depth;
  shape.width = width;
  shape.classes = classes;
  shape.image_size = image_size;
  shape.zero_init_residual = zero_init_residual;
  shape.sync_bn = sync_bn;
  shape.label_smoothing = static_cast<float>(label_smoothing);
  return std::make_unique<ResNetFamily>(shape);
}

void ResNetFamily::initialize(float* params, float* buffers, const ParameterLayout& layout,
                              uint64_t seed) const {
  // torchvision: kaiming_normal_(fan_out, relu) for convolutions, batch norm scale 1 and shift
  // 0 (scale 0 on each block's last batch norm with zero_init_residual), running mean 0 and
  // variance 1, and nn.Linear's default U(-1/sqrt(in), 1/sqrt(in)) for fc's weight and bias.
  const bool bottleneck = resnet_plan(shape_.depth).bottleneck;
  const std::string last_bn = bottleneck ? ".bn3.weight" : ".bn2.weight";
  initialize_tensors(params, buffers, layout, seed,
                     [&](const TensorSpec& t, float* p, size_t n, uint64_t stream) {
    Rng rng(stream);
    const auto fill = [&](float v) { std::fill(p, p + n, v); };
    if (t.name.starts_with("fc.")) {
      const double bound = 1.0 / std::sqrt(static_cast<double>(graph_.features));
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>((2 * rng.uniform() - 1) * bound);
    } else if (t.shape.size() == 4) {  // convolution (K, C/g, R, S)
      const double fan_out = static_cast<double>(t.shape[0]) * t.shape[2] * t.shape[3];
      const double std = std::sqrt(2.0 / fan_out);
      for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(rng.normal() * std);
    } else if (t.name.ends_with(".running_var")) {
      fill(1.0f);
    } else if (t.name.ends_with(".weight")) {
      fill(shape_.zero_init_residual && t.name.ends_with(last_bn) ? 0.0f : 1.0f);
    } else {  // batch norm bias, running mean
      fill(0.0f);
    }
  });
}

std::vector<BatchField> ResNetFamily::batch_fields(int micro_batch) const {
  const int S = shape_.image_size;
  return {{"images", DType::F32, {micro_batch, 3, S, S}}, {"labels", DType::I32, {micro_batch}}};
}

size_t ResNetFamily::weight_copy_bytes(const ParameterLayout& layout) const {
  return resnet_weight_copy_bytes(layout, activation_storage());
}

size_t ResNetFamily::activation_bytes(const ParameterLayout& layout, int micro_batch,
                                      int slots) const {
  return sizeof(float) * resnet_activation_floats(*this, layout, micro_batch, slots);
}

std::string ResNetFamily::evaluation_summary(double loss, const std::vector<double>& metrics) const {
  return fmt::format("val loss {:.4f}, top-1 {:.2f}%, top-5 {:.2f}%", loss,
                     100.0 * (metrics.size() > 0 ? metrics[0] : 0.0),
                     100.0 * (metrics.size() > 1 ? metrics[1] : 0.0));
}

std::unique_ptr<StageModel> ResNetFamily::make_stage(const ParameterLayout& layout,
                                                     const StageContext& context) const {
  return std::make_unique<ResNet>(*this, layout, context);
}

}  // namespace sg
