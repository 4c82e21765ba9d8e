#pragma once
// `plan --gpu NAME`: the job's step estimated on a named GPU (backend/gpu_estimate.h).
#include <string>

#include <nlohmann/json.hpp>

namespace sg {

struct JobSpec;
class ModelFamily;

// Prints the estimate (text), or adds it to j["gpu_estimate"] (as_json). SpecError (exit 2)
// when gpu names no GPU we have a data sheet for.
void plan_gpu_estimate(const JobSpec& spec, const ModelFamily& family, const std::string& gpu,
                       bool as_json, nlohmann::json& j);

}  // namespace sg
