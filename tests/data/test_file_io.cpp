// Reading only regular files (data/file_io.h): a FIFO is refused without blocking, a directory
// is named as one, a prefix read says whether it was the whole file, and special_file_kind names
// what a path is without following a final symlink when asked not to.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "data/file_io.h"
#include "fifo_guard.h"
#include "temp_dir.h"

using namespace sg;
namespace fs = std::filesystem;

TEST_CASE("read_regular_file: whole files, prefixes, and what is not a regular file") {
  test::TempDir dir;
  std::ofstream(dir / "ten.bin", std::ios::binary) << "0123456789";
  std::vector<uint8_t> bytes;
  std::string why;
  bool complete = false;
  REQUIRE(read_regular_file(dir / "ten.bin", bytes, why, SIZE_MAX, &complete));
  CHECK(std::string(bytes.begin(), bytes.end()) == "0123456789");
  CHECK(complete);
  REQUIRE(read_regular_file(dir / "ten.bin", bytes, why, 4, &complete));
  CHECK(std::string(bytes.begin(), bytes.end()) == "0123");
  CHECK_FALSE(complete);
  REQUIRE(read_regular_file(dir / "ten.bin", bytes, why, 10, &complete));
  CHECK(complete);  // exactly the limit: nothing after it
  std::ofstream(dir / "empty.bin");
  std::string text = "stale";
  REQUIRE(read_regular_file(dir / "empty.bin", text, why));
  CHECK(text.empty());

  CHECK_FALSE(read_regular_file(dir / "missing.bin", bytes, why));
  CHECK(why.find("cannot open (No such file or directory)") != std::string::npos);
  fs::create_directory(dir / "folder.JPEG");
  CHECK_FALSE(read_regular_file(dir / "folder.JPEG", bytes, why));
  CHECK(why == "is a directory, not a regular file");
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  bool read = true;
  const auto read_fifo = [&] { read = read_regular_file(dir / "fifo", bytes, why); };
  CHECK(test::returns_without_blocking(dir / "fifo", read_fifo));
  CHECK_FALSE(read);
  CHECK(why == "is a FIFO (named pipe), not a regular file");
}

TEST_CASE("special_file_kind: empty for a regular file or a new path, else what the path is") {
  test::TempDir dir;
  std::ofstream(dir / "file.txt") << "x";
  fs::create_symlink(dir / "file.txt", dir / "link.txt");
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  CHECK(special_file_kind(dir / "file.txt", false).empty());
  CHECK(special_file_kind(dir / "new.txt", false).empty());
  CHECK(special_file_kind(dir / "link.txt", false) == "a symbolic link");
  CHECK(special_file_kind(dir / "link.txt", true).empty());  // followed to the regular file
  CHECK(special_file_kind(dir / "fifo", false) == "a FIFO (named pipe)");
  CHECK(special_file_kind(dir.path(), false) == "a directory");
  CHECK(special_file_kind("/dev/null", false) == "a character device");
}
