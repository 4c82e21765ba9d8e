// Sweep file -> validated points (sweep_spec.h). Every key and value is checked where it is
// written, then each point's job is loaded exactly as `singularity train BASE --set ...` will
// load it, so whatever passes here is what the point runs.
#include "cli/sweep_spec.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "cli/commands.h"
#include "config/job_spec_keys.h"
#include "config/load_job_spec.h"
#include "config/parse_job_value.h"
#include "util/error.h"

namespace sg {
namespace {

namespace fs = std::filesystem;

// A grid beyond this is almost certainly a mistake (a list where a value was meant).
constexpr size_t kMaxPoints = 10000;
// Run directory names stay readable; the index keeps them unique.
constexpr size_t kMaxSlugLength = 60;

const std::vector<std::string_view> kSweepKeys = {"base",   "name", "dir",  "grid",
                                                  "points", "set",  "slurm"};
// Options the generated sbatch script sets itself (sweep_slurm.cpp).
const std::set<std::string, std::less<>> kSlurmReserved = {
    "array", "output", "job-name", "requeue", "open-mode", "signal", "chdir", "parsable"};

std::string location_of(const std::string& source, const YAML::Mark& mark) {
  if (mark.is_null()) return source;
  return fmt::format("{}:{}:{}", source, mark.line + 1, mark.column + 1);
}

bool usable_name(const std::string& name) {
  if (name.empty() || name.size() > 100 || name[0] == '.' || name[0] == '-') return false;
  for (const char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return false;
  }
  return true;
}

std::string controlled_key_hint(const std::string& key) {
  if (key == "name") return "set name: at the top of the sweep file (points are <name>-<index>)";
  if (key == "log.dir")
    return "set dir: at the top of the sweep file (points run in <dir>/<index>-...)";
  return "every point resumes from its newest checkpoint (auto); remove it";
}

// Cartesian product, first grid key slowest (as nested loops in the order written).
std::vector<std::vector<SweepOverride>> grid_product(
    const std::vector<std::pair<std::string, std::vector<SweepOverride>>>& grid) {
  std::vector<std::vector<SweepOverride>> out;
  if (grid.empty()) return out;
  out.emplace_back();
  for (const auto& [key, values] : grid) {
    std::vector<std::vector<SweepOverride>> next;
    next.reserve(out.size() * values.size());
    for (const auto& prefix : out) {
      for (const SweepOverride& value : values) {
        next.push_back(prefix);
        next.back().push_back(value);
      }
    }
    out = std::move(next);
  }
  return out;
}

std::string slug_of(const std::vector<SweepOverride>& overrides,
                    const std::set<std::string>& ambiguous_leaves) {
  if (overrides.empty()) return "base";
  std::string slug;
  for (const SweepOverride& o : overrides) {
    const std::string leaf = o.key.substr(o.key.rfind('.') + 1);
    if (!slug.empty()) slug += '_';
    slug += ambiguous_leaves.count(leaf) ? o.key : leaf;
    slug += '=';
    for (const char c : o.value) {
      const bool keep = std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' ||
                        c == '+' || c == '_';
      slug += keep ? c : '_';
    }
  }
  return slug.size() > kMaxSlugLength ? slug.substr(0, kMaxSlugLength) : slug;
}

class SweepParser {
 public:
  SweepParser(const std::string& path) : path_(path) {}

  SweepSpec parse(const std::string& yaml_text) {
    YAML::Node root;
    try {
      root = YAML::Load(yaml_text);
    } catch (const YAML::Exception& e) {
      throw SpecError(location_of(path_, e.mark) + ": YAML syntax error: " + yaml_error_text(e));
    }
    if (!root.IsMap()) {
      throw SpecError(location_of(path_, root.Mark()) +
                      ": expected a map with grid: and/or points: (and base:, name:, dir:, "
                      "set:, slurm:) at the top of the sweep file");
    }
    sweep_.path = path_;
    std::set<std::string> seen;
    for (auto it = root.begin(); it != root.end(); ++it) {
      const std::string key = key_name(it->first, "the sweep file");
      const std::string where = at(it->first);
      if (!seen.insert(key).second)
        throw SpecError(where + ": duplicate key '" + key + "'; keep one");
      parse_top_level(key, it->second, where);
    }
    if (sweep_.name.empty()) {
      sweep_.name = fs::path(path_).stem().string();
      if (!usable_name(sweep_.name))
        throw SpecError(path_ + ": the file name '" + sweep_.name +
                        "' cannot name the sweep; set name: (letters, digits, ., _, -)");
    }
    if (sweep_.dir.empty()) sweep_.dir = "runs/" + sweep_.name;
    expand_points();
    return std::move(sweep_);
  }

