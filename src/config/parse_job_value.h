#pragma once
// One YAML value -> one typed JobSpec field, with the type checks of the job spec
// ("expected an integer for 'train.steps', got 'ten'"). Messages carry no location; the caller
// knows where the value came from and prefixes it.
#include <string>
#include <yaml-cpp/yaml.h>

#include "config/job_spec_keys.h"

namespace sg {

// Converts `value` to the type of `key` and stores it in `spec`; throws SpecError.
void set_job_spec_value(JobSpec& spec, const JobSpecKey& key, const YAML::Node& value);

// The value of `--set KEY=VALUE` as a YAML node: a flow sequence ("[0.9,0.99]") or a scalar.
// Text YAML would misread (a leading '*' or '&', "a: b") is taken as a plain string, so paths
// and names pass through; `where` prefixes syntax errors in a flow sequence.
YAML::Node parse_override_value(const std::string& text, const std::string& where);

// "'ten'", "a list", "a map" or "nothing": what the user gave, for error messages.
std::string describe_yaml_value(const YAML::Node& value);

// What a YAML parse error says, for a user: yaml-cpp's own text, except for input nested past
// its depth limit, which it reports as "bad file".
std::string yaml_error_text(const YAML::Exception& error);

std::string trim_spaces(const std::string& text);

}  // namespace sg
