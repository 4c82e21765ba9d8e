// ModelSpec: model.arch, model.init_from and one section per registered family
// (model_config.h). The registry's table itself is in src/model/model_registry.cpp.
#include <fmt/format.h>

#include "config/job_spec.h"
#include "util/error.h"

namespace sg {

ModelSpec::ModelSpec() {
  for (const ModelFamilyEntry& entry : model_family_entries()) configs_.push_back(entry.make_config());
}

ModelSpec::ModelSpec(const ModelSpec& other) : arch(other.arch), init_from(other.init_from) {
  for (const auto& config : other.configs_) configs_.push_back(config->clone());
}

ModelSpec& ModelSpec::operator=(const ModelSpec& other) {
  if (this != &other) *this = ModelSpec(other);
  return *this;
}

ModelSpec::ModelSpec(ModelSpec&&) noexcept = default;
ModelSpec& ModelSpec::operator=(ModelSpec&&) noexcept = default;
ModelSpec::~ModelSpec() = default;

ModelConfig& ModelSpec::config_of(std::string_view name) const {
  for (const auto& config : configs_)
    if (config->arch() == name) return *config;
  throw SpecError(fmt::format("model.arch '{}' is not a model this build knows; use one of {}",
                              name, model_arch_list()));
}

const ModelConfig& ModelSpec::config() const { return config_of(arch); }

const ModelFamilyEntry* find_model_family(std::string_view arch) {
  for (const ModelFamilyEntry& entry : model_family_entries())
    if (entry.arch == arch) return &entry;
  return nullptr;
}

std::string model_arch_list() {
  std::string list;
  for (const ModelFamilyEntry& entry : model_family_entries())
    list += (list.empty() ? "" : ", ") + std::string(entry.arch);
  return list;
}

}  // namespace sg
