// train.recompute: the backward rebuilds activations instead of keeping them, so the same job
// with none, selective and full gives bitwise the same losses and weights, with less activation
// memory (what `plan` reports and the stage allocates).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include "model/model_family.h"
#include "model/parameter_layout.h"
#include "train/trainer.h"
#include "train_test_support.h"
#include "util/error.h"

using namespace sg::testing;

namespace {

const char* kResNetJob = R"(
name: rn-recompute
seed: 3
model: {arch: resnet, depth: 18, width: 4, classes: 10, image_size: 32}
data: {dataset: synthetic, synthetic_images: 500}
optim: {name: sgd, lr: 0.05, momentum: 0.9, weight_decay: 1.0e-4, grad_clip: 1.0}
train: {steps: 4, global_batch: 8, micro_batch: 4}
eval: {every: 4, steps: 1}
devices: {backend: cpu, processes: 1, threads: 2}
checkpoint: {every: 4}
)";

// Runs the job with each recompute mode and checks they agree bitwise; returns the activation
// bytes of each mode's stage.
std::vector<size_t> check_modes(const std::string& job_text, std::vector<std::string> sets,
                                const std::vector<std::string>& modes) {
  std::vector<std::string> first_lines, first_files;
  std::vector<size_t> bytes;
  for (const std::string& mode : modes) {
    sg::test::TempDir dir;
    std::vector<std::string> s = sets;
    s.push_back("train.recompute=" + mode);
    s.push_back("log.dir=" + dir.path());
    const sg::JobSpec spec = sg::parse_job_spec(job_text, "<recompute job>", s);
    auto family = sg::make_model_family(spec);
    const sg::ParameterLayout layout(family->description());
    bytes.push_back(family->activation_bytes(layout, spec.train.micro_batch, 1));
    sg::run_training(spec, quiet_options());
    const auto lines = step_lines(dir.path());
    const std::string last = fmt::format("{}/checkpoints/step_{:08d}/", dir.path(), spec.train.steps);
    const std::string files = read_file(last + "model.safetensors") + read_file(last + "optimizer.safetensors");
    REQUIRE(!lines.empty());
    if (first_lines.empty()) {
      first_lines = lines;
      first_files = {files};
      continue;
    }
    CHECK_MESSAGE(lines == first_lines, "recompute " << mode << " changed the losses");
    CHECK_MESSAGE(files == first_files[0], "recompute " << mode << " changed the weights");
  }
  return bytes;
}

}  // namespace

TEST_CASE("GPT-2: recompute none, selective and full train bitwise alike, in less memory") {
  const auto bytes = check_modes(kTinyJob, {"train.steps=4", "checkpoint.every=4", "eval.every=4"},
                                 {"none", "selective", "full"});
  REQUIRE(bytes.size() == 3);
  MESSAGE("activation bytes none " << bytes[0] << ", selective " << bytes[1] << ", full "
                                   << bytes[2]);
  CHECK(bytes[1] < bytes[0]);
  CHECK(bytes[2] < bytes[1]);
}

TEST_CASE("ResNet: recompute full trains bitwise like none, in less memory") {
  const auto bytes = check_modes(kResNetJob, {}, {"none", "full"});
  REQUIRE(bytes.size() == 2);
  MESSAGE("activation bytes none " << bytes[0] << ", full " << bytes[1]);
  CHECK(bytes[1] < bytes[0]);
}

TEST_CASE("ResNet refuses selective recompute, naming what to use") {
  sg::test::TempDir dir;
  CHECK_THROWS_WITH_AS(sg::parse_job_spec(kResNetJob, "<job>", {"train.recompute=selective"}),
                       doctest::Contains("use full"), sg::SpecError);
}
