#pragma once
// The checks a job spec's validation is written in (validate_job_spec.cpp, and each model
// family's own section: model_config.h). Every failure is one SpecError line prefixed by where
// the user wrote the first of the keys it names ("job.yaml:5:3", "--set model.n_head=5").
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace sg {

// Location prefix for an error about `keys` (most relevant first): the first key the user
// wrote, else its section, else just the source name.
using KeyLocator = std::function<std::string(std::initializer_list<std::string_view> keys)>;

// The multiple of `unit` nearest to `value` (ties upward), never below one unit: the value
// an error message proposes instead of one that does not divide.
int64_t nearest_multiple(int64_t value, int64_t unit);

class SpecChecks {
 public:
  explicit SpecChecks(const KeyLocator& locate) : locate_(locate) {}

  [[noreturn]] void fail(std::initializer_list<std::string_view> keys, const std::string& message) const;
  void at_least(std::string_view key, int64_t value, int64_t min) const;
  // Upper bounds keep every size inside what the index types (int dimensions in the kernels,
  // 64-bit element counts) and a machine can hold, so no size overflows or allocates absurdly
  // before a clear error (the limits: docs/faults.md).
  void at_most(std::string_view key, int64_t value, int64_t max, std::string_view why) const;
  void one_of(std::string_view key, const std::string& value,
              const std::vector<std::string_view>& allowed) const;
  // Floats must be finite; `min_inclusive` false means strictly greater than `min`.
  void float_at_least(std::string_view key, double value, double min, bool min_inclusive) const;

 private:
  const KeyLocator& locate_;
};

}  // namespace sg
