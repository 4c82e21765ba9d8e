#include "model/resnet_config.h"

#include <fmt/format.h>
#include <numeric>

#include "config/job_spec.h"
#include "config/spec_checks.h"
#include "util/error.h"

namespace sg {
namespace {

const JobSpecKey kKeys[] = {
    SG_MODEL_KEY(ResNetConfig, depth),
    SG_MODEL_KEY(ResNetConfig, width),
    SG_MODEL_KEY(ResNetConfig, classes),
    SG_MODEL_KEY(ResNetConfig, image_size),
    SG_MODEL_KEY(ResNetConfig, zero_init_residual),
    SG_MODEL_KEY(ResNetConfig, sync_bn),
    SG_MODEL_KEY(ResNetConfig, label_smoothing),
};

}  // namespace

std::span<const JobSpecKey> resnet_keys() { return kKeys; }

ModelData ResNetConfig::data() const {
  ModelData d;
  d.input = ModelInput::Images;
  d.classes = classes;
  d.image_size = image_size;
  return d;
}

void ResNetConfig::validate(const JobSpec& spec, const SpecChecks& check) const {
  if (depth != 10 && depth != 14 && depth != 18 && depth != 34 && depth != 50 && depth != 101 &&
      depth != 152)
    check.fail({"model.depth"}, fmt::format("model.depth must be 18, 34, 50, 101 or 152 (or 10 or "
                                            "14, small variants); got {}",
                                            depth));
  check.at_least("model.width", width, 1);
  check.at_least("model.classes", classes, 2);
  check.at_least("model.image_size", image_size, 32);
  check.at_most("model.width", width, 1024, "the widest stage has 32 x width channels");
  check.at_most("model.classes", classes, 1000000, "a documented limit");
  check.at_most("model.image_size", image_size, 4096, "a documented limit");
  if (!(label_smoothing >= 0 && label_smoothing < 1))
    check.fail({"model.label_smoothing"},
               fmt::format("model.label_smoothing must lie in [0, 1); got {}", label_smoothing));
  if (spec.train.recompute == Recompute::Selective)
    check.fail({"train.recompute", "model.arch"},
               "train.recompute selective recomputes a transformer's attention core, which a "
               "ResNet does not have; use full (each residual block recomputed from its input) "
               "or none");
  // Deterministic mode sums replicas in a fixed binary tree (src/parallel/deterministic_reduce.h).
  if (spec.train.deterministic && spec.devices.threads == 0)
    check.fail({"train.deterministic", "devices.threads"},
               "train.deterministic with model.arch resnet needs devices.threads set (the same "
               "for every layout compared): oneDNN's convolution and batch-norm reductions sum in "
               "an order that depends on the thread count");
  if (sync_bn && spec.train.deterministic)
    check.fail({"train.deterministic", "model.sync_bn"},
               "train.deterministic with model.sync_bn is not supported: synchronised statistics "
               "run a process's replicas as one batch, whose gradient cannot be summed in the "
               "canonical replica order; turn one of them off");
}

void ResNetConfig::validate_split(const JobSpec& spec, const SpecChecks& check) const {
  const std::string problem =
      resnet_split_problem(depth, spec.parallel.tensor, spec.parallel.pipeline);
  if (!problem.empty()) check.fail({"parallel.tensor", "parallel.pipeline"}, problem);
}

ResNetPlan resnet_plan(int depth) {
  switch (depth) {
    case 10: return {false, {1, 1, 1, 1}};
    case 14: return {true, {1, 1, 1, 1}};
    case 18: return {false, {2, 2, 2, 2}};
    case 34: return {false, {3, 4, 6, 3}};
    case 50: return {true, {3, 4, 6, 3}};
    case 101: return {true, {3, 4, 23, 3}};
    case 152: return {true, {3, 8, 36, 3}};
    default:
      throw SpecError("model.depth " + std::to_string(depth) +
                      " is not a ResNet depth; use 18, 34, 50, 101, 152 (or 10 and 14, small ones)");
  }
}

std::string resnet_split_problem(int depth, int tensors, int stages) {
  if (tensors > 1)
    return "parallel.tensor " + std::to_string(tensors) +
           ": a ResNet has no tensor parallelism (its convolutions are not split, and splitting "
           "them would move more data than it saves); use parallel.data and parallel.pipeline";
  const std::vector<int> layers = resnet_plan(depth).blocks_per_layer;
  const int blocks = std::accumulate(layers.begin(), layers.end(), 0);
  if (stages > blocks)
    return "parallel.pipeline " + std::to_string(stages) + " exceeds the " +
           std::to_string(blocks) + " residual blocks of ResNet-" + std::to_string(depth) +
           "; each stage needs a block";
  return "";
}

}  // namespace sg
