#pragma once
// Validation with locations: parse_job_spec passes a locator that turns key paths into
// "FILE:LINE:COL" (or "--set a.b=v"), so an error found after conversion still points at the
// line the user wrote. The plain validate_job_spec(spec) in load_job_spec.h locates by source.
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>

#include "config/job_spec.h"

namespace sg {

// Location prefix for an error about `keys` (most relevant first): the first key the user
// wrote, else its section, else just the source name.
using KeyLocator = std::function<std::string(std::initializer_list<std::string_view> keys)>;

void validate_job_spec(const JobSpec& spec, const KeyLocator& locate);

}  // namespace sg
