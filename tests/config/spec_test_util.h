#pragma once
// Helpers shared by the job spec tests.
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <doctest/doctest.h>

#include "config/job_spec_keys.h"
#include "config/load_job_spec.h"
#include "util/error.h"

namespace sg::test {

// The SpecError message parse_job_spec gives for `yaml` (as job.yaml), or "" if it accepts it.
inline std::string spec_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_job_spec(yaml, "job.yaml", overrides);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "";
}

// Keys whose values differ between a and b, comparing floats by their bits (so 0.1 read back
// as 0.1000000001 counts as a difference). Walks the key table, so new fields are covered.
inline std::vector<std::string> differing_keys(JobSpec a, JobSpec b) {
  std::vector<std::string> differ;
  for (const JobSpecKey& key : job_spec_keys()) {
    bool same = std::visit(
        [&](auto accessor) {
          const auto& x = accessor(a);
          const auto& y = accessor(b);
          using Field = std::remove_cvref_t<decltype(x)>;
          if constexpr (std::is_trivially_copyable_v<Field>)
            return std::memcmp(&x, &y, sizeof(Field)) == 0;
          else
            return x == y;
        },
        key.field);
    if (!same) differ.emplace_back(key.path);
  }
  return differ;
}

}  // namespace sg::test
