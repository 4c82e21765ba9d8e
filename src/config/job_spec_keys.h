#pragma once
// The table of job spec keys: one row per leaf field of JobSpec, named by its YAML path
// ("optim.lr"), and each model family's rows for its own section (model_config.h). Parsing,
// overrides, the resolved-spec writer and the tests all walk this one table, so a field added
// to job_spec.h needs one row here (a family's key, one row in its own table) and nothing else
// drifts.
#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/job_spec.h"

namespace sg {

// Accessors return a reference to the field inside a JobSpec; the alternative says its type
// (a spec enum's alternative: spec_enums.h, one per enum).
using JobSpecField = std::variant<int& (*)(JobSpec&), int64_t& (*)(JobSpec&),
                                  uint64_t& (*)(JobSpec&), float& (*)(JobSpec&),
                                  double& (*)(JobSpec&), std::string& (*)(JobSpec&),
                                  bool& (*)(JobSpec&), std::array<double, 2>& (*)(JobSpec&),
                                  OptimizerKind& (*)(JobSpec&), LrDecay& (*)(JobSpec&),
                                  Precision& (*)(JobSpec&), Recompute& (*)(JobSpec&),
                                  PipelineSchedule& (*)(JobSpec&), BackendKind& (*)(JobSpec&),
                                  DatasetKind& (*)(JobSpec&)>;

struct JobSpecKey {
  std::string_view path;  // "optim.lr", or "name" for a top-level key
  JobSpecField field;
  bool zero_is_auto = false;  // the YAML word `auto` stands for 0 (devices.threads)

  std::string_view section() const;  // "optim"; "" for a top-level key
  std::string_view leaf() const;     // "lr"
};

// Every key of every family, in the order job_spec_to_yaml writes them (a family's keys after
// model.arch, families in registry order). Families may share a key's path (GPT-2's and Llama's
// model.n_layer), each reaching its own field: a path then appears once per family.
std::span<const JobSpecKey> job_spec_keys();
// The keys of a job whose model.arch is `arch`: the core keys and that family's.
std::span<const JobSpecKey> job_spec_keys(std::string_view arch);

// The first key with `path` (whether a path is known; a model key's field is reached through
// job_spec_keys(arch)).
const JobSpecKey* find_job_spec_key(std::string_view path);
bool is_job_spec_section(std::string_view name);

// The known key (or section name) nearest to an unknown `path` by edit distance, if any is
// close enough to be a plausible typo; a leaf that exists in another section is suggested there.
std::optional<std::string> suggest_job_spec_key(std::string_view path);

// "; did you mean 'optim.lr'?" or "" -- appended to unknown-key messages.
std::string did_you_mean(std::string_view path);

// "optim.decay must be one of cosine, linear, step, constant; got 'cosin'; did you mean
// 'cosine'?": the message for a word outside `allowed`. `got` is what the user gave as the
// message shows it ("'cosin'", "a list"); `word` the text a typo is looked for in.
std::string not_one_of_message(std::string_view key, std::string_view got, std::string_view word,
                               const std::vector<std::string_view>& allowed);

// Optimal string alignment distance (Levenshtein plus adjacent transpositions).
int edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `word`, if it is within typo distance.
std::optional<std::string> nearest_word(std::string_view word,
                                        const std::vector<std::string_view>& candidates);

}  // namespace sg
