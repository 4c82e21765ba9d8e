#pragma once
// Token shards in llm.c's format (docs/architecture.md, "Data"), so shards made by llm.c's scripts
// load as they are:
//   int32 header[256]: header[0] = 20240520 (magic), header[1] = 1 (version), header[2] = tokens
//   uint16 tokens[header[2]]
// little-endian, nothing after the tokens.
#include <cstddef>
#include <cstdint>
#include <string>

#include "data/file_io.h"

namespace sg {

constexpr int32_t kTokenShardMagic = 20240520;
constexpr int32_t kTokenShardVersion = 1;
constexpr size_t kTokenShardHeaderBytes = 256 * sizeof(int32_t);
// Version 1 stores uint16 ids: a vocabulary of more tokens than this cannot be written (the
// writers refuse it before the first shard, see prepare/dataset_writer.h).
constexpr int64_t kTokenShardMaxVocab = 65536;

// A shard mapped read-only. The constructor validates the header and the file size and throws
// sg::RunError naming the file and what to do.
class TokenShard {
 public:
  explicit TokenShard(const std::string& path);

  const std::string& path() const { return file_.path(); }
  int64_t size() const { return count_; }                  // tokens
  const uint16_t* tokens() const { return tokens_; }       // (size(),)

 private:
  MappedFile file_;
  int64_t count_ = 0;
  const uint16_t* tokens_ = nullptr;
};

// Writes a shard of n tokens atomically (temp file + rename): a reader sees the whole shard or
// none. tokens is (n,); n must fit the int32 header.
void write_token_shard(const std::string& path, const uint16_t* tokens, size_t n);

}  // namespace sg
