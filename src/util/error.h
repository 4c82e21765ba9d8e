#pragma once
// Error kinds and their exit codes. Every user-facing failure is one of these, thrown with a
// message that says what is wrong and what to do; main() prints it on one line and exits.
#include <stdexcept>
#include <string>

namespace sg {

// Bad command line or job spec (YAML, unknown key, wrong type, out of range, plan does not
// divide). Exit code 2. Messages start with "file:line:column: " where a location is known.
struct SpecError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A failure while running: missing or corrupt file, checkpoint, shard, device. Exit code 1.
struct RunError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

constexpr int kExitUsage = 2;
constexpr int kExitRuntime = 1;

}  // namespace sg
