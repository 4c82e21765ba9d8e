// The dataset writer and `prepare text`: shard contents and headers, the val split, thread-count
// independence, dataset.json, refusing to overwrite another dataset, --emit-text round trip,
// invalid UTF-8, and shards that ShardedTokens loads.
#include <doctest/doctest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "data/token_shard.h"
#include "data/token_source.h"
#include "prepare/dataset_writer.h"
#include "prepare/run_prepare.h"
#include "tests/error_of.h"
#include "tests/prepare/archive_fixtures.h"
#include "tests/temp_dir.h"
#include "tests/tokenizer/shared_tokenizer.h"
#include "tokenizer/gpt2_tokenizer.h"
#include "util/error.h"

using namespace sg;

namespace {


std::vector<std::string> sample_documents(int n) {
  std::vector<std::string> docs;
  for (int i = 0; i < n; ++i)
    docs.push_back("Document " + std::to_string(i) + " says: " +
                   std::string(static_cast<size_t>(i % 7) * 10, 'a' + i % 26) + " the end.");
  return docs;
}

std::vector<uint16_t> expected_stream(const Gpt2Tokenizer& tok, const std::vector<std::string>& docs) {
  std::vector<uint16_t> out;
  for (const auto& d : docs) {
    if (d.empty()) continue;
    out.push_back(static_cast<uint16_t>(tok.eot_id()));
    for (int32_t id : tok.encode(d)) out.push_back(static_cast<uint16_t>(id));
  }
  return out;
}

std::vector<uint16_t> read_shards(const std::vector<ShardRecord>& shards, const std::string& dir) {
  std::vector<uint16_t> out;
  for (const auto& s : shards) {
    const TokenShard shard(dir + "/" + s.file);
    CHECK(shard.size() == s.tokens);
    out.insert(out.end(), shard.tokens(), shard.tokens() + shard.size());
  }
  return out;
}

DatasetSummary write_dataset(const Gpt2Tokenizer& tok, const std::string& dst,
                             const std::vector<std::string>& docs, DatasetWriterOptions options) {
  DatasetWriter writer(tok, dst, options, nullptr, nullptr);
  for (size_t i = 0; i < docs.size(); ++i) writer.add(docs[i], "doc" + std::to_string(i));
  return writer.finish();
}

}  // namespace

TEST_CASE("shards hold <|endoftext|> + document tokens in order, val first") {
  REQUIRE_TOKENIZER(tok);
  test::TempDir dir;
  const auto docs = sample_documents(300);
  DatasetWriterOptions options;
  options.shard_size = 1000;
  options.val_tokens = 1500;
  const DatasetSummary s = write_dataset(*tok, dir.path(), docs, options);
  const auto expected = expected_stream(*tok, docs);
  CHECK(s.documents == 300);
  CHECK(s.tokens == static_cast<int64_t>(expected.size()));
  CHECK(s.val_tokens == 1500);
  CHECK(s.train_tokens == s.tokens - 1500);
  REQUIRE(s.val_shards.size() == 2);  // 1000 + 500
  CHECK(s.val_shards[0].file == "val_000000.bin");
  CHECK(s.val_shards[1].tokens == 500);
  CHECK(s.train_shards.size() == static_cast<size_t>((s.train_tokens + 999) / 1000));
  CHECK(s.train_shards[0].file == "train_000000.bin");
  for (size_t i = 0; i + 1 < s.train_shards.size(); ++i) CHECK(s.train_shards[i].tokens == 1000);
  auto stream = read_shards(s.val_shards, dir.path());
  const auto train = read_shards(s.train_shards, dir.path());
  stream.insert(stream.end(), train.begin(), train.end());
  CHECK(stream == expected);
  CHECK(stream.front() == 50256);

  // The header is llm.c's: magic, version, count.
  const std::string bytes = test::read_file(dir / "train_000000.bin");
  REQUIRE(bytes.size() == 1024 + 2 * 1000);
  int32_t header[3];
  std::memcpy(header, bytes.data(), sizeof header);
  CHECK(header[0] == 20240520);
  CHECK(header[1] == 1);
  CHECK(header[2] == 1000);
  CHECK(s.train_shards[0].xxh3 == file_xxh3_hex(dir / "train_000000.bin"));

  const ShardedTokens train_tokens(dir / "train_*.bin", 50257);
  CHECK(train_tokens.size() == s.train_tokens);
  std::vector<int32_t> window(5);
  train_tokens.read(998, 5, window.data());  // across the first shard boundary
  for (int i = 0; i < 5; ++i) CHECK(window[i] == expected[1500 + 998 + i]);
}

