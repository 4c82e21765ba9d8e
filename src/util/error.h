#pragma once
// Error kinds and their exit codes. Every user-facing failure is one of these, thrown with a
// message that says what is wrong and what to do; main() prints it on one line and exits.
#include <cstdio>
#include <stdexcept>
#include <string>

namespace sg {

// Control characters (a newline inside a quoted value, say) escaped, so a message stays one line.
inline std::string one_line(const std::string& message) {
  std::string out;
  out.reserve(message.size());
  for (const char c : message) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", u);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out;
}

// Bad command line or job spec (YAML, unknown key, wrong type, out of range, plan does not
// divide). Exit code 2. Messages start with "file:line:column: " where a location is known.
struct SpecError : std::runtime_error {
  explicit SpecError(const std::string& message) : std::runtime_error(one_line(message)) {}
};

// A failure while running: missing or corrupt file, checkpoint, shard, device. Exit code 1.
struct RunError : std::runtime_error {
  explicit RunError(const std::string& message) : std::runtime_error(one_line(message)) {}
};

constexpr int kExitUsage = 2;
constexpr int kExitRuntime = 1;

}  // namespace sg
