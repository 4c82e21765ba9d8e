#include "checkpoint/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

#include "checkpoint/json_fields.h"
#include "util/error.h"

namespace sg {
namespace fs = std::filesystem;
namespace {

constexpr const char* kFormatName = "singularity-checkpoint";
constexpr const char* kManifestName = "manifest.json";
const std::string kAdvice = kCorruptCheckpointAdvice;
const std::string kWhatToDo = "; " + kAdvice;

// step_%08d exactly (no .tmp-* suffix); returns the step, or -1 for any other name.
int64_t step_of_dir_name(const std::string& name) {
  if (name.size() <= 5 || name.compare(0, 5, "step_") != 0 || name.size() > 5 + 18) return -1;
  int64_t step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

// step_* directories in dir, oldest first; with require_manifest only those with a manifest.
std::vector<std::pair<int64_t, std::string>> scan_step_dirs(const std::string& dir,
                                                            bool require_manifest) {
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return found;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const int64_t step = step_of_dir_name(entry.path().filename().string());
    if (step < 0 || !entry.is_directory(ec)) continue;
    if (require_manifest && !fs::exists(entry.path() / kManifestName, ec)) continue;
    found.emplace_back(step, entry.path().string());
  }
  if (ec) throw RunError(dir + ": cannot list checkpoints: " + ec.message());
  std::sort(found.begin(), found.end());
  return found;
}

// A file name inside a checkpoint: plain, so a manifest cannot point outside its directory.
void check_file_name(const std::string& where, const std::string& name) {
  if (name.empty() || name == kManifestName || name.find('/') != std::string::npos ||
      name[0] == '.')
    throw RunError(where + ": invalid checkpoint file name '" + excerpt(name) + "'" + kWhatToDo);
}

// Where the manifest's own checksum lies: the 16 digits after `\n  "manifest_xxh3_64": "`, a
// member of the top-level object as dump(2) writes one (a raw newline cannot occur inside a JSON
// string, and deeper members are indented further, so only that member matches). npos when the
// member is not there exactly once in that form.
size_t manifest_checksum_at(const std::string& text) {
  const std::string member = std::string("\n  \"") + kManifestChecksumKey + "\": \"";
  const size_t at = text.find(member);
  if (at == std::string::npos || text.find(member, at + 1) != std::string::npos)
    return std::string::npos;
  const size_t digits = at + member.size();
  if (digits + 16 >= text.size() || text[digits + 16] != '"') return std::string::npos;
  return digits;
}

// The manifest's checksum (docs/design-notes.md, "Checkpoint files"): XXH3-64 of the file's
// bytes with its own 16 digits read as zeros. Checked when present; manifests written before
// it existed have none and load as before.
void check_manifest_checksum(const std::string& text, const JsonFields& manifest) {
  if (!manifest.has(kManifestChecksumKey)) return;
  const nlohmann::json& value = manifest.value(kManifestChecksumKey);
  if (!value.is_string() || !is_xxh3_hex(value.get<std::string>()))
    throw manifest.wrong(kManifestChecksumKey, "a string of 16 lower-case hex digits");
  const std::string claimed = value.get<std::string>();
  const size_t digits = manifest_checksum_at(text);
  if (digits == std::string::npos || text.compare(digits, 16, claimed) != 0)
    throw manifest.error(kManifestChecksumKey,
                         "is not on a line of its own as singularity writes it, so the "
                         "manifest cannot be checked (it was rewritten by another program)");
  std::string zeroed = text;
  zeroed.replace(digits, 16, 16, '0');
  if (xxh3_hex(zeroed.data(), zeroed.size()) != claimed)
    throw manifest.error(kManifestChecksumKey,
                         "does not match the manifest's content (file corrupt or edited)");
}

// checkpoint.resume: PATH must be a checkpoint, not some other directory (a run directory, /etc):
// say what it is and what to give instead, and never advise deleting it.
void check_resume_path(const std::string& path) {
  std::error_code ec;
  const std::string give =
      "; set checkpoint.resume to a step_* directory that train wrote (such as "
      "<log.dir>/checkpoints/step_00001000), auto or never";
  if (!fs::exists(path, ec))
    throw RunError("checkpoint.resume " + path + ": no such directory" + give);
  if (!fs::is_directory(path, ec))
    throw RunError("checkpoint.resume " + path + ": not a directory, so not a checkpoint" + give);
  if (fs::exists(fs::path(path) / kManifestName, ec) ||
      step_of_dir_name(fs::path(path).lexically_normal().filename().string()) >= 0)
    return;  // a checkpoint, complete or not: load_checkpoint says what is wrong with it
  std::string newest;
  for (const std::string& dir : {path, (fs::path(path) / "checkpoints").string()}) {
    try {
      const auto found = scan_step_dirs(dir, /*require_manifest=*/true);
      if (newest.empty() && !found.empty()) newest = found.back().second;
    } catch (const RunError&) {  // unreadable: it is no checkpoint either way
    }
  }
  throw RunError("checkpoint.resume " + path +
                 ": not a checkpoint (it has no manifest.json)" +
                 (newest.empty() ? std::string(" nor a run directory holding checkpoints")
                                 : "; it holds checkpoints, the newest is " + newest) +
                 give);
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) throw RunError(path + ": cannot delete: " + ec.message());
}

void prune_checkpoints(const std::string& dir, const std::string& just_written, int keep) {
  if (keep <= 0) return;
  auto complete = scan_step_dirs(dir, /*require_manifest=*/true);
  size_t excess = complete.size() > static_cast<size_t>(keep) ? complete.size() - keep : 0;
  for (size_t i = 0; i < complete.size() && excess > 0; ++i) {
    if (complete[i].second == just_written) continue;  // an older step saved after a rewind
    remove_tree(complete[i].second);
    --excess;
  }
  fsync_directory(dir);
}

}  // namespace

