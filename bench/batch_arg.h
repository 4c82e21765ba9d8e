#pragma once
// A benchmark's BATCH argument: a whole positive number (at most 4096), nothing after it.
#include <cstdlib>

namespace sg::bench {

inline bool parse_batch(const char* arg, int* batch) {
  char* end = nullptr;
  const long value = std::strtol(arg, &end, 10);
  if (end == arg || *end != '\0' || value < 1 || value > 4096) return false;
  *batch = static_cast<int>(value);
  return true;
}

}  // namespace sg::bench
