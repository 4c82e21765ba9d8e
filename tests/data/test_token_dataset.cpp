// open_token_dataset: synthetic splits and shard globs from a job spec.
#include <doctest/doctest.h>

#include <vector>

#include "model/gpt2_config.h"
#include "config/job_spec.h"
#include "data/markov_chain.h"
#include "data/token_dataset.h"
#include "temp_dir.h"
#include "util/error.h"

using namespace sg;

namespace {

std::vector<int32_t> all_tokens(const TokenSource& s) {
  std::vector<int32_t> out(s.size());
  s.read(0, s.size(), out.data());
  return out;
}

}  // namespace

TEST_CASE("synthetic: train and val differ, best loss is the chain's optimum on val") {
  JobSpec spec;
  spec.model.as<GPT2Config>().vocab = 500;
  spec.data.dataset = sg::DatasetKind::Synthetic;
  spec.data.synthetic_train_tokens = 20000;
  spec.data.synthetic_val_tokens = 5000;
  TokenSplits splits = open_token_dataset(spec);
  REQUIRE(splits.train);
  REQUIRE(splits.val);
  CHECK(splits.train->size() == 20000);
  CHECK(splits.val->size() == 5000);
  auto train = all_tokens(*splits.train), val = all_tokens(*splits.val);
  CHECK(std::vector<int32_t>(train.begin(), train.begin() + 5000) != val);

  REQUIRE(splits.best_val_loss.has_value());
  MarkovChain chain(500, spec.data.synthetic_order, spec.data.synthetic_branching, spec.seed);
  std::vector<uint16_t> val16(val.begin(), val.end());
  CHECK(*splits.best_val_loss == chain.optimal_loss(val16));
  CHECK(splits.description.find("synthetic") != std::string::npos);

  TokenSplits again = open_token_dataset(spec);  // same seed, same data
  CHECK(all_tokens(*again.train) == train);
  spec.seed += 1;
  CHECK(all_tokens(*open_token_dataset(spec).train) != train);
}

TEST_CASE("shard datasets open the train and val globs with the vocab check") {
  test::TempDir dir;
  std::vector<uint16_t> a = {1, 2, 3, 4}, b = {5, 6}, v = {7, 8, 9};
  write_token_shard(dir / "train_000.bin", a.data(), a.size());
  write_token_shard(dir / "train_001.bin", b.data(), b.size());
  write_token_shard(dir / "val_000.bin", v.data(), v.size());
  JobSpec spec;
  spec.data.dataset = sg::DatasetKind::Tokens;
  spec.data.train = dir / "train_*.bin";
  spec.data.val = dir / "val_*.bin";
  TokenSplits splits = open_token_dataset(spec);
  CHECK(all_tokens(*splits.train) == std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  CHECK(all_tokens(*splits.val) == std::vector<int32_t>{7, 8, 9});
  CHECK_FALSE(splits.best_val_loss.has_value());

  spec.model.as<GPT2Config>().vocab = 8;
  TokenSplits small = open_token_dataset(spec);
  std::vector<int32_t> out(3);
  CHECK_THROWS_AS(small.val->read(0, 3, out.data()), RunError);

  spec.data.val = dir / "nothing_*.bin";
  CHECK_THROWS_AS(open_token_dataset(spec), RunError);
  spec.data.val = "";
  CHECK_THROWS_AS(open_token_dataset(spec), SpecError);
  spec.data.dataset = sg::DatasetKind::ImageNet;
  CHECK_THROWS_AS(open_token_dataset(spec), SpecError);
}
