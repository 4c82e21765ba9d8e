#pragma once
// Byte-pair merges on token ids. GPT-2's bpe() works on strings: it repeatedly takes the
// adjacent pair with the lowest merge rank and joins every occurrence of it, left to right.
// Here symbols are vocabulary ids (every merge result is itself a token), which gives the same
// tokens with no string handling.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace sg {

struct BpeMerge {
  int32_t rank;    // line of vocab.bpe (0 = first merge), lower merges first
  int32_t merged;  // id of the joined token
};

// (left id, right id) -> merge, as an open-addressing table: looked up for every adjacent pair
// of every new word, so it is kept flat and small (a few MiB for GPT-2's 50,000 merges).
class BpeMergeTable {
 public:
  void reserve(size_t merges);
  // Returns false if (left, right) already has a merge: vocab.bpe lists each pair once.
  bool insert(int32_t left, int32_t right, BpeMerge merge);
  const BpeMerge* find(int32_t left, int32_t right) const;
  size_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t key = kEmpty;
    BpeMerge merge{};
  };
  static constexpr uint64_t kEmpty = ~0ull;
  static uint64_t key_of(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  std::vector<Slot> slots_;  // size a power of two, at most half full
  size_t size_ = 0;
};

// Merges symbols (byte-token ids on entry) in place into the word's final tokens, with GPT-2's
// semantics. Runs in O(n log n) with a heap, so a pathological 1 MB "word" (a base64 blob, a
// run of '=') costs no more than its size suggests.
void bpe_merge_word(const BpeMergeTable& merges, std::vector<int32_t>& symbols);

// GPT-2's loop transcribed literally, O(n^2): the reference the fast version is tested against.
void bpe_merge_word_reference(const BpeMergeTable& merges, std::vector<int32_t>& symbols);

}  // namespace sg
