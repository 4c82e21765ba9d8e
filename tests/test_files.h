#pragma once
// Whole-file reads and writes for tests (fixtures, corrupted copies, byte comparisons).
#include <fstream>
#include <iterator>
#include <string>

namespace sg::test {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace sg::test
