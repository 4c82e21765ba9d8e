#pragma once
// Token sequences as micro-batches of (tokens, targets), both (B, T) int32: sample i is the
// sequence the SequenceSampler assigns to i.
#include <memory>

#include "data/batch_source.h"
#include "data/sequence_sampler.h"
#include "data/token_source.h"

namespace sg {

class TokenBatchSource final : public BatchSource {
 public:
  TokenBatchSource(std::unique_ptr<TokenSource> tokens, const SequenceSampler& sampler)
      : tokens_(std::move(tokens)), sampler_(sampler) {}
  void fill_rows(MicroBatch& batch, int row, int count, uint64_t first) override {
    const size_t at = static_cast<size_t>(row) * sampler_.seq_len();
    fill_batch(batch.data<int32_t>(0) + at, batch.data<int32_t>(1) + at, *tokens_, sampler_,
               first, count, sampler_.seq_len());
  }
  const TokenSource& tokens() const { return *tokens_; }

 private:
  std::unique_ptr<TokenSource> tokens_;
  SequenceSampler sampler_;
};

}  // namespace sg
