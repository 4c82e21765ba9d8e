#pragma once
// Helpers for the libFuzzer targets (docs/faults.md "Fuzzing"): the parsers that take a path get
// the fuzzer's bytes through a file in a private directory of this process, made once under
// $SG_FUZZ_SCRATCH (scripts/fuzz points it at a directory of its own on tmpfs and removes that
// at the end, crashes included), else /dev/shm, $TMPDIR or /tmp, and removed at a clean exit. So
// every run of a target touches memory only and parallel fuzzers (-fork) never share a file.
#include <stdlib.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

namespace sg::fuzz {

inline std::string& scratch_dir_storage() {
  static std::string dir;
  return dir;
}

inline void remove_scratch_dir() {
  std::error_code ec;
  if (!scratch_dir_storage().empty()) std::filesystem::remove_all(scratch_dir_storage(), ec);
}

// The process's scratch directory, created on first use.
inline const std::string& scratch_dir() {
  std::string& dir = scratch_dir_storage();
  if (dir.empty()) {
    const char* scratch = std::getenv("SG_FUZZ_SCRATCH");
    std::string base = scratch != nullptr && *scratch != '\0' ? scratch : "/dev/shm";
    if (access(base.c_str(), W_OK) != 0) {
      const char* tmp = std::getenv("TMPDIR");
      base = tmp != nullptr ? tmp : "/tmp";
    }
    std::string pattern = base + "/sg-fuzz-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("sg-fuzz: mkdtemp");
      std::abort();
    }
    dir = pattern;
    std::atexit(remove_scratch_dir);
  }
  return dir;
}

// <scratch>/<name> (subdirectories created), holding exactly `bytes`.
inline std::string write_scratch_file(const std::string& name, std::string_view bytes) {
  const std::string path = scratch_dir() + "/" + name;
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() ||
      std::fclose(f) != 0) {
    std::perror(("sg-fuzz: cannot write " + path).c_str());
    std::abort();
  }
  return path;
}

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// With SG_FUZZ_VERBOSE set, says what became of an input (running a target on one file then
// tells whether a seed was accepted or refused, and why).
inline void note(const std::string& what) {
  static const bool verbose = std::getenv("SG_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "sg-fuzz: %s\n", what.c_str());
}

// A broken contract that is no crash (a wrong error type, a round trip that differs): printed,
// then abort(), which libFuzzer reports as a crash with the input saved.
[[noreturn]] inline void contract_broken(const std::string& what) {
  std::fprintf(stderr, "sg-fuzz: contract broken: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace sg::fuzz
