// ResNet through the trainer on synthetic images: it learns, a stopped and resumed run is bitwise
// the uninterrupted one, the checkpoint holds the running statistics and the SGD momentum under
// torchvision's names, and a checkpoint of another optimizer or model is refused by name.
#include <doctest/doctest.h>

#include <algorithm>

#include "checkpoint/safetensors.h"
#include "train/trainer.h"
#include "train_test_support.h"
#include "util/error.h"

using namespace sg::testing;

namespace {

const char* kResNetJob = R"(
name: rn-tiny
seed: 9
model: {arch: resnet, depth: 10, width: 8, classes: 10, image_size: 32, label_smoothing: 0.1}
data: {dataset: synthetic, synthetic_images: 2000}
optim: {name: sgd, lr: 0.05, min_lr: 0.001, warmup_steps: 3, momentum: 0.9, weight_decay: 1.0e-4, grad_clip: 0}
train: {steps: 20, global_batch: 16, micro_batch: 8}
eval: {every: 10, steps: 4}
devices: {backend: cpu, processes: 1, threads: 2}
checkpoint: {every: 10, keep: 3, resume: auto}
log: {every: 1}
)";

sg::JobSpec resnet_job(const std::string& dir, std::vector<std::string> sets = {}) {
  sets.push_back("log.dir=" + dir);
  return sg::parse_job_spec(kResNetJob, "<resnet job>", sets);
}

}  // namespace

TEST_CASE("a tiny ResNet learns the synthetic classes: val loss falls, top-1 rises") {
  sg::test::TempDir dir;
  auto r = sg::run_training(resnet_job(dir.path(), {"train.steps=40", "eval.every=40"}),
                            quiet_options());
  REQUIRE(r.first_val_loss);
  REQUIRE(r.last_val_loss);
  MESSAGE("val loss " << *r.first_val_loss << " -> " << *r.last_val_loss);
  CHECK(*r.last_val_loss < 0.5 * *r.first_val_loss);
  REQUIRE(r.val_metrics.size() == 2);
  CHECK(r.val_metrics[0].first == "val_top1");
  MESSAGE("top-1 " << r.val_metrics[0].second << ", top-5 " << r.val_metrics[1].second);
  CHECK(r.val_metrics[0].second > 0.5);
  CHECK(r.val_metrics[1].second >= r.val_metrics[0].second);
  CHECK(read_file(dir.path() + "/metrics.jsonl").find("\"images_per_s\"") != std::string::npos);
}

TEST_CASE("ResNet: 20 steps equal 10, stop, resume for 10, bitwise; the checkpoint's contents") {
  sg::test::TempDir a_dir, b_dir;
  const std::string a = a_dir.path(), b = b_dir.path();
  sg::run_training(resnet_job(a), quiet_options());
  sg::run_training(resnet_job(b), quiet_options(10));
  auto resumed = sg::run_training(resnet_job(b), quiet_options());
  CHECK(resumed.first_step == 10);
  CHECK(step_lines(a) == step_lines(b));
  CHECK(step_lines(a).size() == 20);
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    CHECK_MESSAGE(read_file(a + "/checkpoints/step_00000020/" + file) ==
                      read_file(b + "/checkpoints/step_00000020/" + file),
                  file << " differs after resume");
  }
  const sg::SafetensorsFile model(a + "/checkpoints/step_00000020/model.safetensors");
  CHECK(model.contains("conv1.weight"));
  CHECK(model.contains("layer2.0.downsample.1.running_var"));
  CHECK(model.contains("fc.bias"));
  // The running statistics moved from their initial 0 and 1.
  std::vector<float> mean(8);
  model.read_f32(mean.data(), "bn1.running_mean", {8});
  CHECK(std::any_of(mean.begin(), mean.end(), [](float m) { return m != 0.0f; }));
  const sg::SafetensorsFile optimizer(a + "/checkpoints/step_00000020/optimizer.safetensors");
  CHECK(optimizer.contains("momentum.conv1.weight"));
  CHECK_FALSE(optimizer.contains("momentum.bn1.running_mean"));  // buffers are not optimised
  CHECK_FALSE(optimizer.contains("m.conv1.weight"));
}

TEST_CASE("a ResNet checkpoint is refused by another optimizer, depth or model family") {
  sg::test::TempDir dir;
  const std::string a = dir.path();
  sg::run_training(resnet_job(a), quiet_options(10));
  const auto error_of = [&](std::vector<std::string> sets) {
    try {
      sg::run_training(resnet_job(a, std::move(sets)), quiet_options(12));
    } catch (const sg::RunError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK(error_of({"optim.name=adamw"}).find("holds sgd optimizer state") != std::string::npos);
  CHECK(error_of({"model.depth=18"}).find("model.depth") != std::string::npos);
  CHECK(error_of({"model.width=16"}).find("model.width") != std::string::npos);
}
