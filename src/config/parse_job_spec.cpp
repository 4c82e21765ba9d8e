// YAML text + overrides -> JobSpec. Three passes, so every error can point at what the user
// wrote: (1) walk the YAML tree into a flat map "optim.lr" -> (value node, location), rejecting
// unknown and duplicate keys; (2) let each --set replace an entry, with the override as its
// location; (3) convert each entry through the key table with type checks, then validate with
// the same locations.
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <map>
#include <sstream>
#include <yaml-cpp/yaml.h>

#include "config/job_spec_keys.h"
#include "config/load_job_spec.h"
#include "config/parse_job_value.h"
#include "config/validate_job_spec.h"
#include "util/error.h"

namespace sg {
namespace {

struct LocatedValue {
  YAML::Node value;
  std::string location;  // "job.yaml:5:3" or "--set optim.lr=3e-4"
};

struct FlatSpec {
  std::map<std::string, LocatedValue, std::less<>> values;     // by key path
  std::map<std::string, std::string, std::less<>> sections;  // section -> location
};

std::string location_of(const std::string& source, const YAML::Mark& mark) {
  if (mark.is_null()) return source;
  return fmt::format("{}:{}:{}", source, mark.line + 1, mark.column + 1);
}

std::string line_of(const std::string& location) {
  // "job.yaml:5:3" -> "line 5"; an override keeps its own text.
  size_t last = location.rfind(':');
  size_t before = last == std::string::npos ? last : location.rfind(':', last - 1);
  if (before == std::string::npos) return location;
  return "line " + location.substr(before + 1, last - before - 1);
}

class FlatSpecBuilder {
 public:
  explicit FlatSpecBuilder(const std::string& source) : source_(source) {}

  FlatSpec build(const std::string& yaml_text) {
    YAML::Node root;
    try {
      root = YAML::Load(yaml_text);
    } catch (const YAML::Exception& e) {
      throw SpecError(location_of(source_, e.mark) + ": YAML syntax error: " + yaml_error_text(e));
    }
    if (root.IsNull()) return std::move(flat_);  // an empty file: every key takes its default
    if (!root.IsMap())
      throw SpecError(location_of(source_, root.Mark()) +
                      ": expected a map of keys (name:, model:, train:, ...) at the top level, got " +
                      describe_yaml_value(root));
    for (auto it = root.begin(); it != root.end(); ++it) add_top_level(it->first, it->second);
    return std::move(flat_);
  }

 private:
  std::string key_name(const YAML::Node& key, const std::string& prefix) {
    if (!key.IsScalar())
      throw SpecError(location_of(source_, key.Mark()) + ": expected a key name" +
                      (prefix.empty() ? std::string{} : " in '" + prefix + "'") + ", got " +
                      describe_yaml_value(key));
    return prefix.empty() ? key.Scalar() : prefix + "." + key.Scalar();
  }

  void add_top_level(const YAML::Node& key, const YAML::Node& value) {
    std::string name = key_name(key, "");
    std::string where = location_of(source_, key.Mark());
    if (const JobSpecKey* known = find_job_spec_key(name); known && known->section().empty()) {
      add_leaf(name, value, where);
      return;
    }
    if (!is_job_spec_section(name))
      throw SpecError(where + ": unknown key '" + name + "'" + did_you_mean(name));
    if (auto [it, inserted] = flat_.sections.emplace(name, where); !inserted)
      throw SpecError(where + ": duplicate section '" + name + "' (first at " +
                      line_of(it->second) + "); merge the two");
    if (value.IsNull()) return;  // "optim:" with nothing under it: all defaults
    if (!value.IsMap())
      throw SpecError(where + ": expected a map of keys under '" + name + "', got " +
                      describe_yaml_value(value));
    for (auto it = value.begin(); it != value.end(); ++it) {
      std::string path = key_name(it->first, name);
      std::string leaf_where = location_of(source_, it->first.Mark());
      if (!find_job_spec_key(path))
        throw SpecError(leaf_where + ": unknown key '" + path + "'" + did_you_mean(path));
      add_leaf(path, it->second, leaf_where);
    }
  }

  void add_leaf(const std::string& path, const YAML::Node& value, const std::string& where) {
    if (auto [it, inserted] = flat_.values.emplace(path, LocatedValue{value, where}); !inserted)
      throw SpecError(where + ": duplicate key '" + path + "' (first at " +
                      line_of(it->second.location) + "); keep one");
  }

