#pragma once
// Helpers shared by the sweep tests.
#include <fstream>
#include <string>

#include "cli/sweep_spec.h"
#include "util/error.h"

namespace sg::test {

// The SpecError message parse_sweep_spec gives for `yaml` (as sweep.yaml), or "" if it
// accepts it.
inline std::string sweep_error(const std::string& yaml, const std::string& path = "sweep.yaml") {
  try {
    parse_sweep_spec(yaml, path);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

}  // namespace sg::test
