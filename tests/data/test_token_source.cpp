// ShardedTokens / InMemoryTokens: glob, reads across shard boundaries, range and vocab checks.
#include <doctest/doctest.h>

#include <fstream>
#include <functional>
#include <numeric>
#include <vector>

#include "data/token_source.h"
#include "error_of.h"
#include "temp_dir.h"
#include "util/error.h"

using namespace sg;

namespace {

// Shards of the given sizes holding 0, 1, 2, ... across all of them, named so that the glob's
// name order is the concatenation order even though they are written out of order.
void write_counting_shards(const test::TempDir& dir, const std::vector<size_t>& sizes) {
  uint16_t next = 0;
  std::vector<std::vector<uint16_t>> shards;
  for (size_t n : sizes) {
    shards.emplace_back(n);
    for (auto& t : shards.back()) t = next++;
  }
  for (size_t i = shards.size(); i-- > 0;)
    write_token_shard(dir / ("train_" + std::to_string(100 + i) + ".bin"), shards[i].data(),
                      shards[i].size());
  std::vector<uint16_t> decoy = {9999};
  write_token_shard(dir / "val_000.bin", decoy.data(), decoy.size());
}

using sg::test::error_of;

}  // namespace

TEST_CASE("ShardedTokens concatenates the matching shards in name order") {
  test::TempDir dir;
  write_counting_shards(dir, {5, 0, 3, 7});
  ShardedTokens tokens(dir / "train_*.bin", 1000);
  REQUIRE(tokens.size() == 15);
  CHECK(tokens.shards().size() == 4);
  CHECK(tokens.describe().find("4 shards, 15 tokens") != std::string::npos);

  // every (start, count) including those crossing boundaries and the empty shard
  for (int64_t start = 0; start <= 15; ++start)
    for (int64_t count = 0; start + count <= 15; ++count) {
      std::vector<int32_t> out(count, -1), expect(count);
      std::iota(expect.begin(), expect.end(), static_cast<int32_t>(start));
      tokens.read(start, count, out.data());
      REQUIRE(out == expect);
    }
}

TEST_CASE("ShardedTokens errors") {
  test::TempDir dir;
  write_counting_shards(dir, {4, 4});
  SUBCASE("glob matching nothing names the pattern") {
    const std::string e = error_of([&] { ShardedTokens(dir / "nothing_*.bin", 100); });
    CHECK(e.find(dir / "nothing_*.bin" + ": no token shards match") == 0);
  }
  SUBCASE("reads out of range") {
    ShardedTokens tokens(dir / "train_*.bin", 100);
    std::vector<int32_t> out(10);
    CHECK(error_of([&] { tokens.read(5, 4, out.data()); }).find("out of range") !=
          std::string::npos);
    CHECK(error_of([&] { tokens.read(-1, 1, out.data()); }).find("out of range") !=
          std::string::npos);
    CHECK(error_of([&] { tokens.read(5, 3, out.data()); }).empty());
  }
  SUBCASE("a token >= vocab names the shard and its offset") {
    ShardedTokens tokens(dir / "train_*.bin", 6);  // tokens are 0..7: 6 is in the 2nd shard at 2
    std::vector<int32_t> out(8);
    CHECK(error_of([&] { tokens.read(0, 6, out.data()); }).empty());
    const std::string e = error_of([&] { tokens.read(3, 5, out.data()); });
    CHECK(e.find(dir / "train_101.bin" + ": token 6 at offset 2 is outside") == 0);
    CHECK(e.find("model.vocab = 6") != std::string::npos);
  }
  SUBCASE("a corrupt shard in the glob is reported when opening") {
    std::ofstream(dir / "train_102.bin") << "garbage";
    CHECK(error_of([&] { ShardedTokens(dir / "train_*.bin", 100); }).find(dir / "train_102.bin") ==
          0);
  }
}

TEST_CASE("InMemoryTokens reads, range-checks and vocab-checks") {
  InMemoryTokens tokens({3, 1, 4, 1, 5, 9, 2, 6}, 9, "digits");
  CHECK(tokens.size() == 8);
  std::vector<int32_t> out(4);
  tokens.read(1, 4, out.data());
  CHECK(out == std::vector<int32_t>{1, 4, 1, 5});
  CHECK(error_of([&] { tokens.read(6, 3, out.data()); }).find("out of range") !=
        std::string::npos);
  CHECK(error_of([&] { tokens.read(2, 4, out.data()); }).find("digits: token 9 at offset 5") == 0);
}