std::string checkpoint_dir_name(int64_t step) { return fmt::format("step_{:08d}", step); }

std::vector<std::pair<int64_t, std::string>> list_checkpoints(const std::string& dir) {
  return scan_step_dirs(dir, /*require_manifest=*/true);
}

std::string save_checkpoint(const std::string& checkpoints_dir, int64_t step,
                            const std::map<std::string, std::vector<TensorRef>>& files,
                            const nlohmann::json& state, const std::string& job_yaml, int keep) {
  if (step < 0 || step > kMaxCheckpointStep)
    throw RunError(checkpoints_dir + ": cannot save a checkpoint for step " +
                   std::to_string(step) + " (steps run from 0 to " +
                   std::to_string(kMaxCheckpointStep) + ")");
  std::error_code ec;
  fs::create_directories(checkpoints_dir, ec);
  if (ec) throw RunError(checkpoints_dir + ": cannot create the checkpoint directory: " +
                         ec.message());
  const std::string final_path = (fs::path(checkpoints_dir) / checkpoint_dir_name(step)).string();
  const std::string pid = std::to_string(::getpid());
  const std::string temp_path = final_path + ".tmp-" + pid;
  remove_tree(temp_path);  // left by a crashed save of this same process id
  fs::create_directory(temp_path, ec);
  if (ec) throw RunError(temp_path + ": cannot create: " + ec.message());

  try {
    nlohmann::json manifest_files = nlohmann::json::object();
    for (const auto& [name, tensors] : files) {
      check_file_name(final_path, name);
      const FileDigest digest = write_safetensors(
          (fs::path(temp_path) / name).string(), tensors, {{"step", std::to_string(step)}});
      manifest_files[name] = {{"bytes", digest.bytes}, {"xxh3_64", digest.xxh3}};
    }
    const nlohmann::json manifest = {{"format", kFormatName},
                                     {"version", kCheckpointFormatVersion},
                                     {"step", step},
                                     {"files", manifest_files},
                                     {"state", state},
                                     {"job_yaml", job_yaml}};
    // Written last: a directory with a manifest has all its files.
    write_text_file((fs::path(temp_path) / kManifestName).string(), manifest_text(manifest));
  } catch (...) {
    fs::remove_all(temp_path, ec);
    throw;
  }

  // A directory cannot be renamed over a non-empty one: move the old step aside first. Its
  // temporary name ends in .tmp-*, so readers ignore it if we crash before deleting it.
  const std::string old_path = final_path + ".tmp-" + pid + "-old";
  const bool replacing = fs::exists(final_path, ec);
  if (replacing) {
    remove_tree(old_path);
    fs::rename(final_path, old_path, ec);
    if (ec) throw RunError(final_path + ": cannot replace the existing checkpoint: " +
                           ec.message());
  }
  fs::rename(temp_path, final_path, ec);
  if (ec) throw RunError(final_path + ": cannot rename the finished checkpoint into place: " +
                         ec.message());
  fsync_directory(checkpoints_dir);
  if (replacing) remove_tree(old_path);
  prune_checkpoints(checkpoints_dir, final_path, keep);
  return final_path;
}

