#include "data/token_source.h"

#include <glob.h>

#include <algorithm>

#include "util/error.h"

namespace sg {
namespace {

void check_range(const TokenSource& source, int64_t start, int64_t count) {
  if (start < 0 || count < 0 || start > source.size() - count)
    throw RunError(source.describe() + ": read of tokens [" + std::to_string(start) + ", " +
                   std::to_string(start + count) + ") is out of range (" +
                   std::to_string(source.size()) + " tokens)");
}

// Widens tokens into out and returns the index of the first token >= vocab, or n if none.
size_t widen_checked(int32_t* out, const uint16_t* tokens, size_t n, int vocab) {
  uint16_t max_token = 0;
  for (size_t i = 0; i < n; ++i) {  // branch-free so the loop vectorises; locate only on failure
    out[i] = tokens[i];
    max_token = std::max(max_token, tokens[i]);
  }
  if (static_cast<int>(max_token) < vocab) return n;
  return static_cast<size_t>(
      std::find_if(tokens, tokens + n, [&](uint16_t t) { return t >= vocab; }) - tokens);
}

std::string bad_token_message(const std::string& where, int64_t offset, int token, int vocab) {
  return where + ": token " + std::to_string(token) + " at offset " + std::to_string(offset) +
         " is outside the model's vocabulary (model.vocab = " + std::to_string(vocab) +
         "); the data was tokenized for another vocabulary: re-run prepare or set model.vocab";
}

}  // namespace

ShardedTokens::ShardedTokens(const std::string& pattern, int vocab)
    : pattern_(pattern), vocab_(vocab) {
  glob_t found{};
  const int rc = ::glob(pattern.c_str(), GLOB_ERR, nullptr, &found);
  std::vector<std::string> paths;
  if (rc == 0)
    for (size_t i = 0; i < found.gl_pathc; ++i) paths.emplace_back(found.gl_pathv[i]);
  ::globfree(&found);
  if (rc == GLOB_NOMATCH || (rc == 0 && paths.empty()))
    throw RunError(pattern + ": no token shards match this pattern; check data.train / data.val "
                   "and run `singularity prepare` to make the shards");
  if (rc != 0) throw RunError(pattern + ": cannot list the token shards (read error)");
  std::sort(paths.begin(), paths.end());  // glob sorts by locale; we want byte order everywhere
  offsets_.push_back(0);
  shards_.reserve(paths.size());
  for (const auto& path : paths) {
    shards_.emplace_back(path);
    offsets_.push_back(offsets_.back() + shards_.back().size());
  }
}

void ShardedTokens::read(int64_t start, int64_t count, int32_t* out) const {
  check_range(*this, start, count);
  // The shard holding `start`: the last one whose first token is <= start.
  size_t s = static_cast<size_t>(
      std::upper_bound(offsets_.begin(), offsets_.end(), start) - offsets_.begin() - 1);
  while (count > 0) {
    while (offsets_[s + 1] == start) ++s;  // skip empty shards
    const int64_t in_shard = start - offsets_[s];
    const int64_t n = std::min(count, offsets_[s + 1] - start);
    const size_t bad = widen_checked(out, shards_[s].tokens() + in_shard, n, vocab_);
    if (bad < static_cast<size_t>(n))
      throw RunError(bad_token_message(shards_[s].path(), in_shard + static_cast<int64_t>(bad),
                                       shards_[s].tokens()[in_shard + bad], vocab_));
    out += n;
    start += n;
    count -= n;
  }
}

std::string ShardedTokens::describe() const {
  return pattern_ + " (" + std::to_string(shards_.size()) + " shard" +
         (shards_.size() == 1 ? "" : "s") + ", " + std::to_string(size()) + " tokens)";
}

InMemoryTokens::InMemoryTokens(std::vector<uint16_t> tokens, int vocab, std::string description)
    : tokens_(std::move(tokens)), vocab_(vocab), description_(std::move(description)) {}

void InMemoryTokens::read(int64_t start, int64_t count, int32_t* out) const {
  check_range(*this, start, count);
  const size_t bad = widen_checked(out, tokens_.data() + start, count, vocab_);
  if (bad < static_cast<size_t>(count))
    throw RunError(bad_token_message(description_, start + static_cast<int64_t>(bad),
                                     tokens_[start + bad], vocab_));
}

}  // namespace sg
