#pragma once
// ResNet as a model family (model_family.h): torchvision's architecture (v1.5: the stride of a
// bottleneck sits on its 3x3 convolution), its tensor names (conv1.weight, bn1.running_mean,
// layer1.0.conv1.weight, ..., fc.weight) and its initialisation, for depths 18, 34 (BasicBlocks),
// 50, 101 and 152 (Bottlenecks), and two small variants for tests: 10 (BasicBlocks [1,1,1,1])
// and 14 (Bottlenecks [1,1,1,1]).
// Activations are NHWC; convolution weights (K, C/groups, R, S) as PyTorch stores them.
// Pipeline units are the residual blocks; the stem (conv1, bn1, max pool) goes with the first
// stage, the average pool and fc with the last. No tensor parallelism: its convolutions are not
// split (check_split refuses parallel.tensor > 1).
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/conv2d.h"
#include "kernels/pool.h"
#include "model/model_family.h"
#include "model/resnet_config.h"

namespace sg {

struct ResNetShape {
  int depth = 50;
  int width = 64;         // channels of the stem and of layer1's 3x3 convolutions
  int classes = 1000;
  int image_size = 224;
  bool zero_init_residual = false;  // the last batch norm of each block starts at scale 0
  bool sync_bn = false;             // batch statistics over every data-parallel replica
  float label_smoothing = 0.0f;
  float bn_momentum = 0.1f;
  float bn_eps = 1e-5f;
};


// One convolution followed by batch norm: where its tensors are and its shape for a micro-batch.
struct ConvBn {
  std::string conv, bn;  // tensor name prefixes: "layer1.0.conv1", "layer1.0.bn1"
  Conv2dShape shape;     // N = 1 here; the stage sets the micro-batch
  bool relu = true;      // a ReLU follows (not on a block's last unit or the downsample)
};

// One residual block: 2 (basic) or 3 (bottleneck) units, and a downsample unit when the shape
// changes. Blocks are numbered 0.. over all layers, in order.
struct ResidualBlock {
  std::vector<ConvBn> units;
  bool downsample = false;
  ConvBn shortcut;  // when downsample
  int in_channels = 0, out_channels = 0, in_size = 0, out_size = 0;  // size: H = W
};

// The network for one image (N = 1): the stem, the blocks, and the head's width.
struct ResNetGraph {
  ConvBn stem;           // conv1 + bn1 (+ ReLU)
  Pool2dShape pool;      // 3x3 stride 2 pad 1, N = 1
  std::vector<ResidualBlock> blocks;
  int features = 0;      // channels into the average pool and fc
  int final_size = 0;    // spatial size before the average pool
};
ResNetGraph resnet_graph(const ResNetShape& shape);

ModelDescription resnet_description(const ResNetShape& shape);
// Forward multiply-adds x 2 of one image (convolutions and fc), the unit of resnet FLOPs.
double resnet_forward_flops(const ResNetShape& shape);

class ResNetFamily final : public ModelFamily {
 public:
  explicit ResNetFamily(const ResNetShape& shape);
  const ResNetShape& shape() const { return shape_; }
  const ResNetGraph& graph() const { return graph_; }
  std::string name() const override { return "resnet"; }
  nlohmann::json shape_record() const override;
  std::string summary() const override;
  const ModelDescription& description() const override { return description_; }
  int64_t parameter_count() const override;
  void check_split(int tensors, int stages) const override;
  void initialize(float* params, float* buffers, const ParameterLayout& layout,
                  uint64_t seed) const override;
  std::vector<BatchField> batch_fields(int micro_batch) const override;
  std::string sample_unit() const override { return "images"; }
  int units_per_sample() const override { return 1; }
  DType activation_storage() const override { return policy().storage; }
  size_t weight_copy_bytes(const ParameterLayout& layout) const override;
  double training_flops_per_sample() const override { return 3.0 * resnet_forward_flops(shape_); }
  size_t activation_bytes(const ParameterLayout& layout, int micro_batch,
                          int slots) const override;
  bool synchronized_statistics() const override { return shape_.sync_bn; }
  std::vector<std::string> metric_names() const override { return {"val_top1", "val_top5"}; }
  std::string evaluation_summary(double loss, const std::vector<double>& metrics) const override;
  std::unique_ptr<StageModel> make_stage(const ParameterLayout& layout,
                                         const StageContext& context) const override;
  // torchvision's state dict (resnet_weights.cpp).
  std::string export_weights(const std::string& path, const float* params, const float* buffers,
                             const ExportOptions& options) const override;
  std::string import_weights(const std::string& path, bool directory, float* params,
                             float* buffers) const override;

 private:
  ResNetShape shape_;
  ResNetGraph graph_;
  ModelDescription description_;
};

}  // namespace sg
