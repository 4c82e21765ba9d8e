// Definitions the fuzz targets need from files the fuzz build does not compile
// (docs/faults.md "Fuzzing").
// current_shape_record: load_training_checkpoint (src/train/train_checkpoint.cpp, the
// checkpoint_manifest target) calls it to read a manifest's model record. It lives in
// src/model/model_registry.cpp, which registers every model family and would pull the whole
// trainer into the fuzz build, so it is repeated here: keep it equal to that definition.
// GPT2Config::make_family, LlamaConfig::make_family, ResNetConfig::make_family: the families' configs (their keys and
// checks, src/model/*_config.cpp) are compiled, their models are not: a family made from a
// fuzzed spec is the one-tensor stand-in family.
#include "model/gpt2_config.h"
#include "model/llama_config.h"
#include "model/model_family.h"
#include "model/resnet_config.h"
#include "stand_in_family.h"

namespace sg {

std::unique_ptr<ModelFamily> GPT2Config::make_family(const JobSpec&) const {
  return std::make_unique<fuzz::StandInFamily>();
}

std::unique_ptr<ModelFamily> LlamaConfig::make_family(const JobSpec&) const {
  return std::make_unique<fuzz::StandInFamily>();
}

std::unique_ptr<ModelFamily> ResNetConfig::make_family(const JobSpec&) const {
  return std::make_unique<fuzz::StandInFamily>();
}

nlohmann::json current_shape_record(nlohmann::json record) {
  if (record.is_object() && !record.contains("family")) record["family"] = "gpt2";
  return record;
}

}  // namespace sg
