#include "config/job_spec_keys.h"

#include <algorithm>
#include <cctype>

namespace sg {
namespace {

// The YAML path is the C++ member path spelled out by the preprocessor, so a key can never
// disagree with the field it sets. decltype(auto) on a parenthesised member yields a reference.
#define SG_KEY(member) \
  JobSpecKey { #member, +[](JobSpec& s) -> decltype(auto) { return (s.member); } }
#define SG_KEY_AUTO(member) \
  JobSpecKey { #member, +[](JobSpec& s) -> decltype(auto) { return (s.member); }, true }

// The keys every job has; a family's own model keys come from the registry (model_config.h)
// and are listed between model.arch and model.init_from.
const JobSpecKey kCoreKeys[] = {
    SG_KEY(name),
    SG_KEY(seed),
    SG_KEY(model.arch),
    SG_KEY(model.init_from),
    SG_KEY(data.dataset),
    SG_KEY(data.train),
    SG_KEY(data.val),
    SG_KEY(data.root),
    SG_KEY_AUTO(data.workers),
    SG_KEY(data.synthetic_images),
    SG_KEY(data.synthetic_order),
    SG_KEY(data.synthetic_branching),
    SG_KEY(data.synthetic_train_tokens),
    SG_KEY(data.synthetic_val_tokens),
    SG_KEY(optim.name),
    SG_KEY(optim.lr),
    SG_KEY(optim.min_lr),
    SG_KEY(optim.warmup_steps),
    SG_KEY(optim.decay),
    SG_KEY(optim.decay_every),
    SG_KEY(optim.decay_gamma),
    SG_KEY(optim.betas),
    SG_KEY(optim.eps),
    SG_KEY(optim.momentum),
    SG_KEY(optim.nesterov),
    SG_KEY(optim.muon_lr),
    SG_KEY(optim.muon_momentum),
    SG_KEY(optim.muon_nesterov),
    SG_KEY(optim.muon_ns_steps),
    SG_KEY(optim.weight_decay),
    SG_KEY(optim.grad_clip),
    SG_KEY(train.steps),
    SG_KEY(train.global_batch),
    SG_KEY(train.micro_batch),
    SG_KEY(train.seq_len),
    SG_KEY(train.precision),
    SG_KEY(train.recompute),
    SG_KEY(train.loss_scale),
    SG_KEY(train.time_limit),
    SG_KEY(train.max_skipped_steps),
    SG_KEY(train.deterministic),
    SG_KEY(eval.every),
    SG_KEY(eval.steps),
    SG_KEY(parallel.data),
    SG_KEY(parallel.tensor),
    SG_KEY(parallel.pipeline),
    SG_KEY(parallel.schedule),
    SG_KEY(parallel.zero),
    SG_KEY(devices.backend),
    SG_KEY(devices.processes),
    SG_KEY_AUTO(devices.threads),
    SG_KEY(devices.peak_tflops),
    SG_KEY(devices.share_gpus),
    SG_KEY(checkpoint.every),
    SG_KEY(checkpoint.keep),
    SG_KEY(checkpoint.resume),
    SG_KEY(log.dir),
    SG_KEY(log.every),
    SG_KEY(log.tensorboard),
};

#undef SG_KEY
#undef SG_KEY_AUTO

// The core keys with `family_keys` after model.arch.
std::vector<JobSpecKey> with_family_keys(std::span<const JobSpecKey> family_keys) {
  std::vector<JobSpecKey> keys;
  for (const JobSpecKey& key : kCoreKeys) {
    keys.push_back(key);
    if (key.path == "model.arch") keys.insert(keys.end(), family_keys.begin(), family_keys.end());
  }
  return keys;
}

struct KeyTables {
  std::vector<JobSpecKey> all;  // every family's keys, in registry order
  std::vector<std::pair<std::string_view, std::vector<JobSpecKey>>> by_arch;
};

const KeyTables& key_tables() {
  static const KeyTables tables = [] {
    KeyTables t;
    std::vector<JobSpecKey> family_keys;
    for (const ModelFamilyEntry& entry : model_family_entries()) {
      std::span<const JobSpecKey> keys = entry.keys();
      family_keys.insert(family_keys.end(), keys.begin(), keys.end());
      t.by_arch.emplace_back(entry.arch, with_family_keys(keys));
    }
    t.all = with_family_keys(family_keys);
    return t;
  }();
  return tables;
}

std::vector<std::string_view> section_names() {
  std::vector<std::string_view> names;
  for (const JobSpecKey& key : kCoreKeys)
    if (!key.section().empty() && std::find(names.begin(), names.end(), key.section()) == names.end())
      names.push_back(key.section());
  return names;
}

}  // namespace

std::string_view JobSpecKey::section() const {
  size_t dot = path.find('.');
  return dot == std::string_view::npos ? std::string_view{} : path.substr(0, dot);
}

std::string_view JobSpecKey::leaf() const {
  size_t dot = path.find('.');
  return dot == std::string_view::npos ? path : path.substr(dot + 1);
}

std::span<const JobSpecKey> job_spec_keys() { return key_tables().all; }

std::span<const JobSpecKey> job_spec_keys(std::string_view arch) {
  for (const auto& [name, keys] : key_tables().by_arch)
    if (name == arch) return keys;
  return kCoreKeys;
}

const JobSpecKey* find_job_spec_key(std::string_view path) {
  for (const JobSpecKey& key : job_spec_keys())
    if (key.path == path) return &key;
  return nullptr;
}

bool is_job_spec_section(std::string_view name) {
  for (const JobSpecKey& key : kCoreKeys)
    if (!name.empty() && key.section() == name) return true;
  return false;
}

int edit_distance(std::string_view a, std::string_view b) {
  // d[i][j] = distance between the first i chars of a and the first j chars of b.
  std::vector<std::vector<int>> d(a.size() + 1, std::vector<int>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      int substitute = d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, substitute});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::optional<std::string> nearest_word(std::string_view word,
                                        const std::vector<std::string_view>& candidates) {
  // A typo changes a character or two and rarely the first one; allowing more would "correct"
  // unrelated words (tpu -> cpu, some -> none). Case is ignored, so 1F1B suggests 1f1b.
  auto lower = [](std::string_view text) {
    std::string out(text);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  std::string lower_word = lower(word);
  int allowed = word.size() <= 3 ? 1 : word.size() <= 7 ? 2 : 3;
  std::optional<std::string> best;
  int best_distance = allowed + 1;
  for (std::string_view candidate : candidates) {
    std::string lower_candidate = lower(candidate);
    if (lower_word.empty() || lower_candidate.empty() || lower_word[0] != lower_candidate[0])
      continue;
    int distance = edit_distance(lower_word, lower_candidate);
    if (distance < best_distance) {
      best_distance = distance;
      best = std::string(candidate);
    }
  }
  return best;
}

std::string not_one_of_message(std::string_view key, std::string_view got, std::string_view word,
                               const std::vector<std::string_view>& allowed) {
  std::string list;
  for (std::string_view a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  const auto near = nearest_word(word, allowed);
  return std::string(key) + " must be one of " + list + "; got " + std::string(got) +
         (near ? "; did you mean '" + *near + "'?" : "");
}

std::optional<std::string> suggest_job_spec_key(std::string_view path) {
  size_t dot = path.find('.');
  std::string_view section = dot == std::string_view::npos ? std::string_view{} : path.substr(0, dot);
  std::string_view leaf = dot == std::string_view::npos ? path : path.substr(dot + 1);

  // An unknown section: suggest a section name (keeping the leaf), or a top-level key.
  if (!section.empty() && !is_job_spec_section(section)) {
    auto near = nearest_word(section, section_names());
    if (!near) return std::nullopt;
    std::string fixed = *near + "." + std::string(leaf);
    return find_job_spec_key(fixed) ? fixed : *near;
  }

  // The leaf spelt right but in the wrong section ("train.lr" -> "optim.lr").
  for (const JobSpecKey& key : job_spec_keys())
    if (key.leaf() == leaf && key.section() != section) return std::string(key.path);

  std::vector<std::string_view> candidates;
  for (const JobSpecKey& key : job_spec_keys())
    if (key.section() == section) candidates.push_back(key.leaf());
  if (section.empty())
    for (std::string_view name : section_names()) candidates.push_back(name);
  auto near = nearest_word(leaf, candidates);
  if (!near) return std::nullopt;
  return section.empty() ? *near : std::string(section) + "." + *near;
}

std::string did_you_mean(std::string_view path) {
  auto suggestion = suggest_job_spec_key(path);
  return suggestion ? "; did you mean '" + *suggestion + "'?" : std::string{};
}

}  // namespace sg
