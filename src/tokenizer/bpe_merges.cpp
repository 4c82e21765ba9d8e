#include "tokenizer/bpe_merges.h"

#include <algorithm>
#include <climits>
#include <queue>

namespace sg {
namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finaliser: ids are small and dense, spread them
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

void BpeMergeTable::reserve(size_t merges) {
  size_t capacity = 16;
  while (capacity < 2 * merges) capacity *= 2;
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(capacity, Slot{});
  size_ = 0;
  for (const Slot& s : old)
    if (s.key != kEmpty) insert(static_cast<int32_t>(s.key >> 32), static_cast<int32_t>(s.key), s.merge);
}

bool BpeMergeTable::insert(int32_t left, int32_t right, BpeMerge merge) {
  if (2 * (size_ + 1) > slots_.size()) reserve(std::max<size_t>(16, 2 * (size_ + 1)));
  const uint64_t key = key_of(left, right);
  const size_t mask = slots_.size() - 1;
  for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
    if (slots_[i].key == key) return false;
    if (slots_[i].key == kEmpty) {
      slots_[i] = Slot{key, merge};
      ++size_;
      return true;
    }
  }
}

const BpeMerge* BpeMergeTable::find(int32_t left, int32_t right) const {
  if (slots_.empty()) return nullptr;
  const uint64_t key = key_of(left, right);
  const size_t mask = slots_.size() - 1;
  for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
    if (slots_[i].key == key) return &slots_[i].merge;
    if (slots_[i].key == kEmpty) return nullptr;
  }
}

void bpe_merge_word_reference(const BpeMergeTable& merges, std::vector<int32_t>& word) {
  while (word.size() > 1) {
    // bigram = min(pairs, key=rank)
    const BpeMerge* best = nullptr;
    int32_t first = 0, second = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      const BpeMerge* m = merges.find(word[i], word[i + 1]);
      if (m != nullptr && (best == nullptr || m->rank < best->rank)) {
        best = m;
        first = word[i];
        second = word[i + 1];
      }
    }
    if (best == nullptr) break;
    // Join every (first, second) left to right, as bpe() does.
    std::vector<int32_t> joined;
    joined.reserve(word.size());
    for (size_t i = 0; i < word.size();) {
      if (i + 1 < word.size() && word[i] == first && word[i + 1] == second) {
        joined.push_back(best->merged);
        i += 2;
      } else {
        joined.push_back(word[i]);
        ++i;
      }
    }
    word.swap(joined);
  }
}

void bpe_merge_word(const BpeMergeTable& merges, std::vector<int32_t>& word) {
  const int n = static_cast<int>(word.size());
  if (n < 2) return;
  if (n <= 12) {  // the common case: a short word, where the plain loop is fastest
    bpe_merge_word_reference(merges, word);
    return;
  }
  // Doubly linked symbols; a heap of candidate pairs ordered by (rank, position). A rank names
  // one pair, so all occurrences of the lowest pair come out together, left to right, like the
  // reference's join loop. Pairs a join creates are held back until that rank is done, because
  // the reference also looks for the next pair only after joining every occurrence.
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank;
    int position;  // index of the left symbol
    int32_t left, right;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : position > o.position;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto candidate_at = [&](int i, std::vector<Candidate>& out) {
    const int j = next[i];
    if (j < 0) return;
    if (const BpeMerge* m = merges.find(word[i], word[j]))
      out.push_back(Candidate{m->rank, i, word[i], word[j]});
  };
  {
    std::vector<Candidate> initial;
    for (int i = 0; i + 1 < n; ++i) candidate_at(i, initial);
    for (const Candidate& c : initial) heap.push(c);
  }
  std::vector<Candidate> held;
  while (!heap.empty()) {
    const int32_t rank = heap.top().rank;
    held.clear();
    while (!heap.empty() && heap.top().rank == rank) {
      const Candidate c = heap.top();
      heap.pop();
      const int i = c.position;
      // Stale: a join since this pair was pushed changed or removed one of its symbols.
      if (word[i] != c.left || next[i] < 0 || word[next[i]] != c.right) continue;
      const int j = next[i];
      word[i] = merges.find(c.left, c.right)->merged;
      word[j] = -1;  // removed
      next[i] = next[j];
      if (next[j] >= 0) prev[next[j]] = i;
      if (prev[i] >= 0) candidate_at(prev[i], held);
      candidate_at(i, held);
    }
    for (const Candidate& c : held) heap.push(c);
  }
  int out = 0;
  for (int i = 0; i >= 0; i = next[i]) word[out++] = word[i];
  word.resize(out);
}

}  // namespace sg
