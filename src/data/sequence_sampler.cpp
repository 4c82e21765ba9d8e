#include "data/sequence_sampler.h"

#include <cstring>
#include <vector>

#include "data/token_source.h"
#include "util/error.h"

namespace sg {
namespace {

// splitmix64's finaliser: a fast, well-mixed 64-bit bijection.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr int kFeistelRounds = 6;

// One pass of a balanced Feistel network over 2 * half_bits bits: a bijection for any round
// function, so cycle-walking it until the value lands below num_windows gives a bijection of
// [0, num_windows). The domain is under 4 * num_windows, so the expected walk is under 4 steps.
uint64_t feistel(uint64_t value, uint64_t key, int half_bits) {
  const uint64_t mask = (uint64_t{1} << half_bits) - 1;
  uint64_t left = value >> half_bits, right = value & mask;
  for (int round = 0; round < kFeistelRounds; ++round) {
    const uint64_t f = mix64(key ^ mix64(right + (static_cast<uint64_t>(round) << 56))) & mask;
    const uint64_t next_right = left ^ f;
    left = right;
    right = next_right;
  }
  return (left << half_bits) | right;
}

}  // namespace

SequenceSampler::SequenceSampler(int64_t num_tokens, int seq_len, uint64_t seed)
    : num_windows_(0), seq_len_(seq_len), seed_(seed), half_bits_(1) {
  if (seq_len <= 0) throw RunError("sequence sampler: seq_len must be positive, got " +
                                   std::to_string(seq_len));
  num_windows_ = num_tokens > 0 ? (num_tokens - 1) / seq_len : 0;
  if (num_windows_ == 0)
    throw RunError("dataset has " + std::to_string(num_tokens) + " tokens, fewer than seq_len+1 (" +
                   std::to_string(seq_len + 1) +
                   "); use more data or a shorter train.seq_len / model.context");
  while ((uint64_t{1} << (2 * half_bits_)) < static_cast<uint64_t>(num_windows_)) ++half_bits_;
}

int64_t SequenceSampler::window_of(uint64_t epoch, int64_t position) const {
  const uint64_t key = mix64(seed_ ^ mix64(epoch ^ 0x5eed5eed5eed5eedULL));
  uint64_t value = static_cast<uint64_t>(position);
  do {
    value = feistel(value, key, half_bits_);
  } while (value >= static_cast<uint64_t>(num_windows_));
  return static_cast<int64_t>(value);
}

int64_t SequenceSampler::window_start(uint64_t sequence_index) const {
  const uint64_t n = static_cast<uint64_t>(num_windows_);
  return window_of(sequence_index / n, static_cast<int64_t>(sequence_index % n)) * seq_len_;
}

void fill_batch(int32_t* inputs, int32_t* targets, const TokenSource& source,
                const SequenceSampler& sampler, uint64_t first_sequence, int count, int seq_len) {
  if (seq_len != sampler.seq_len())
    throw RunError("fill_batch: seq_len " + std::to_string(seq_len) +
                   " differs from the sampler's " + std::to_string(sampler.seq_len()));
  std::vector<int32_t> window(static_cast<size_t>(seq_len) + 1);  // (seq_len + 1,)
  for (int row = 0; row < count; ++row) {
    source.read(sampler.window_start(first_sequence + row), seq_len + 1, window.data());
    std::memcpy(inputs + static_cast<size_t>(row) * seq_len, window.data(),
                seq_len * sizeof(int32_t));
    std::memcpy(targets + static_cast<size_t>(row) * seq_len, window.data() + 1,
                seq_len * sizeof(int32_t));
  }
}

}  // namespace sg