namespace {

// A directory that holds no manifest.json: an incomplete checkpoint when it is named like one,
// else no checkpoint at all (never advise deleting it).
RunError no_manifest_error(const std::string& path, const std::string& manifest_path) {
  if (step_of_dir_name(fs::path(path).lexically_normal().filename().string()) >= 0)
    return RunError(manifest_path + ": missing; the checkpoint is incomplete" + kWhatToDo);
  return RunError(path + ": not a checkpoint (it has no manifest.json); give a step_* directory "
                  "that train wrote, such as <log.dir>/checkpoints/step_00001000");
}

LoadedCheckpoint load_checkpoint_files(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec))
    throw RunError(path +
                   (fs::exists(path, ec) ? ": not a directory, so not a checkpoint"
                                         : ": no such checkpoint directory") +
                   "; give a step_* directory that train wrote, such as "
                   "<log.dir>/checkpoints/step_00001000");
  const std::string manifest_path = (fs::path(path) / kManifestName).string();
  std::ifstream in(manifest_path, std::ios::binary);
  if (!in) throw no_manifest_error(path, manifest_path);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string text = buffer.str();

  const nlohmann::json manifest =
      parse_bounded_json(text, manifest_path, "", kAdvice);
  const JsonFields m(manifest, manifest_path, kAdvice);
  check_manifest_checksum(text, m);
  if (!m.has("format") || m.value("format") != kFormatName)
    throw RunError(manifest_path + ": not a singularity checkpoint manifest (field format is " +
                   (m.has("format") ? json_excerpt(m.value("format")) : std::string("missing")) +
                   ", not \"" + kFormatName + "\")" + kWhatToDo);
  const nlohmann::json& version = m.value("version");
  if (!version.is_number_integer() || version != kCheckpointFormatVersion)
    throw m.wrong("version", std::to_string(kCheckpointFormatVersion) +
                                 ", the checkpoint format this build reads (a newer "
                                 "singularity wrote it, or the manifest is corrupt)");

  LoadedCheckpoint loaded;
  loaded.path = path;
  loaded.step = m.integer("step", 0, kMaxCheckpointStep);
  const int64_t named = step_of_dir_name(fs::path(path).lexically_normal().filename().string());
  if (named >= 0 && named != loaded.step)
    throw m.error("step", "is " + std::to_string(loaded.step) + " but the directory is " +
                              checkpoint_dir_name(named) + " (the manifest is corrupt)");
  if (m.has("state") && !m.value("state").is_object() && !m.value("state").is_null())
    throw m.wrong("state", "an object");
  loaded.state = m.has("state") ? m.value("state") : nlohmann::json();
  loaded.job_yaml = m.string("job_yaml");
  const JsonFields files = m.object("files");
  for (const auto& [name, value] : files.json().items()) {
    check_file_name(manifest_path, name);
    const JsonFields entry(value, manifest_path, kAdvice, "files." + excerpt(name) + ".");
    const uint64_t expected = entry.unsigned_integer("bytes");
    const nlohmann::json& sum = entry.value("xxh3_64");
    if (!sum.is_string() || !is_xxh3_hex(sum.get<std::string>()))
      throw entry.wrong("xxh3_64", "a string of 16 lower-case hex digits");
    const std::string checksum = sum.get<std::string>();
    const std::string file_path = (fs::path(path) / name).string();
    if (!fs::is_regular_file(file_path, ec))
      throw RunError(file_path + ": missing (listed in the manifest)" + kWhatToDo);
    const uint64_t bytes = fs::file_size(file_path, ec);
    if (ec) throw RunError(file_path + ": cannot stat: " + ec.message() + kWhatToDo);
    if (bytes != expected)
      throw RunError(file_path + ": file is " + std::to_string(bytes) + " bytes but the manifest "
                     "says " + std::to_string(expected) + " (file " +
                     (bytes < expected ? "truncated" : "corrupt") + ")" + kWhatToDo);
    if (file_xxh3_hex(file_path) != checksum)
      throw RunError(file_path + ": checksum mismatch (file corrupt)" + kWhatToDo);
    loaded.files.emplace(name, SafetensorsFile(file_path));
  }
  return loaded;
}

}  // namespace

std::string manifest_text(nlohmann::json manifest) {
  manifest[kManifestChecksumKey] = std::string(16, '0');
  std::string text = manifest.dump(2) + "\n";
  const size_t digits = manifest_checksum_at(text);
  if (digits == std::string::npos)
    throw RunError("cannot place the manifest checksum (top-level object expected)");
  text.replace(digits, 16, xxh3_hex(text.data(), text.size()));
  return text;
}

LoadedCheckpoint load_checkpoint(const std::string& path) {
  try {
    return load_checkpoint_files(path);
  } catch (const nlohmann::json::exception& e) {  // a gap in the checks above; still one line
    throw RunError((fs::path(path) / kManifestName).string() + ": unexpected content (" +
                   excerpt(e.what()) + ")" + kWhatToDo);
  }
}

std::optional<std::string> find_resume_checkpoint(const std::string& checkpoints_dir,
                                                  const std::string& resume,
                                                  std::vector<std::string>* warnings) {
  if (resume == "never") return std::nullopt;
  if (resume != "auto") {
    check_resume_path(resume);
    load_checkpoint(resume);  // verify now, so a bad PATH fails before any work
    return resume;
  }
  auto candidates = scan_step_dirs(checkpoints_dir, /*require_manifest=*/false);
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    try {
      load_checkpoint(it->second);
      return it->second;
    } catch (const RunError& e) {
      if (warnings != nullptr)
        warnings->push_back("skipping checkpoint " + it->second + ": " + e.what());
    }
  }
  return std::nullopt;
}

}  // namespace sg
