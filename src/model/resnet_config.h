#pragma once
// ResNet's section of the job spec (model_config.h): its keys, their defaults and checks.
#include <span>
#include <string>
#include <vector>
#include <string_view>

#include "config/job_spec_keys.h"
#include "config/model_config.h"

namespace sg {

struct ResNetConfig final : ModelConfig {
  static constexpr std::string_view kArch = "resnet";

  int depth = 50;    // 18 | 34 | 50 | 101 | 152, or 10 | 14 (small variants)
  int width = 64;    // channels of the stem (torchvision: 64)
  int classes = 1000;
  int image_size = 224;
  bool zero_init_residual = false;  // each block's last batch norm starts at scale 0
  bool sync_bn = false;             // batch statistics over every data-parallel replica
  double label_smoothing = 0.0;

  std::unique_ptr<ModelConfig> clone() const override {
    return std::make_unique<ResNetConfig>(*this);
  }
  std::string_view arch() const override { return kArch; }
  ModelData data() const override;
  void validate(const JobSpec& spec, const SpecChecks& check) const override;
  void validate_split(const JobSpec& spec, const SpecChecks& check) const override;
  std::unique_ptr<ModelFamily> make_family(const JobSpec& spec) const override;
};

std::span<const JobSpecKey> resnet_keys();

// Residual blocks per layer and the block kind for a depth; SpecError for other depths.
struct ResNetPlan {
  bool bottleneck = false;
  std::vector<int> blocks_per_layer;  // 4 layers
};
ResNetPlan resnet_plan(int depth);

// Why a ResNet of `depth` does not split `tensors`-way by tensor and `stages`-way by pipeline,
// or "" when it does (ResNetConfig::validate_split and ResNetFamily::check_split).
std::string resnet_split_problem(int depth, int tensors, int stages);

}  // namespace sg
