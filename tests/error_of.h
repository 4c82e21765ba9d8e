#pragma once
// The message of the sg::RunError a callable throws, or "" when it throws none: tests check
// that bad input is reported by name.
#include <functional>
#include <string>

#include "util/error.h"

namespace sg::test {

inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const RunError& e) {
    return e.what();
  }
  return "";
}

}  // namespace sg::test
