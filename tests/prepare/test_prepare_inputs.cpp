// `prepare`'s inputs and outputs that are not plain files, and its limits: --emit-text never
// replaces a symlink, a device or a FIFO; a vocabulary over 65,536 tokens is refused before any
// shard is written; a symlink loop under a source is one line naming the link; a FIFO as the
// source is named as one.
#include <doctest/doctest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <filesystem>

#include "data/token_shard.h"
#include "prepare/openwebtext_source.h"
#include "prepare/run_prepare.h"
#include "prepare/text_source.h"
#include "tests/error_of.h"
#include "tests/temp_dir.h"
#include "tests/test_files.h"
#include "tests/tokenizer/synthetic_vocab.h"
#include "tests/tokenizer/test_data_dir.h"
#include "util/error.h"

using namespace sg;
namespace fs = std::filesystem;

namespace {

PrepareOptions quiet_options(const std::string& tokenizer_dir) {
  PrepareOptions options;
  options.tokenizer_dir = tokenizer_dir;
  options.val_tokens = 1;
  options.progress = false;
  options.threads = 2;
  return options;
}

// The error's message is one line that names `path`.
void check_one_line_naming(const std::string& error, const std::string& path) {
  CHECK_MESSAGE(error.find(path) != std::string::npos, error);
  CHECK_MESSAGE(error.find('\n') == std::string::npos, error);
}

}  // namespace

TEST_CASE("--emit-text refuses a symlink, a FIFO or a device and leaves it as it was") {
  test::TempDir dir;
  test::write_synthetic_vocab(dir.path(), 300);  // no shared data needed
  test::write_file(dir / "in.txt", "zz zz zz");
  test::write_file(dir / "target.txt", "keep me");
  fs::create_symlink(dir / "target.txt", dir / "link.txt");
  REQUIRE(::mkfifo((dir / "fifo.txt").c_str(), 0600) == 0);
  std::vector<std::string> specials = {dir / "link.txt", dir / "fifo.txt"};
  // A copy of /dev/full (as root): the node must stay a character device.
  if (::mknod((dir / "full").c_str(), S_IFCHR | 0600, makedev(1, 7)) == 0)
    specials.push_back(dir / "full");
  else
    MESSAGE("character-device case skipped: mknod needs root");
  PrepareOptions options = quiet_options(dir.path());
  for (const std::string& path : specials) {
    options.emit_text = path;
    const std::string error =
        test::error_of([&] { run_prepare("text", dir / "in.txt", dir / "out", options); });
    check_one_line_naming(error, "--emit-text " + path);
    CHECK(error.find("regular file") != std::string::npos);
    CHECK_FALSE(fs::exists(dir / "out"));  // refused before the destination was made
  }
  CHECK(fs::is_symlink(dir / "link.txt"));
  CHECK(test::read_file(dir / "target.txt") == "keep me");
  CHECK(fs::is_fifo(dir / "fifo.txt"));
  if (specials.size() == 3) CHECK(fs::is_character_file(dir / "full"));
  for (const auto& entry : fs::directory_iterator(dir.path()))  // no temp file left behind
    CHECK(entry.path().filename().string().find(".tmp-") == std::string::npos);

  // A regular file is replaced, and a new path is created.
  test::write_file(dir / "old.txt", "old text");
  options.emit_text = dir / "old.txt";
  CHECK(run_prepare("text", dir / "in.txt", dir / "a", options) == 0);
  CHECK(test::read_file(dir / "old.txt") == "zz zz zz");
  options.emit_text = dir / "new.txt";
  CHECK(run_prepare("text", dir / "in.txt", dir / "b", options) == 0);
  CHECK(test::read_file(dir / "new.txt") == "zz zz zz");
}

TEST_CASE("a vocabulary over 65,536 tokens is refused before any shard; 65,536 round-trip") {
  test::TempDir dir;
  fs::create_directories(dir / "big");
  test::write_synthetic_vocab(dir / "big", 70000);
  test::write_file(dir / "in.txt", "zz zz zz");
  // Before the fix, "zz" (id 69999) was written as 69999 mod 65536 = 4463.
  const std::string error = test::error_of(
      [&] { run_prepare("text", dir / "in.txt", dir / "out", quiet_options(dir / "big")); });
  check_one_line_naming(error, dir / "big/encoder.json");
  CHECK(error.find("65536") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "out"));

  fs::create_directories(dir / "max");
  test::write_synthetic_vocab(dir / "max", 65536);
  REQUIRE(run_prepare("text", dir / "in.txt", dir / "ok", quiet_options(dir / "max")) == 0);
  const TokenShard val(dir / "ok/val_000000.bin"), train(dir / "ok/train_000000.bin");
  REQUIRE(val.size() == 1);
  CHECK(val.tokens()[0] == 65534);  // <|endoftext|>
  std::vector<uint16_t> ids(train.tokens(), train.tokens() + train.size());
  CHECK(std::count(ids.begin(), ids.end(), 65535) == 3);  // "zz" three times, not 65535 mod 2^16
}

TEST_CASE("a symlink loop under a source is one line naming the link, for text and openwebtext") {
  test::TempDir dir;
  fs::create_directories(dir / "src/sub");
  test::write_file(dir / "src/a.txt", "text");
  fs::create_directory_symlink("..", dir / "src/sub/up");  // back to src/
  for (const auto& list : {list_text_files, list_openwebtext_inputs}) {
    const std::string error = test::error_of([&] { list(dir / "src"); });
    check_one_line_naming(error, dir / "src/sub/up");
    CHECK(error.find("symbolic link loop") != std::string::npos);
    CHECK(error.find("remove or fix the link") != std::string::npos);
  }
  fs::remove(dir / "src/sub/up");
  fs::create_symlink("self.txt", dir / "src/self.txt");  // a link to itself
  for (const auto& list : {list_text_files, list_openwebtext_inputs}) {
    const std::string error = test::error_of([&] { list(dir / "src"); });
    check_one_line_naming(error, dir / "src/self.txt");
    CHECK(error.find("symbolic link loop") != std::string::npos);
  }
  fs::remove(dir / "src/self.txt");
  // Links that do not loop are followed: a linked folder and a dangling link (skipped).
  fs::create_directories(dir / "elsewhere");
  test::write_file(dir / "elsewhere/b.txt", "more text");
  fs::create_directory_symlink(dir / "elsewhere", dir / "src/sub/linked");
  fs::create_symlink(dir / "missing.txt", dir / "src/dangling.txt");
  CHECK(list_text_files(dir / "src") ==
        std::vector<std::string>{dir / "src/a.txt", dir / "src/sub/linked/b.txt"});
}

TEST_CASE("a FIFO as the source is named as one; a FIFO inside a source folder is skipped") {
  test::TempDir dir;
  REQUIRE(::mkfifo((dir / "fifo.txt").c_str(), 0600) == 0);
  const std::string error = test::error_of([&] { list_text_files(dir / "fifo.txt"); });
  check_one_line_naming(error, dir / "fifo.txt: is a FIFO");
  fs::create_directories(dir / "src");
  test::write_file(dir / "src/a.txt", "text");
  REQUIRE(::mkfifo((dir / "src/b.txt").c_str(), 0600) == 0);
  CHECK(list_text_files(dir / "src") == std::vector<std::string>{dir / "src/a.txt"});
}