TEST_CASE("the output does not depend on the thread count") {
  REQUIRE_TOKENIZER(tok);
  test::TempDir one, two;
  auto docs = sample_documents(20000);  // several batches
  DatasetWriterOptions options;
  options.shard_size = 50000;
  options.val_tokens = 7777;
  options.threads = 1;
  const auto a = write_dataset(*tok, one.path(), docs, options);
  options.threads = 2;
  const auto b = write_dataset(*tok, two.path(), docs, options);
  REQUIRE(a.train_shards.size() == b.train_shards.size());
  CHECK(a.train_shards.size() > 1);
  for (size_t i = 0; i < a.train_shards.size(); ++i) CHECK(a.train_shards[i].xxh3 == b.train_shards[i].xxh3);
  CHECK(a.val_shards[0].xxh3 == b.val_shards[0].xxh3);
}

TEST_CASE("the default val split is 10% of the tokens") {
  REQUIRE_TOKENIZER(tok);
  test::TempDir dir;
  const auto docs = sample_documents(500);
  const auto s = write_dataset(*tok, dir.path(), docs, DatasetWriterOptions{});
  CHECK(s.val_tokens == s.tokens / 10);
  CHECK(s.train_tokens + s.val_tokens == s.tokens);
  CHECK(s.train_shards.size() == 1);
  CHECK(s.val_shards.size() == 1);
}

TEST_CASE("empty documents are skipped, invalid UTF-8 is repaired and reported") {
  REQUIRE_TOKENIZER(tok);
  test::TempDir dir;
  ProblemLog problems(false);
  DatasetWriterOptions options;
  options.val_tokens = 0;
  DatasetWriter writer(*tok, dir.path(), options, nullptr, &problems);
  writer.add("", "empty.txt");
  writer.add("ok \xC3(bad", "latin1.txt");
  const auto s = writer.finish();
  CHECK(s.documents == 1);
  CHECK(s.empty_documents == 1);
  CHECK(s.repaired_documents == 1);
  REQUIRE(problems.count() == 1);
  CHECK(problems.first()[0] == "latin1.txt: invalid UTF-8 at byte 3; replaced with U+FFFD");
  CHECK(s.val_shards.empty());
  const auto stream = read_shards(s.train_shards, dir.path());
  std::vector<int32_t> ids(stream.begin() + 1, stream.end());
  CHECK(tok->decode(ids) == "ok \xEF\xBF\xBD(bad");
}

TEST_CASE("prepare text writes dataset.json and refuses to overwrite another dataset") {
  REQUIRE_TOKENIZER(tok);
  test::TempDir dir;
  test::write_file(dir / "a.txt", "First file.\n\n\f\nSecond document of the first file.");
  test::write_file(dir / "b.txt", "Another file entirely, one document.");
  PrepareOptions options;
  options.tokenizer_dir = test::test_data_path("gpt2");
  options.val_tokens = 5;
  options.progress = false;
  options.emit_text = dir / "emitted.txt";
  const std::string dst = dir / "out";
  CHECK(run_prepare("text", dir / "a.txt", dst, options) == 0);
  const auto manifest = nlohmann::json::parse(test::read_file(dst + "/dataset.json"));
  CHECK(manifest["kind"] == "text");
  CHECK(manifest["documents"] == 2);
  CHECK(manifest["val_tokens"] == 5);
  CHECK(manifest["train_tokens"].get<int64_t>() + 5 == manifest["tokens"].get<int64_t>());
  CHECK(manifest["train_shards"][0]["file"] == "train_000000.bin");
  CHECK(manifest["tokenizer"]["vocab.bpe"]["xxh3"].get<std::string>().size() == 16);
  CHECK(std::filesystem::exists(dst + "/val_000000.bin"));
  CHECK(test::read_file(dir / "emitted.txt") ==
        "First file.\n\n\f\nSecond document of the first file.");

  // Same source again: replaced. Another source: refused (usage error), unless --force.
  CHECK(run_prepare("text", dir / "a.txt", dst, options) == 0);
  options.emit_text.clear();
  CHECK_THROWS_WITH_AS(run_prepare("text", dir / "b.txt", dst, options),
                       doctest::Contains("holds another dataset"), SpecError);
  CHECK_THROWS_AS(run_prepare("openwebtext", dir / "a.txt", dst, options), SpecError);
  options.force = true;
  CHECK(run_prepare("text", dir / "b.txt", dst, options) == 0);
  CHECK(nlohmann::json::parse(test::read_file(dst + "/dataset.json"))["documents"] == 1);

  // Shards without a dataset.json are someone else's.
  const std::string foreign = dir / "foreign";
  std::filesystem::create_directories(foreign);
  const uint16_t t[2] = {1, 2};
  write_token_shard(foreign + "/train_000000.bin", t, 2);
  options.force = false;
  CHECK_THROWS_WITH_AS(run_prepare("text", dir / "b.txt", foreign, options),
                       doctest::Contains("no dataset.json"), SpecError);
}

