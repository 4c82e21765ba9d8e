// Definitions the fuzz targets need from files the fuzz build does not compile
// (docs/faults.md "Fuzzing").
// current_shape_record: load_training_checkpoint (src/train/train_checkpoint.cpp, the
// checkpoint_manifest target) calls it to read a manifest's model record. It lives in
// src/model/model_registry.cpp, which registers every model family and would pull the whole
// trainer into the fuzz build, so it is repeated here: keep it equal to that definition.
#include "model/model_family.h"

namespace sg {

nlohmann::json current_shape_record(nlohmann::json record) {
  if (record.is_object() && !record.contains("family")) record["family"] = "gpt2";
  return record;
}

}  // namespace sg
