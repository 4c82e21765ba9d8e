#pragma once
// A flat sequence of tokens that samplers read windows from: shards on disk concatenated in name
// order, or a vector in memory (synthetic data, tests). Every read checks its range and that each
// token is below the model's vocabulary, so a shard tokenized for another vocabulary fails with
// the shard and offset named instead of silently indexing past the embedding.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/token_shard.h"

namespace sg {

class TokenSource {
 public:
  virtual ~TokenSource() = default;
  virtual int64_t size() const = 0;  // tokens
  // Copies tokens [start, start + count) into out (count,), widened to int32 for the kernels.
  virtual void read(int64_t start, int64_t count, int32_t* out) const = 0;
  // One line for logs: what the tokens are and how many.
  virtual std::string describe() const = 0;
};

// The shards a glob matches, sorted by name and concatenated. A glob matching nothing is a
// RunError naming the pattern.
class ShardedTokens final : public TokenSource {
 public:
  ShardedTokens(const std::string& pattern, int vocab);

  int64_t size() const override { return offsets_.back(); }
  void read(int64_t start, int64_t count, int32_t* out) const override;
  std::string describe() const override;
  const std::vector<TokenShard>& shards() const { return shards_; }

 private:
  std::string pattern_;
  int vocab_;
  std::vector<TokenShard> shards_;
  std::vector<int64_t> offsets_;  // (shards + 1,): first token of each shard, then the total
};

class InMemoryTokens final : public TokenSource {
 public:
  InMemoryTokens(std::vector<uint16_t> tokens, int vocab, std::string description);

  int64_t size() const override { return static_cast<int64_t>(tokens_.size()); }
  void read(int64_t start, int64_t count, int32_t* out) const override;
  std::string describe() const override { return description_; }
  const std::vector<uint16_t>& tokens() const { return tokens_; }

 private:
  std::vector<uint16_t> tokens_;
  int vocab_;
  std::string description_;
};

}  // namespace sg