TEST_CASE("a shorter rerun leaves no stale shards") {
  REQUIRE_TOKENIZER(tok);
  test::TempDir dir;
  std::string big;
  for (int i = 0; i < 200; ++i) big += "Line " + std::to_string(i) + " of a longer text.\n";
  test::write_file(dir / "in.txt", big);
  PrepareOptions options;
  options.tokenizer_dir = test::test_data_path("gpt2");
  options.shard_size = 100;
  options.val_tokens = 10;
  options.progress = false;
  run_prepare("text", dir / "in.txt", dir / "out", options);
  CHECK(std::filesystem::exists(dir / "out/train_000005.bin"));
  test::write_file(dir / "in.txt", "Now short.");
  options.val_tokens = 1;
  run_prepare("text", dir / "in.txt", dir / "out", options);
  CHECK_FALSE(std::filesystem::exists(dir / "out/train_000001.bin"));
  CHECK(ShardedTokens(dir / "out/train_*.bin", 50257).size() == 3);  // <|endoftext|> Now short . less 1 for val
}

TEST_CASE("emitted text prepares back into the same tokens") {
  REQUIRE_TOKENIZER(tok);
  test::TempDir dir;
  std::filesystem::create_directories(dir / "src");
  test::write_file(dir / "src/1.txt", "One.\n\n\f\nTwo.\n\n\fnot a separator (no newline after)");
  test::write_file(dir / "src/2.txt", "Three, with\fa lone form feed.");
  test::write_file(dir / "src/notes.md", "ignored");
  PrepareOptions options;
  options.tokenizer_dir = test::test_data_path("gpt2");
  options.val_tokens = 3;
  options.progress = false;
  options.emit_text = dir / "emitted.txt";
  run_prepare("text", dir / "src", dir / "a", options);
  options.emit_text.clear();
  run_prepare("text", dir / "emitted.txt", dir / "b", options);
  const auto a = nlohmann::json::parse(test::read_file(dir / "a/dataset.json"));
  const auto b = nlohmann::json::parse(test::read_file(dir / "b/dataset.json"));
  CHECK(a["documents"] == 3);
  CHECK(b["documents"] == 3);
  CHECK(a["train_shards"][0]["xxh3"] == b["train_shards"][0]["xxh3"]);
  CHECK(a["val_shards"][0]["xxh3"] == b["val_shards"][0]["xxh3"]);
}

TEST_CASE("usage errors: unknown kind, no tokenizer, nothing left for training") {
  test::TempDir dir;
  test::write_file(dir / "in.txt", "text");
  PrepareOptions options;
  options.progress = false;
  CHECK_THROWS_WITH_AS(run_prepare("imagenet2", dir / "in.txt", dir / "out", options),
                       doctest::Contains("unknown kind"), SpecError);
  if (std::getenv("SINGULARITY_TOKENIZER") == nullptr)
    CHECK_THROWS_WITH_AS(run_prepare("text", dir / "in.txt", dir / "out", options),
                         doctest::Contains("--tokenizer"), SpecError);
  CHECK(test::error_of([&] { run_prepare("text", dir / "missing.txt", dir / "out", options); })
            .find("missing.txt") != std::string::npos);
  options.tokenizer_dir = test::test_data_path("gpt2");
  if (options.tokenizer_dir.empty()) return;
  options.val_tokens = 1000;
  CHECK(test::error_of([&] { run_prepare("text", dir / "in.txt", dir / "out", options); })
            .find("none are left for training") != std::string::npos);
}

