// SequenceSampler: each epoch is a permutation of the windows, determined by (seed, index) only.
#include <doctest/doctest.h>

#include <set>
#include <vector>

#include "data/sequence_sampler.h"
#include "data/token_source.h"
#include "util/error.h"

using namespace sg;

namespace {

std::vector<int64_t> epoch_starts(const SequenceSampler& s, uint64_t epoch) {
  std::vector<int64_t> starts;
  for (int64_t i = 0; i < s.num_windows(); ++i)
    starts.push_back(s.window_start(epoch * s.num_windows() + i));
  return starts;
}

}  // namespace

TEST_CASE("windows: seq_len + 1 tokens at multiples of seq_len") {
  CHECK(SequenceSampler(101, 10, 1).num_windows() == 10);
  CHECK(SequenceSampler(100, 10, 1).num_windows() == 9);  // the 10th window would need token 100
  CHECK(SequenceSampler(11, 10, 1).num_windows() == 1);
  try {
    SequenceSampler(10, 10, 1);
    FAIL("expected an error");
  } catch (const RunError& e) {
    CHECK(std::string(e.what()).find("dataset has 10 tokens, fewer than seq_len+1") == 0);
  }
}

TEST_CASE("every epoch is a permutation of the windows, for many sizes") {
  for (int64_t windows : {1, 2, 3, 4, 5, 7, 16, 17, 100, 1000, 4097}) {
    const int seq_len = 8;
    SequenceSampler s(windows * seq_len + 1, seq_len, 42);
    REQUIRE(s.num_windows() == windows);
    for (uint64_t epoch : {0, 1, 5}) {
      std::set<int64_t> seen;
      for (int64_t start : epoch_starts(s, epoch)) {
        REQUIRE(start % seq_len == 0);
        REQUIRE(start >= 0);
        REQUIRE(start + seq_len + 1 <= windows * seq_len + 1);
        seen.insert(start);
      }
      CHECK(static_cast<int64_t>(seen.size()) == windows);  // each window exactly once
    }
  }
}

TEST_CASE("order depends on seed and epoch only") {
  SequenceSampler a(1000 * 4 + 1, 4, 7), b(1000 * 4 + 1, 4, 7), c(1000 * 4 + 1, 4, 8);
  CHECK(epoch_starts(a, 0) == epoch_starts(b, 0));   // same seed, same order
  CHECK(epoch_starts(a, 3) == epoch_starts(b, 3));
  CHECK(epoch_starts(a, 0) != epoch_starts(c, 0));   // different seed, different order
  CHECK(epoch_starts(a, 0) != epoch_starts(a, 1));   // epochs differ
  // a permutation, not the identity
  std::vector<int64_t> identity;
  for (int64_t i = 0; i < 1000; ++i) identity.push_back(i * 4);
  CHECK(epoch_starts(a, 0) != identity);
  // pure function of the index: asking out of order gives the same answers
  CHECK(a.window_start(123456) == b.window_start(123456));
  CHECK(a.window_start(1500) == epoch_starts(a, 1)[500]);
}

TEST_CASE("fill_batch gives inputs and targets shifted by one") {
  std::vector<uint16_t> data(41);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint16_t>(i);
  InMemoryTokens tokens(data, 100, "counting");
  const int T = 5;
  SequenceSampler s(tokens.size(), T, 3);
  REQUIRE(s.num_windows() == 8);
  std::vector<int32_t> inputs(3 * T), targets(3 * T);
  fill_batch(inputs.data(), targets.data(), tokens, s, 6, 3, T);
  for (int row = 0; row < 3; ++row) {
    const int64_t start = s.window_start(6 + row);
    for (int t = 0; t < T; ++t) {
      CHECK(inputs[row * T + t] == start + t);
      CHECK(targets[row * T + t] == start + t + 1);
    }
  }
  CHECK_THROWS_AS(fill_batch(inputs.data(), targets.data(), tokens, s, 0, 1, T + 1), RunError);
}
