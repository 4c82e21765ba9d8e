#pragma once
// Reading, checking and writing the job spec (docs/architecture.md, "The job spec"). Every error is
// an sg::SpecError whose message is one line: "FILE:LINE:COL: message" (1-based) for something in
// the file, or "--set a.b=value: message" for something in an override.
#include <string>
#include <vector>

#include "config/job_spec.h"

namespace sg {

// Reads the file at `path`, then as parse_job_spec with source_name = path.
JobSpec load_job_spec(const std::string& path, const std::vector<std::string>& overrides);

// Parses YAML text, applies overrides ("a.b=value", value read as a YAML scalar or flow
// sequence, e.g. optim.betas=[0.9,0.99]; later overrides win), converts to JobSpec with type
// checks, fills defaults and validates. spec.source = source_name.
JobSpec parse_job_spec(const std::string& yaml_text, const std::string& source_name,
                       const std::vector<std::string>& overrides);

// The resolved spec as YAML, every key written (defaults included), floats in their shortest
// form that reads back to the same bits: parse_job_spec(job_spec_to_yaml(s)) equals s.
std::string job_spec_to_yaml(const JobSpec& spec);

// Fills the defaults that depend on other keys: log.dir = "runs/<name>" when empty.
void fill_job_spec_defaults(JobSpec& spec);

// Checks ranges, enums and that the batch and the device mesh divide. Throws SpecError naming
// the key ("SOURCE: train.global_batch 30 is not divisible by ..."). parse_job_spec calls it
// with file locations; code that builds or edits a spec calls it directly.
void validate_job_spec(const JobSpec& spec);

}  // namespace sg