TEST_CASE("prepare openwebtext on the real WebText JSONL sample") {
  const std::string path = test::test_data_path("webtext/webtext.test.truncated.jsonl");
  const std::string tokenizer_dir = test::test_data_path("gpt2");
  if (path.empty() || tokenizer_dir.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/webtext or gpt2 not found");
    return;
  }
  test::TempDir dir;
  PrepareOptions options;
  options.tokenizer_dir = tokenizer_dir;
  options.progress = false;
  CHECK(run_prepare("openwebtext", path, dir / "owt", options) == 0);
  const auto m = nlohmann::json::parse(test::read_file(dir / "owt/dataset.json"));
  CHECK(m["documents"] == 4723);
  CHECK(m["problems"] == 0);
  const int64_t tokens = m["tokens"];
  CHECK(m["val_tokens"] == tokens / 10);
  CHECK(ShardedTokens(dir / "owt/train_*.bin", 50257).size() + ShardedTokens(dir / "owt/val_*.bin", 50257).size() ==
        tokens);
}

TEST_CASE("prepare wikipedia on the real dump sample") {
  const std::string path = test::test_data_path(
      "wikipedia/enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2");
  const std::string tokenizer_dir = test::test_data_path("gpt2");
  if (path.empty() || tokenizer_dir.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/wikipedia or gpt2 not found");
    return;
  }
  test::TempDir dir;
  PrepareOptions options;
  options.tokenizer_dir = tokenizer_dir;
  options.progress = false;
  CHECK(run_prepare("wikipedia", path, dir / "wiki", options) == 0);
  const auto m = nlohmann::json::parse(test::read_file(dir / "wiki/dataset.json"));
  CHECK(m["kind"] == "wikipedia");
  CHECK(m["source_stats"]["articles"] == 106);
  CHECK(m["documents"].get<int64_t>() + m["source_stats"]["empty_articles"].get<int64_t>() == 106);
  CHECK(m["problems"] == 0);
  CHECK(m["tokens"].get<int64_t>() > 100000);
}

TEST_CASE("a failing prepare --force leaves the previous dataset as it was") {
  REQUIRE_TOKENIZER(tok);
  test::TempDir dir;
  test::write_file(dir / "good.txt", "A document with some words in it, enough for a shard.");
  test::write_file(dir / "empty.txt", "");
  PrepareOptions options;
  options.tokenizer_dir = test::test_data_path("gpt2");
  options.val_tokens = 2;
  options.progress = false;
  const std::string dst = dir / "out";
  REQUIRE(run_prepare("text", dir / "good.txt", dst, options) == 0);
  const std::string manifest = test::read_file(dst + "/dataset.json");
  const std::string shard = test::read_file(dst + "/train_000000.bin");
  options.force = true;
  // The input yields nothing: the error names that cause, not --val-tokens.
  CHECK_THROWS_WITH_AS(run_prepare("text", dir / "empty.txt", dst, options),
                       doctest::Contains("the input gave no documents"), RunError);
  CHECK(test::read_file(dst + "/dataset.json") == manifest);
  CHECK(test::read_file(dst + "/train_000000.bin") == shard);
  for (const auto& entry : std::filesystem::directory_iterator(dst)) {
    CHECK(entry.path().filename().string().rfind(".prepare-", 0) != 0);  // no staging left
  }
  // Too few tokens for training after the validation split: also refused, also harmless.
  options.val_tokens = 1000;
  CHECK_THROWS_WITH_AS(run_prepare("text", dir / "good.txt", dst, options),
                       doctest::Contains("is unchanged"), RunError);
  CHECK(test::read_file(dst + "/dataset.json") == manifest);
}
