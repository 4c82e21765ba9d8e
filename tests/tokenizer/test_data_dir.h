#pragma once
// The shared sample data (../shared/data) for tests that need real files: its path from
// SINGULARITY_TEST_DATA, or "" when unset or when `relative` is missing there, in which case the
// caller reports "skipped" and returns.
#include <cstdlib>
#include <filesystem>
#include <string>

namespace sg::test {

inline std::string test_data_path(const std::string& relative) {
  const char* root = std::getenv("SINGULARITY_TEST_DATA");
  if (root == nullptr || *root == '\0') return "";
  const std::string path = std::string(root) + "/" + relative;
  return std::filesystem::exists(path) ? path : "";
}

}  // namespace sg::test