 private:
  std::string at(const YAML::Node& node) const { return location_of(path_, node.Mark()); }

  std::string key_name(const YAML::Node& key, const std::string& context) const {
    if (!key.IsScalar())
      throw SpecError(at(key) + ": expected a key name in " + context + ", got " +
                      (key.IsSequence() ? "a list" : "a map"));
    return key.Scalar();
  }

  std::string scalar(const YAML::Node& value, const std::string& key, const std::string& where,
                     const char* example) const {
    if (!value.IsScalar() || value.Scalar().empty())
      throw SpecError(where + ": expected a string for '" + key + "', e.g. " + key + ": " +
                      example);
    return value.Scalar();
  }

  void parse_top_level(const std::string& key, const YAML::Node& value, const std::string& where) {
    if (key == "base") {
      parse_base(scalar(value, key, where, "job.yaml"), where);
    } else if (key == "name") {
      sweep_.name = scalar(value, key, where, "lr-sweep");
      if (!usable_name(sweep_.name))
        throw SpecError(at(value) + ": name '" + sweep_.name +
                        "' cannot name run directories and jobs; use letters, digits, ., _ and -");
    } else if (key == "dir") {
      sweep_.dir = scalar(value, key, where, "runs/lr-sweep");
    } else if (key == "grid") {
      parse_grid(value, where);
    } else if (key == "points") {
      parse_points(value, where);
    } else if (key == "set") {
      if (!value.IsNull()) sweep_.common = overrides_of(value, "set", where);
    } else if (key == "slurm") {
      parse_slurm(value, where);
    } else {
      std::string hint;
      if (is_job_spec_section(key) || find_job_spec_key(key)) {
        hint = "; job settings go in the base job or under set:, e.g. set: {optim.lr: 1e-3}";
      } else if (auto near = nearest_word(key, kSweepKeys)) {
        hint = "; did you mean '" + *near + "'?";
      } else {
        hint = "; the keys are base, name, dir, grid, points, set and slurm";
      }
      throw SpecError(where + ": unknown key '" + key + "' in the sweep file" + hint);
    }
  }

  void parse_base(const std::string& base, const std::string& where) {
    const fs::path resolved = fs::path(base).is_absolute()
                                  ? fs::path(base)
                                  : (fs::path(path_).parent_path() / base).lexically_normal();
    sweep_.base = resolved.string();
    std::error_code error;
    std::ifstream file(sweep_.base, std::ios::binary);
    if (!file || fs::is_directory(resolved, error))
      throw SpecError(where + ": cannot open the base job '" + base + "' (looked for " +
                      sweep_.base + "; base is relative to the sweep file); check the path");
    std::ostringstream text;
    text << file.rdbuf();
    base_text_ = text.str();
  }

  // "optim.lr" checked as --set checks it, and not one of the keys the sweep sets itself.
  void check_job_key(const std::string& key, const std::string& where, const std::string& context) {
    if (is_job_spec_section(key)) {
      std::string example;
      for (const JobSpecKey& k : job_spec_keys())
        if (k.section() == key && example.empty()) example = k.path;
      throw SpecError(where + ": '" + key + "' in " + context + " is a section; give one of its " +
                      "keys, e.g. " + example);
    }
    if (!find_job_spec_key(key))
      throw SpecError(where + ": unknown job-spec key '" + key + "' in " + context +
                      did_you_mean(key));
    if (is_sweep_controlled_key(key))
      throw SpecError(where + ": '" + key + "' in " + context + " is set by the sweep; " +
                      controlled_key_hint(key));
  }

  // A value as `--set KEY=VALUE` takes it: a scalar's text, or a flow list of scalars.
  SweepOverride override_of(const std::string& key, const YAML::Node& value) const {
    SweepOverride o{key, "", at(value)};
    if (value.IsScalar()) {
      o.value = value.Scalar();
    } else if (value.IsSequence()) {
      o.value = "[";
      for (size_t i = 0; i < value.size(); ++i) {
        if (!value[i].IsScalar())
          throw SpecError(at(value[i]) + ": expected a value in the list for '" + key + "', got " +
                          (value[i].IsSequence() ? "a list" : "a map"));
        o.value += (i ? "," : "") + value[i].Scalar();
      }
      o.value += "]";
    } else if (value.IsMap()) {
      throw SpecError(o.location + ": expected a value for '" + key +
                      "', got a map; write keys in full, e.g. optim.lr: 1e-3");
    }
    return o;
  }

