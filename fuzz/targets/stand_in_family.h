#pragma once
// A model family of one trained tensor "w" of shape [2], with only what saving and loading a
// checkpoint ask of a family: the checkpoint_manifest fuzz target loads manifests for it, and
// the sanitized unit tests get it from make_model_family (unit_stubs.cpp), since the real
// families would pull the whole trainer into the fuzz build (docs/faults.md "Sanitizers").
#include <memory>
#include <string>
#include <vector>

#include "model/model_family.h"
#include "model/parameter_layout.h"

namespace sg::fuzz {

class StandInFamily final : public ModelFamily {
 public:
  StandInFamily() { description_.tensors.push_back({"w", {2}}); }
  std::string name() const override { return "fuzz"; }
  nlohmann::json shape_record() const override { return {{"family", "fuzz"}, {"n", 2}}; }
  std::string summary() const override { return "fuzz"; }
  const ModelDescription& description() const override { return description_; }
  int64_t parameter_count() const override { return 2; }
  void check_split(int, int) const override {}
  void initialize(float*, float*, const ParameterLayout&, uint64_t) const override {}
  std::vector<BatchField> batch_fields(int) const override { return {}; }
  std::string sample_unit() const override { return "tokens"; }
  int units_per_sample() const override { return 1; }
  double training_flops_per_sample() const override { return 0; }
  size_t activation_bytes(const ParameterLayout&, int, int) const override { return 0; }
  std::string evaluation_summary(double, const std::vector<double>&) const override { return ""; }
  std::unique_ptr<StageModel> make_stage(const ParameterLayout&,
                                         const StageContext&) const override {
    return nullptr;
  }

 private:
  ModelDescription description_;
};

}  // namespace sg::fuzz
