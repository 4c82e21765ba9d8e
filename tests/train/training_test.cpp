#include <doctest/doctest.h>

#include <cmath>

#include "optim/lr_schedule.h"
#include "train/trainer.h"
#include "train_test_support.h"

using namespace sg::testing;

TEST_CASE("learning rate: linear warmup, cosine to min_lr at the last step") {
  sg::OptimSpec o;
  o.lr = 1.0;
  o.min_lr = 0.1;
  o.warmup_steps = 10;
  o.decay = sg::LrDecay::Cosine;
  CHECK(sg::learning_rate_at(o, 0, 110) == doctest::Approx(0.1));
  CHECK(sg::learning_rate_at(o, 9, 110) == doctest::Approx(1.0));
  CHECK(sg::learning_rate_at(o, 10, 110) == doctest::Approx(1.0));
  CHECK(sg::learning_rate_at(o, 10 + 99 / 2.0, 110) == doctest::Approx(0.55).epsilon(0.02));
  CHECK(sg::learning_rate_at(o, 109, 110) == doctest::Approx(0.1));
  o.decay = sg::LrDecay::Linear;
  CHECK(sg::learning_rate_at(o, 109, 110) == doctest::Approx(0.1));
  o.decay = sg::LrDecay::Constant;
  CHECK(sg::learning_rate_at(o, 100, 110) == doctest::Approx(1.0));
}

TEST_CASE("virtual data replicas equal gradient accumulation on one replica, bitwise") {
  // data=2 x micro 4 and data=1 x micro 4 x 2 micro-steps see the same sequences in the same
  // order, so the mathematics (and, in this order, the bits) agree.
  sg::test::TempDir a_dir;
  const std::string a = a_dir.path();
  sg::test::TempDir b_dir;
  const std::string b = b_dir.path();
  const sg::TrainOptions quiet = quiet_options();
  sg::run_training(tiny_job(a, {"parallel.data=2", "train.steps=6"}), quiet);
  sg::run_training(tiny_job(b, {"parallel.data=1", "train.steps=6"}), quiet);
  CHECK(step_lines(a) == step_lines(b));
  CHECK(step_lines(a).size() == 6);
}

TEST_CASE("a tiny GPT learns the synthetic language: val loss falls towards the optimum") {
  sg::test::TempDir a_dir;
  const std::string a = a_dir.path();
  const sg::TrainOptions quiet = quiet_options();
  auto r = sg::run_training(tiny_job(a, {"train.steps=60", "checkpoint.every=0"}), quiet);
  REQUIRE(r.first_val_loss);
  REQUIRE(r.last_val_loss);
  REQUIRE(r.best_possible_val_loss);
  MESSAGE("val loss " << *r.first_val_loss << " -> " << *r.last_val_loss << ", best possible "
                      << *r.best_possible_val_loss);
  CHECK(*r.first_val_loss == doctest::Approx(std::log(64.0)).epsilon(0.1));
  CHECK(*r.last_val_loss < 0.75 * *r.first_val_loss);
  CHECK(*r.last_val_loss > *r.best_possible_val_loss - 0.05);
  // metrics.jsonl has every step and the resolved spec was saved.
  CHECK(step_lines(a).size() == 60);
  CHECK(std::filesystem::exists(a + "/job.yaml"));
}
