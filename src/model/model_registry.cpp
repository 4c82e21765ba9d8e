// From a job's model section to its family (model_family.h); the families themselves are
// listed in model_families.cpp.
#include "config/job_spec.h"
#include "backend/backend.h"
#include "model/model_family.h"
#include "util/error.h"

namespace sg {

std::unique_ptr<ModelFamily> make_model_family(const JobSpec& spec) {
  auto family = spec.model.config().make_family(spec);
  family->set_activation_policy({spec.devices.backend, spec.train.recompute,
                                 activation_dtype_for(spec.devices.backend, spec.train.precision)});
  return family;
}

nlohmann::json current_shape_record(nlohmann::json record) {
  if (record.is_object() && !record.contains("family")) record["family"] = "gpt2";
  return record;
}

}  // namespace sg
