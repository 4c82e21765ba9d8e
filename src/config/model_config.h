#pragma once
// A model family's own section of the job spec: the `model:` keys beyond model.arch and
// model.init_from (docs/design-notes.md, "A model family owns its section"). Each family in
// src/model/ declares its keys (a table of JobSpecKey rows reaching into its config struct, the
// same machinery as every other key), their defaults (the struct's initialisers), its validation
// (ranges, and the rules that tie it to other sections: how it splits over tensor and pipeline,
// what it can recompute) and how its model is built. The registry (src/model/model_registry.cpp)
// is one table with a row per family; nothing outside src/model/ names a family.
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace sg {

struct JobSpec;
struct JobSpecKey;
class ModelFamily;
class SpecChecks;

// What a family's model reads, as the data section and the trainer need it.
enum class ModelInput { Tokens, Images };
struct ModelData {
  ModelInput input = ModelInput::Tokens;
  int vocab = 0;       // tokens: the real vocabulary
  int context = 0;     // tokens: the longest sequence
  int classes = 0;     // images: labels
  int image_size = 0;  // images: side of the square crop
};

class ModelConfig {
 public:
  virtual ~ModelConfig() = default;
  virtual std::unique_ptr<ModelConfig> clone() const = 0;
  virtual std::string_view arch() const = 0;  // model.arch: "gpt2"
  virtual ModelData data() const = 0;
  // Checks the family's keys and the rules joining them to the rest of `spec` (recompute,
  // deterministic mode); check.fail on the first problem. Called before the data section is
  // checked (which reads data()).
  virtual void validate(const JobSpec& spec, const SpecChecks& check) const = 0;
  // Checks that the model splits parallel.tensor-way by tensor and parallel.pipeline-way by
  // pipeline (both >= 1 by then), with the same rule its ModelFamily::check_split applies
  // (one function in the family's config file serves both).
  virtual void validate_split(const JobSpec& spec, const SpecChecks& check) const = 0;
  // The family's model for `spec` (whose model.arch is arch()).
  virtual std::unique_ptr<ModelFamily> make_family(const JobSpec& spec) const = 0;
};

// One row of the registry.
struct ModelFamilyEntry {
  std::string_view arch;           // model.arch
  std::string_view title;          // "GPT-2", for messages
  std::string_view description;    // one line, for errors and docs
  std::string_view weight_format;  // `export --format` name of its ecosystem's layout, "" none
  std::span<const JobSpecKey> (*keys)();  // "model.n_layer", ...: the accessors use make_config's type
  std::unique_ptr<ModelConfig> (*make_config)();  // the defaults
};

// The registered families, in the order their keys are listed (src/model/model_registry.cpp).
std::span<const ModelFamilyEntry> model_family_entries();
const ModelFamilyEntry* find_model_family(std::string_view arch);
// "gpt2, llama, resnet": for messages.
std::string model_arch_list();

}  // namespace sg

// A family's key: "model.<leaf>", reaching the field `leaf` of its config struct `Config` in
// the spec's model section (a family's keys table is an array of these).
#define SG_MODEL_KEY(Config, leaf)                                                   \
  ::sg::JobSpecKey {                                                                 \
    "model." #leaf, +[](::sg::JobSpec& s) -> decltype(auto) {                        \
      return (s.model.as<Config>().leaf);                                            \
    }                                                                                \
  }
