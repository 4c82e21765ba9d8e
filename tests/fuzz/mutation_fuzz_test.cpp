// Mutation fuzzing of the parsers that read user files (docs/architecture.md, "Testing"): thousands
// of randomly damaged inputs — flipped, inserted, deleted and truncated bytes of a valid file —
// must each be accepted or rejected with the module's own error type (SpecError for job specs,
// RunError for shards, safetensors files and checkpoints), never crash, hang or throw anything
// else. Deterministic seeds, so a failure reproduces.
#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "config/load_job_spec.h"
#include "data/token_shard.h"
#include "temp_dir.h"
#include "test_files.h"
#include "util/error.h"
#include "util/rng.h"

namespace {

std::string mutate(const std::string& input, sg::Rng& rng) {
  std::string s = input;
  const int edits = 1 + static_cast<int>(rng.next_u64() % 4);
  for (int e = 0; e < edits && !s.empty(); ++e) {
    const size_t at = rng.next_u64() % s.size();
    switch (rng.next_u64() % 5) {
      case 0: s[at] = static_cast<char>(rng.next_u64()); break;            // replace
      case 1: s[at] ^= static_cast<char>(1 << (rng.next_u64() % 8)); break;  // flip a bit
      case 2: s.insert(at, 1, static_cast<char>(rng.next_u64())); break;   // insert
      case 3: s.erase(at, 1 + rng.next_u64() % 8); break;                   // delete
      case 4: s.resize(at); break;                                          // truncate
    }
  }
  return s;
}

using sg::test::read_file;
using sg::test::write_file;

const char* kJob = R"(name: fuzz
seed: 3
model: {arch: gpt2, n_layer: 2, n_head: 2, n_embd: 32, context: 16, vocab: 64}
data: {dataset: synthetic, synthetic_train_tokens: 20000}
optim: {lr: 1.0e-2, min_lr: 1.0e-3, warmup_steps: 3, betas: [0.9, 0.95]}
train: {steps: 20, global_batch: 8, micro_batch: 4}
eval: {every: 5, steps: 2}
checkpoint: {every: 10, keep: 3, resume: auto}
log: {every: 1}
)";

}  // namespace

TEST_CASE("job spec parser: 3000 mutated specs are accepted or refused with SpecError") {
  sg::Rng rng(11);
  int accepted = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string yaml = mutate(kJob, rng);
    try {
      sg::parse_job_spec(yaml, "fuzz.yaml", {});
      ++accepted;
    } catch (const sg::SpecError& e) {
      ++refused;
      // One line, located in the file.
      const std::string message = e.what();
      REQUIRE_MESSAGE(message.find('\n') == std::string::npos, message);
      REQUIRE_MESSAGE(message.rfind("fuzz.yaml", 0) == 0, message);
    }
  }
  MESSAGE(accepted << " accepted, " << refused << " refused");
  CHECK(refused > 1000);  // the mutations do break most specs
}

TEST_CASE("token shard reader: mutated shards are read or refused with RunError") {
  sg::test::TempDir dir;
  std::vector<uint16_t> tokens(500);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<uint16_t>(i * 7 % 64);
  sg::write_token_shard(dir / "good.bin", tokens.data(), tokens.size());
  const std::string good = read_file(dir / "good.bin");
  sg::Rng rng(12);
  int refused = 0;
  for (int i = 0; i < 500; ++i) {
    write_file(dir / "shard.bin", mutate(good, rng));
    try {
      sg::TokenShard shard(dir / "shard.bin");
      REQUIRE(shard.size() * 2 + 1024 == read_file(dir / "shard.bin").size());
    } catch (const sg::RunError& e) {
      ++refused;
      REQUIRE(std::string(e.what()).find("shard.bin") != std::string::npos);
    }
  }
  CHECK(refused > 100);
}

TEST_CASE("safetensors reader: mutated files are read or refused with RunError") {
  sg::test::TempDir dir;
  const std::vector<float> w = {1, 2, 3, 4, 5, 6};
  const std::vector<int32_t> ids = {7, 8, 9};
  sg::write_safetensors(dir / "good.safetensors",
                        {{"w", sg::DType::F32, {2, 3}, w.data()},
                         {"ids", sg::DType::I32, {3}, ids.data()}},
                        {{"note", "fuzz"}});
  const std::string good = read_file(dir / "good.safetensors");
  sg::Rng rng(13);
  int refused = 0;
  for (int i = 0; i < 2000; ++i) {
    write_file(dir / "t.safetensors", mutate(good, rng));
    try {
      sg::SafetensorsFile file(dir / "t.safetensors");
      for (const auto& name : file.names()) {
        const sg::TensorRef& t = file.get(name);
        // Every tensor handed out lies inside the file.
        REQUIRE(sg::element_count(t.shape) * static_cast<int64_t>(sg::dtype_size(t.dtype)) <=
                static_cast<int64_t>(read_file(dir / "t.safetensors").size()));
      }
    } catch (const sg::RunError& e) {
      ++refused;
      REQUIRE(std::string(e.what()).find("t.safetensors") != std::string::npos);
    }
  }
  CHECK(refused > 500);
}
