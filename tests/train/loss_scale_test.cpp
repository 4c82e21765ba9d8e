// fp16's dynamic loss scaling (train/loss_scale.h), on the guarded test backend, which accepts
// fp16 and, as tensor cores would, turns a GEMM whose inputs leave fp16's range into infinities.
// The job is parsed as fp32 (the CPU backend refuses fp16) and switched to fp16 afterwards.
#include <doctest/doctest.h>

#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "guarded_backend.h"
#include "train/trainer.h"
#include "train_test_support.h"

using namespace sg::testing;

namespace {

sg::JobSpec fp16_job(const std::string& dir, double loss_scale, int steps) {
  sg::JobSpec spec = tiny_job(dir, {"train.steps=" + std::to_string(steps), "checkpoint.every=4",
                                    "eval.every=0"});
  spec.train.precision = sg::Precision::FP16;
  spec.train.loss_scale = loss_scale;
  return spec;
}

std::vector<nlohmann::json> steps_of(const std::string& dir) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_file(dir + "/metrics.jsonl"));
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("loss")) out.push_back(j);
  }
  return out;
}

std::string checkpoint_files(const std::string& dir, int step) {
  const std::string at = fmt::format("{}/checkpoints/step_{:08d}/", dir, step);
  return read_file(at + "model.safetensors") + read_file(at + "optimizer.safetensors");
}

}  // namespace

TEST_CASE("fp16 loss scaling is exact: a run that never overflows trains bitwise like fp32") {
  sg::test::TempDir fp32_dir, fp16_dir;
  sg::run_training(tiny_job(fp32_dir.path(), {"train.steps=8", "checkpoint.every=4", "eval.every=0"}),
                   quiet_options());
  sg::test::GuardedBackend guarded(sg::cpu_backend());
  sg::TrainOptions options = quiet_options();
  options.backend = &guarded;
  sg::run_training(fp16_job(fp16_dir.path(), 16, 8), options);
  CHECK(guarded.precision() == sg::Precision::FP16);
  const auto a = steps_of(fp32_dir.path()), b = steps_of(fp16_dir.path());
  REQUIRE(a.size() == 8);
  REQUIRE(b.size() == 8);
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i]["loss"] == b[i]["loss"]);
    CHECK(a[i]["grad_norm"] == b[i]["grad_norm"]);  // the unscaled norm
    CHECK(b[i]["loss_scale"] == 16.0);
    CHECK(b[i]["skipped"] == false);
  }
  CHECK(checkpoint_files(fp32_dir.path(), 8) == checkpoint_files(fp16_dir.path(), 8));
}

TEST_CASE("fp16 overflow: steps skipped and the scale halved until clean; checkpoints keep it") {
  sg::test::GuardedBackend guarded(sg::cpu_backend());
  sg::TrainOptions options = quiet_options();
  options.backend = &guarded;
  sg::test::TempDir whole_dir, part_dir;
  const std::string whole = whole_dir.path(), part = part_dir.path();
  sg::run_training(fp16_job(whole, 0x1p30, 12), options);
  const auto s = steps_of(whole);
  REQUIRE(s.size() == 12);
  int skipped = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i]["skipped"] == true) {
      ++skipped;
      CHECK(s[i]["grad_norm"].is_null());  // not finite
      if (i + 1 < s.size()) CHECK(s[i + 1]["loss_scale"] == s[i]["loss_scale"].get<double>() / 2);
    } else if (i + 1 < s.size()) {
      CHECK(s[i + 1]["loss_scale"] == s[i]["loss_scale"]);  // growth only after 1000 clean steps
    }
  }
  MESSAGE(skipped << " of 12 steps skipped; scale " << s.front()["loss_scale"] << " -> "
                  << s.back()["loss_scale"]);
  CHECK(skipped >= 2);
  CHECK(s.front()["skipped"] == true);
  CHECK(s.back()["skipped"] == false);  // it recovered
  CHECK(s.back()["loss"].get<double>() < s.front()["loss"].get<double>());
  // The checkpoint holds the scale the next step uses.
  const auto manifest = nlohmann::json::parse(read_file(whole + "/checkpoints/step_00000004/manifest.json"));
  REQUIRE(manifest.contains("state"));
  CHECK(manifest["state"]["loss_scale"].get<double>() == s[4]["loss_scale"].get<double>());

  // Stop at a checkpoint in the middle of it and resume: bitwise the uninterrupted run.
  options.stop_after = 4;
  sg::run_training(fp16_job(part, 0x1p30, 12), options);
  options.stop_after = 0;
  sg::run_training(fp16_job(part, 0x1p30, 12), options);
  const auto r = steps_of(part);
  REQUIRE(r.size() == 12);
  for (size_t i = 0; i < 12; ++i) {
    CHECK(r[i]["loss"] == s[i]["loss"]);
    CHECK(r[i]["loss_scale"] == s[i]["loss_scale"]);
  }
  CHECK(checkpoint_files(whole, 12) == checkpoint_files(part, 12));
}

TEST_CASE("train.loss_scale is fp16's, and a power of two") {
  CHECK_THROWS_WITH_AS(tiny_job("/tmp/x", {"train.loss_scale=1024"}),
                       doctest::Contains("train.precision: fp16"), sg::SpecError);
  CHECK_THROWS_WITH_AS(
      tiny_job("/tmp/x", {"devices.backend=cuda", "train.precision=fp16", "train.loss_scale=1000"}),
      doctest::Contains("power of two"), sg::SpecError);
}