  const std::string& source_;
  FlatSpec flat_;
};

void apply_override(FlatSpec& flat, const std::string& text) {
  std::string where = "--set " + text;
  size_t eq = text.find('=');
  if (eq == std::string::npos)
    throw SpecError(where + ": expected KEY=VALUE, e.g. --set optim.lr=3e-4");
  std::string path = trim_spaces(text.substr(0, eq));
  if (is_job_spec_section(path)) {
    std::string_view example;
    for (const JobSpecKey& key : job_spec_keys())
      if (key.section() == path && example.empty()) example = key.path;
    throw SpecError(where + ": '" + path + "' is a section; set one of its keys, e.g. --set " +
                    std::string(example) + "=...");
  }
  const JobSpecKey* key = find_job_spec_key(path);
  if (!key) throw SpecError(where + ": unknown key '" + path + "'" + did_you_mean(path));
  flat.values[path] = LocatedValue{parse_override_value(text.substr(eq + 1), where), where};
}

std::string family_key_list(std::string_view arch) {
  std::string list;
  for (const JobSpecKey& key : job_spec_keys(arch))
    if (key.section() == "model" && key.path != "model.arch" && key.path != "model.init_from")
      list += (list.empty() ? "" : ", ") + std::string(key.leaf());
  return list;
}

// Every model.* key the user wrote belongs to the family model.arch names, except the keys of
// the file's own family when an override changed model.arch (`--set model.arch=resnet` on a
// GPT-2 file): those are left unused. Unused keys are not written to the resolved spec.
void check_model_keys(FlatSpec& flat, const std::string& arch, const std::string& file_arch,
                      const std::string& source) {
  const ModelFamilyEntry* family = find_model_family(arch);
  if (!family) {
    auto it = flat.values.find("model.arch");
    std::vector<std::string_view> names;
    for (const ModelFamilyEntry& entry : model_family_entries()) names.push_back(entry.arch);
    throw SpecError((it == flat.values.end() ? source : it->second.location) + ": " +
                    not_one_of_message("model.arch", "'" + arch + "'", arch, names));
  }
  auto has_key = [](std::string_view family, std::string_view path) {
    for (const JobSpecKey& key : job_spec_keys(family))
      if (key.path == path) return true;
    return false;
  };
  for (auto it = flat.values.begin(); it != flat.values.end();) {
    const auto& [path, value] = *it;
    if (!path.starts_with("model.") || has_key(arch, path)) {
      ++it;
      continue;
    }
    if (file_arch != arch && !value.location.starts_with("--set ") && has_key(file_arch, path)) {
      it = flat.values.erase(it);
      continue;
    }
    std::string owners;
    for (const ModelFamilyEntry& entry : model_family_entries())
      for (const JobSpecKey& key : entry.keys())
        if (key.path == path) owners += (owners.empty() ? "" : " or ") + std::string(entry.arch);
    throw SpecError(fmt::format("{}: {} is a key of model.arch {}, not of {}; remove it (the "
                                "keys of {}: {})",
                                value.location, path, owners, arch, arch, family_key_list(arch)));
  }
}

}  // namespace

JobSpec parse_job_spec(const std::string& yaml_text, const std::string& source_name,
                       const std::vector<std::string>& overrides) {
  FlatSpec flat = FlatSpecBuilder(source_name).build(yaml_text);
  // The file's own model.arch: an override of it leaves the file's keys of that family unused.
  std::string file_arch = ModelSpec{}.arch;
  if (auto it = flat.values.find("model.arch"); it != flat.values.end() && it->second.value.IsScalar())
    file_arch = it->second.value.Scalar();
  for (const std::string& text : overrides) apply_override(flat, text);

  JobSpec spec;
  auto convert = [&](const JobSpecKey& key) {
    auto it = flat.values.find(key.path);
    if (it == flat.values.end()) return;
    try {
      set_job_spec_value(spec, key, it->second.value);
    } catch (const SpecError& e) {
      throw SpecError(it->second.location + ": " + e.what());
    }
  };
  // model.arch first: it says whose keys the rest of the model section are.
  convert(*find_job_spec_key("model.arch"));
  check_model_keys(flat, spec.model.arch, file_arch, source_name);
  for (const JobSpecKey& key : job_spec_keys(spec.model.arch)) convert(key);
  fill_job_spec_defaults(spec);
  spec.source = source_name;

  validate_job_spec(spec, [&](std::initializer_list<std::string_view> keys) {
    for (std::string_view key : keys)
      if (auto it = flat.values.find(key); it != flat.values.end()) return it->second.location;
    for (std::string_view key : keys) {
      std::string_view section = key.substr(0, key.find('.'));
      if (auto it = flat.sections.find(section); it != flat.sections.end()) return it->second;
    }
    return source_name;
  });
  return spec;
}

JobSpec load_job_spec(const std::string& path, const std::vector<std::string>& overrides) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    throw SpecError(path + ": is a directory; give the path of a job spec YAML file");
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw SpecError(path + ": cannot open the job spec; check the path (see configs/ for examples)");
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) throw SpecError(path + ": cannot read the job spec");
  return parse_job_spec(text.str(), path, overrides);
}

}  // namespace sg