  std::vector<SweepOverride> overrides_of(const YAML::Node& map, const std::string& context,
                                          const std::string& where) {
    if (!map.IsMap())
      throw SpecError(where + ": expected a map of job-spec keys in " + context +
                      ", e.g. {optim.lr: 1e-3, train.steps: 100}");
    std::vector<SweepOverride> out;
    std::set<std::string> seen;
    for (auto it = map.begin(); it != map.end(); ++it) {
      const std::string key = key_name(it->first, context);
      check_job_key(key, at(it->first), context);
      if (!seen.insert(key).second)
        throw SpecError(at(it->first) + ": duplicate key '" + key + "' in " + context +
                        "; keep one");
      out.push_back(override_of(key, it->second));
    }
    return out;
  }

  void parse_grid(const YAML::Node& value, const std::string& where) {
    if (value.IsNull()) return;
    if (!value.IsMap())
      throw SpecError(where +
                      ": expected a map of job-spec keys to lists of values in grid, "
                      "e.g. grid: {optim.lr: [1e-3, 3e-3]}");
    std::set<std::string> seen;
    for (auto it = value.begin(); it != value.end(); ++it) {
      const std::string key = key_name(it->first, "grid");
      check_job_key(key, at(it->first), "grid");
      if (!seen.insert(key).second)
        throw SpecError(at(it->first) + ": duplicate key '" + key + "' in grid; keep one");
      const YAML::Node values = it->second;
      if (!values.IsSequence())
        throw SpecError(at(values) + ": expected a list of values for grid key '" + key +
                        "', e.g. " + key + ": [" + (values.IsScalar() ? values.Scalar() : "a") +
                        ", ...]; a single value belongs in set:");
      if (values.size() == 0)
        throw SpecError(at(values) + ": grid key '" + key +
                        "' has no values; give at least one or remove it");
      std::vector<SweepOverride> options;
      for (const YAML::Node& v : values) options.push_back(override_of(key, v));
      grid_.emplace_back(key, std::move(options));
    }
  }

  void parse_points(const YAML::Node& value, const std::string& where) {
    if (value.IsNull()) return;
    if (!value.IsSequence())
      throw SpecError(where +
                      ": expected a list of points, e.g. points: [{optim.lr: 1e-2}, "
                      "{optim.lr: 3e-2, train.steps: 50}]");
    for (size_t i = 0; i < value.size(); ++i) {
      const std::string context = fmt::format("points[{}]", i);
      listed_.push_back(value[i].IsNull() ? std::vector<SweepOverride>{}
                                          : overrides_of(value[i], context, at(value[i])));
    }
  }

  void parse_slurm(const YAML::Node& value, const std::string& where) {
    if (value.IsNull()) return;
    if (!value.IsMap())
      throw SpecError(where +
                      ": expected a map of sbatch options in slurm, e.g. "
                      "slurm: {partition: gpu, time: \"04:00:00\"}");
    for (auto it = value.begin(); it != value.end(); ++it) {
      std::string option = key_name(it->first, "slurm");
      for (char& c : option) c = c == '_' ? '-' : c;
      bool usable = !option.empty() && std::isalpha(static_cast<unsigned char>(option[0]));
      for (const char c : option)
        usable = usable && (std::isalnum(static_cast<unsigned char>(c)) || c == '-');
      if (!usable)
        throw SpecError(at(it->first) + ": '" + option + "' in slurm is not an sbatch option " +
                        "name; use long names such as partition, time, ntasks, gres");
      if (kSlurmReserved.count(option))
        throw SpecError(at(it->first) + ": slurm option '" + option + "' is set by the sweep " +
                        "itself; use name: for the job name and --max-parallel for the array");
      const YAML::Node v = it->second;
      if (!v.IsScalar() || v.Scalar().find('\n') != std::string::npos)
        throw SpecError(at(v) + ": expected one value for slurm option '" + option + "'");
      sweep_.slurm.emplace_back(option, v.Scalar());
    }
  }

