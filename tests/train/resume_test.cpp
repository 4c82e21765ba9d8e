#include <doctest/doctest.h>

#include <filesystem>

#include "train/trainer.h"
#include "util/error.h"
#include "train_test_support.h"

using namespace sg::testing;

TEST_CASE("20 steps in one go equal 10 steps, stop, resume for 10: bitwise losses and weights") {
  sg::test::TempDir a_dir;
  const std::string a = a_dir.path();
  sg::test::TempDir b_dir;
  const std::string b = b_dir.path();
  const sg::TrainOptions quiet = quiet_options();
  auto ra = sg::run_training(tiny_job(a), quiet);
  CHECK(ra.last_step == 20);

  const sg::TrainOptions stop = quiet_options(10);
  auto rb1 = sg::run_training(tiny_job(b), stop);
  CHECK(rb1.last_step == 10);
  auto rb2 = sg::run_training(tiny_job(b), quiet);
  CHECK(rb2.first_step == 10);
  CHECK(rb2.last_step == 20);

  const auto la = step_lines(a), lb = step_lines(b);
  REQUIRE(la.size() == 20);
  CHECK(la == lb);
  for (const char* file : {"model.safetensors", "optimizer.safetensors"}) {
    const std::string fa = read_file(a + "/checkpoints/step_00000020/" + file);
    const std::string fb = read_file(b + "/checkpoints/step_00000020/" + file);
    REQUIRE(!fa.empty());
    CHECK_MESSAGE(fa == fb, file << " differs after resume");
  }
  // The loss actually moved: a resume test over a frozen model would prove nothing.
  CHECK(la.front() != la.back());
}

TEST_CASE("a corrupted newest checkpoint is skipped: auto resumes from the previous one") {
  sg::test::TempDir a_dir;
  const std::string a = a_dir.path();
  const sg::TrainOptions quiet = quiet_options();
  sg::run_training(tiny_job(a), quiet);
  const auto before = step_lines(a);
  const std::string reference = read_file(a + "/checkpoints/step_00000020/model.safetensors");

  // Flip one byte in the middle of the newest checkpoint's weights.
  const std::string victim = a + "/checkpoints/step_00000020/model.safetensors";
  {
    std::fstream f(victim, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<long>(reference.size() / 2));
    char c = reference[reference.size() / 2] ^ 0x40;
    f.write(&c, 1);
  }
  auto r = sg::run_training(tiny_job(a), quiet);
  CHECK(r.first_step == 10);  // fell back past the corrupt step 20
  CHECK(r.last_step == 20);
  CHECK(step_lines(a) == before);
  CHECK(read_file(a + "/checkpoints/step_00000020/model.safetensors") == reference);
}

namespace {

// A run directory holding a tiny job stopped (and checkpointed) at step 10.
struct StoppedRun {
  sg::test::TempDir dir;
  sg::TrainOptions opts = quiet_options(10);
  StoppedRun() {
    sg::run_training(tiny_job(dir.path()), opts);
  }
};

}  // namespace

TEST_CASE("resume: never starts over even when checkpoints exist") {
  StoppedRun run;
  const std::string a = run.dir.path();
  const sg::TrainOptions& opts = run.opts;
  auto r = sg::run_training(tiny_job(a, {"checkpoint.resume=never"}), opts);
  CHECK(r.first_step == 0);
  // The earlier run's checkpoints were moved aside, not deleted and not left to be resumed.
  int replaced = 0;
  for (const auto& entry : std::filesystem::directory_iterator(a)) {
    replaced += entry.path().filename().string().starts_with("checkpoints.replaced-");
  }
  CHECK(replaced == 1);
  auto again = sg::run_training(tiny_job(a), opts);  // auto: resumes the new run's step 10
  CHECK(again.first_step == 10);
}

TEST_CASE("a checkpoint written for another model is refused by name") {
  StoppedRun run;
  const std::string a = run.dir.path();
  const sg::TrainOptions& opts = run.opts;
  // Same tensor shapes, different heads: only the recorded model catches it.
  try {
    sg::run_training(tiny_job(a, {"model.n_head=4"}), opts);
    FAIL("resumed a checkpoint of another model");
  } catch (const sg::RunError& e) {
    CHECK(std::string(e.what()).find("model.n_head") != std::string::npos);
  }
  try {
    sg::run_training(tiny_job(a, {"model.n_layer=1"}), opts);
    FAIL("resumed a checkpoint with more layers");
  } catch (const sg::RunError& e) {
    CHECK(std::string(e.what()).find("model.n_layer") != std::string::npos);
  }
}
