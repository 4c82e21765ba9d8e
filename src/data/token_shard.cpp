#include "data/token_shard.h"

#include <cstring>
#include <limits>

#include "util/error.h"

namespace sg {

TokenShard::TokenShard(const std::string& path) : file_(path) {
  const size_t bytes = file_.size();
  const std::string fix = "; re-run `singularity prepare` to rebuild the shard";
  if (bytes < kTokenShardHeaderBytes)
    throw RunError(path + ": file is " + std::to_string(bytes) + " bytes, shorter than the " +
                   std::to_string(kTokenShardHeaderBytes) +
                   "-byte token shard header; the shard is truncated or not a shard" + fix);
  int32_t header[256];
  std::memcpy(header, file_.data(), sizeof header);
  if (header[0] != kTokenShardMagic)
    throw RunError(path + ": bad magic number " + std::to_string(header[0]) + " (expected " +
                   std::to_string(kTokenShardMagic) +
                   "); this is not an llm.c token shard" + fix);
  if (header[1] != kTokenShardVersion)
    throw RunError(path + ": token shard version " + std::to_string(header[1]) +
                   ", but this build reads version " + std::to_string(kTokenShardVersion) +
                   " (uint16 tokens)" + fix);
  if (header[2] < 0)
    throw RunError(path + ": header promises a negative token count (" +
                   std::to_string(header[2]) + "); the header is corrupt" + fix);
  count_ = header[2];
  const size_t expected = kTokenShardHeaderBytes + 2 * static_cast<size_t>(count_);
  if (bytes != expected)
    throw RunError(path + ": file is " + std::to_string(bytes) +
                   " bytes but its header promises " + std::to_string(count_) + " tokens (" +
                   std::to_string(expected) + " bytes); the shard is " +
                   (bytes < expected ? "truncated" : "longer than its header says") + fix);
  tokens_ = reinterpret_cast<const uint16_t*>(file_.data() + kTokenShardHeaderBytes);
}

void write_token_shard(const std::string& path, const uint16_t* tokens, size_t n) {
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max()))
    throw RunError(path + ": " + std::to_string(n) +
                   " tokens do not fit one shard's int32 count; split them over several shards");
  int32_t header[256] = {};
  header[0] = kTokenShardMagic;
  header[1] = kTokenShardVersion;
  header[2] = static_cast<int32_t>(n);
  AtomicFileWriter out(path);
  out.write(header, sizeof header);
  out.write(tokens, n * sizeof(uint16_t));
  out.commit();
}

}  // namespace sg
