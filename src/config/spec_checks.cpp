#include "config/spec_checks.h"

#include <cmath>
#include <fmt/format.h>

#include "config/job_spec_keys.h"
#include "util/error.h"

namespace sg {

int64_t nearest_multiple(int64_t value, int64_t unit) {
  int64_t multiple = (value + unit / 2) / unit * unit;
  return multiple < unit ? unit : multiple;
}

void SpecChecks::fail(std::initializer_list<std::string_view> keys, const std::string& message) const {
  throw SpecError(locate_(keys) + ": " + message);
}

void SpecChecks::at_least(std::string_view key, int64_t value, int64_t min) const {
  if (value < min) fail({key}, fmt::format("{} must be >= {}; got {}", key, min, value));
}

void SpecChecks::at_most(std::string_view key, int64_t value, int64_t max,
                         std::string_view why) const {
  if (value > max) fail({key}, fmt::format("{} must be <= {}; got {} ({})", key, max, value, why));
}

void SpecChecks::one_of(std::string_view key, const std::string& value,
                        const std::vector<std::string_view>& allowed) const {
  for (std::string_view a : allowed)
    if (value == a) return;
  fail({key}, not_one_of_message(key, "'" + value + "'", value, allowed));
}

void SpecChecks::float_at_least(std::string_view key, double value, double min,
                                bool min_inclusive) const {
  bool ok = std::isfinite(value) && (min_inclusive ? value >= min : value > min);
  if (!ok)
    fail({key}, fmt::format("{} must be {} {}; got {}", key, min_inclusive ? ">=" : ">", min, value));
}

}  // namespace sg
