#pragma once
// Validation with locations: parse_job_spec passes a locator that turns key paths into
// "FILE:LINE:COL" (or "--set a.b=v"), so an error found after conversion still points at the
// line the user wrote. The plain validate_job_spec(spec) in load_job_spec.h locates by source.
#include "config/job_spec.h"
#include "config/spec_checks.h"

namespace sg {

void validate_job_spec(const JobSpec& spec, const KeyLocator& locate);

}  // namespace sg
