// Token shards: round trip, and each way a shard can be broken gives an error naming the file.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <vector>

#include "data/token_shard.h"
#include "temp_dir.h"
#include "util/error.h"

using namespace sg;

namespace {

void write_raw(const std::string& path, const std::vector<int32_t>& header, size_t token_bytes) {
  std::vector<char> bytes(kTokenShardHeaderBytes + token_bytes, 0);
  std::memcpy(bytes.data(), header.data(), header.size() * sizeof(int32_t));
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<long>(bytes.size()));
}

std::string error_of(const std::string& path) {
  try {
    TokenShard shard(path);
  } catch (const RunError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("write_token_shard and TokenShard round trip") {
  test::TempDir dir;
  const std::vector<uint16_t> tokens = {0, 1, 50256, 65535, 7, 7, 42};
  write_token_shard(dir / "a.bin", tokens.data(), tokens.size());
  TokenShard shard(dir / "a.bin");
  REQUIRE(shard.size() == 7);
  CHECK(std::vector<uint16_t>(shard.tokens(), shard.tokens() + 7) == tokens);
  CHECK(std::filesystem::file_size(dir / "a.bin") == 1024 + 14);
  // atomic write leaves no temp file behind
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files += !e.path().empty();
  CHECK(files == 1);
}

TEST_CASE("an empty shard is valid") {
  test::TempDir dir;
  write_token_shard(dir / "empty.bin", nullptr, 0);
  CHECK(TokenShard(dir / "empty.bin").size() == 0);
}

TEST_CASE("broken shards give errors that name the file and the problem") {
  test::TempDir dir;
  SUBCASE("truncated") {
    write_raw(dir / "t.bin", {kTokenShardMagic, 1, 1000}, 2048 - 1024);
    const std::string e = error_of(dir / "t.bin");
    CHECK(e.find(dir / "t.bin") == 0);
    CHECK(e.find("file is 2048 bytes but its header promises 1000 tokens (3024 bytes)") !=
          std::string::npos);
    CHECK(e.find("truncated") != std::string::npos);
    CHECK(e.find("prepare") != std::string::npos);
  }
  SUBCASE("too long") {
    write_raw(dir / "l.bin", {kTokenShardMagic, 1, 3}, 8);
    CHECK(error_of(dir / "l.bin").find("longer than its header says") != std::string::npos);
  }
  SUBCASE("bad magic") {
    write_raw(dir / "m.bin", {12345, 1, 0}, 0);
    const std::string e = error_of(dir / "m.bin");
    CHECK(e.find("bad magic number 12345") != std::string::npos);
    CHECK(e.find(dir / "m.bin") == 0);
  }
  SUBCASE("bad version") {
    write_raw(dir / "v.bin", {kTokenShardMagic, 2, 0}, 0);
    CHECK(error_of(dir / "v.bin").find("version 2") != std::string::npos);
  }
  SUBCASE("negative count") {
    write_raw(dir / "n.bin", {kTokenShardMagic, 1, -5}, 0);
    CHECK(error_of(dir / "n.bin").find("negative token count") != std::string::npos);
  }
  SUBCASE("shorter than the header") {
    std::ofstream(dir / "s.bin") << "tiny";
    CHECK(error_of(dir / "s.bin").find("shorter than the 1024-byte") != std::string::npos);
  }
  SUBCASE("missing") {
    CHECK(error_of(dir / "nope.bin").find(dir / "nope.bin" + ": cannot open") == 0);
  }
}
