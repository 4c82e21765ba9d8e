#pragma once
// Which training window each sequence reads (docs/architecture.md, "The virtual mesh" and "Data").
// The token stream is cut into num_windows windows of seq_len + 1 tokens starting at multiples of
// seq_len (consecutive windows share one token, so every token except the first is a target exactly
// once per epoch). Sequence i of the run reads window perm_epoch(i % num_windows) of epoch i /
// num_windows, where perm_epoch is a keyed pseudo-random bijection computed in O(1) memory. So the
// data order is a pure function of (seed, sequence index): resuming needs one counter, and it does
// not matter which process or virtual replica asks for a sequence.
//
// Suggested indexing for the trainer: sequence = step * global_batch + replica *
// batch_per_replica + micro_step * micro_batch + row, which is independent of the physical layout.
#include <cstdint>

namespace sg {

class TokenSource;

class SequenceSampler {
 public:
  SequenceSampler(int64_t num_tokens, int seq_len, uint64_t seed);

  int64_t num_windows() const { return num_windows_; }
  int seq_len() const { return seq_len_; }
  uint64_t seed() const { return seed_; }

  // First token of the window sequence `sequence_index` reads; the window is seq_len + 1 tokens.
  int64_t window_start(uint64_t sequence_index) const;
  // The window (in [0, num_windows)) that position `position` of epoch `epoch` reads.
  int64_t window_of(uint64_t epoch, int64_t position) const;

 private:
  int64_t num_windows_;
  int seq_len_;
  uint64_t seed_;
  int half_bits_;  // the Feistel network permutes [0, 4^half_bits) >= num_windows
};

// Fills inputs (count, seq_len) and targets (count, seq_len) with sequences first_sequence ..
// first_sequence + count - 1; targets are the inputs shifted left by one token.
void fill_batch(int32_t* inputs, int32_t* targets, const TokenSource& source,
                const SequenceSampler& sampler, uint64_t first_sequence, int count, int seq_len);

}  // namespace sg