  void expand_points() {
    size_t count = listed_.size();
    if (!grid_.empty()) {
      size_t product = 1;
      for (const auto& [key, values] : grid_) {
        product *= values.size();
        if (product > kMaxPoints) break;
      }
      count += product;
    }
    if (count == 0)
      throw SpecError(path_ +
                      ": the sweep has no points; add grid: {optim.lr: [1e-3, 3e-3]} "
                      "and/or points: [{optim.lr: 1e-2}]");
    if (count > kMaxPoints)
      throw SpecError(
          fmt::format("{}: the sweep has more than {} points; shrink the grid", path_, kMaxPoints));
    std::vector<std::vector<SweepOverride>> all = grid_product(grid_);
    all.insert(all.end(), listed_.begin(), listed_.end());

    // Leaves named by more than one key ("steps": train.steps, eval.steps) slug in full.
    std::map<std::string, std::set<std::string>> keys_by_leaf;
    for (const auto& overrides : all)
      for (const SweepOverride& o : overrides)
        keys_by_leaf[o.key.substr(o.key.rfind('.') + 1)].insert(o.key);
    std::set<std::string> ambiguous;
    for (const auto& [leaf, keys] : keys_by_leaf)
      if (keys.size() > 1) ambiguous.insert(leaf);

    std::map<std::string, int> job_to_point;  // resolved job (less name, log.dir) -> index
    for (size_t i = 0; i < all.size(); ++i) {
      SweepPoint point;
      point.index = static_cast<int>(i);
      point.overrides = std::move(all[i]);
      point.job_name = fmt::format("{}-{}", sweep_.name, i);
      point.run_dir =
          (fs::path(sweep_.dir) / fmt::format("{}-{}", i, slug_of(point.overrides, ambiguous)))
              .lexically_normal()
              .string();
      point.spec = load_point(point);
      JobSpec canonical = point.spec;
      canonical.name.clear();
      canonical.log.dir.clear();
      const auto [it, inserted] = job_to_point.emplace(job_spec_to_yaml(canonical), point.index);
      if (!inserted) {
        const SweepPoint& first = sweep_.points[static_cast<size_t>(it->second)];
        const std::string where =
            point.overrides.empty() ? path_ : point.overrides.front().location;
        throw SpecError(fmt::format(
            "{}: points {} ({}) and {} ({}) give the same job; remove "
            "one of them",
            where, first.index, describe_overrides(first), point.index, describe_overrides(point)));
      }
      sweep_.points.push_back(std::move(point));
    }
  }

  // The point's job as the child `train` will load it; errors point into the sweep file.
  JobSpec load_point(const SweepPoint& point) const {
    std::vector<std::string> sets;
    for (const SweepOverride& o : sweep_.common) sets.push_back(o.text());
    for (const SweepOverride& o : point.overrides) sets.push_back(o.text());
    sets.push_back("name=" + point.job_name);
    sets.push_back("log.dir=" + point.run_dir);
    sets.push_back("checkpoint.resume=auto");
    try {
      return sweep_.base.empty() ? parse_job_spec(kQuickstartYaml, "<embedded quickstart>", sets)
                                 : parse_job_spec(base_text_, sweep_.base, sets);
    } catch (const SpecError& e) {
      const std::string message = e.what();
      const std::string what = fmt::format("point {} ({})", point.index, describe_overrides(point));
      const auto from = [&](const SweepOverride& o) {
        const std::string prefix = "--set " + o.text() + ": ";
        return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : std::string();
      };
      for (auto it = point.overrides.rbegin(); it != point.overrides.rend(); ++it)
        if (std::string rest = from(*it); !rest.empty())
          throw SpecError(it->location + ": " + what + ": " + rest);
      for (auto it = sweep_.common.rbegin(); it != sweep_.common.rend(); ++it)
        if (std::string rest = from(*it); !rest.empty())
          throw SpecError(it->location + ": set " + it->text() + ": " + rest);
      throw SpecError(path_ + ": " + what + ": " + message);
    }
  }

  const std::string& path_;
  SweepSpec sweep_;
  std::string base_text_;
  std::vector<std::pair<std::string, std::vector<SweepOverride>>> grid_;
  std::vector<std::vector<SweepOverride>> listed_;
};

}  // namespace

bool is_sweep_controlled_key(const std::string& key) {
  return key == "name" || key == "log.dir" || key == "checkpoint.resume";
}

SweepSpec parse_sweep_spec(const std::string& yaml_text, const std::string& path) {
  return SweepParser(path).parse(yaml_text);
}

SweepSpec load_sweep_spec(const std::string& path) {
  std::error_code error;
  if (fs::is_directory(path, error))
    throw SpecError(path + ": is a directory; give the path of a sweep file (YAML)");
  std::ifstream file(path, std::ios::binary);
  if (!file) throw SpecError(path + ": cannot open the sweep file; check the path");
  std::ostringstream text;
  text << file.rdbuf();
  return parse_sweep_spec(text.str(), path);
}

std::vector<std::string> train_arguments(const SweepSpec& sweep, const SweepPoint& point) {
  std::vector<std::string> args;
  if (!sweep.base.empty()) args.push_back(sweep.base);
  const auto add = [&](const std::string& text) {
    args.push_back("--set");
    args.push_back(text);
  };
  for (const SweepOverride& o : sweep.common) add(o.text());
  for (const SweepOverride& o : point.overrides) add(o.text());
  add("name=" + point.job_name);
  add("log.dir=" + point.run_dir);
  add("checkpoint.resume=auto");
  return args;
}

std::string describe_overrides(const SweepPoint& point) {
  if (point.overrides.empty()) return "(base job)";
  std::string out;
  for (const SweepOverride& o : point.overrides) out += (out.empty() ? "" : " ") + o.text();
  return out;
}

}  // namespace sg
