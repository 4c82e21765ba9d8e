#include "checkpoint/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace sg {
namespace fs = std::filesystem;
namespace {

constexpr const char* kFormatName = "singularity-checkpoint";
constexpr const char* kManifestName = "manifest.json";
const std::string kWhatToDo =
    "; delete this checkpoint or resume from another with checkpoint.resume: PATH";

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
    throw RunError(where + ": invalid checkpoint file name '" + name + "'");
}

void write_text_file(const std::string& path, const std::string& text) {
  AtomicFileWriter out(path);
  out.write(text.data(), text.size());
  out.commit();
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
  if (step < 0) throw RunError(checkpoints_dir + ": cannot save a checkpoint for step " +
                               std::to_string(step));
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
    write_text_file((fs::path(temp_path) / kManifestName).string(), manifest.dump(2) + "\n");
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

LoadedCheckpoint load_checkpoint_unchecked(const std::string& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec))
    throw RunError(path + ": no such checkpoint directory; set checkpoint.resume to an existing "
                   "step_* directory, auto or never");
  const std::string manifest_path = (fs::path(path) / kManifestName).string();
  std::ifstream in(manifest_path, std::ios::binary);
  if (!in)
    throw RunError(manifest_path + ": missing; the checkpoint is incomplete" + kWhatToDo);
  std::stringstream text;
  text << in.rdbuf();

  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::parse_error& e) {
    throw RunError(manifest_path + ": not valid JSON (error at byte " + std::to_string(e.byte) +
                   "); the manifest is corrupt" + kWhatToDo);
  }
  auto bad = [&](const std::string& what) {
    return RunError(manifest_path + ": " + what + kWhatToDo);
  };
  if (!manifest.is_object() || !manifest.contains("format") || manifest["format"] != kFormatName)
    throw bad("not a singularity checkpoint manifest");
  if (!manifest.contains("version") || !manifest["version"].is_number_integer())
    throw bad("no format version");
  if (manifest["version"].get<int>() != kCheckpointFormatVersion)
    throw bad("format version " + manifest["version"].dump() + ", but this build reads version " +
              std::to_string(kCheckpointFormatVersion));
  if (!manifest.contains("step") || !manifest["step"].is_number_integer())
    throw bad("no integer step");
  if (!manifest.contains("files") || !manifest["files"].is_object())
    throw bad("no files table");
  if (!manifest.contains("job_yaml") || !manifest["job_yaml"].is_string())
    throw bad("no job_yaml");

  LoadedCheckpoint loaded;
  loaded.path = path;
  loaded.step = manifest["step"].get<int64_t>();
  loaded.state = manifest.value("state", nlohmann::json());
  loaded.job_yaml = manifest["job_yaml"].get<std::string>();
  for (const auto& [name, entry] : manifest["files"].items()) {
    check_file_name(manifest_path, name);
    const std::string file_path = (fs::path(path) / name).string();
    if (!entry.is_object() || !entry.contains("bytes") || !entry["bytes"].is_number_unsigned() ||
        !entry.contains("xxh3_64") || !entry["xxh3_64"].is_string())
      throw bad("entry for " + name + " needs bytes and xxh3_64");
    if (!fs::is_regular_file(file_path, ec))
      throw RunError(file_path + ": missing (listed in the manifest)" + kWhatToDo);
    const uint64_t bytes = fs::file_size(file_path, ec);
    if (ec) throw RunError(file_path + ": cannot stat: " + ec.message() + kWhatToDo);
    const uint64_t expected = entry["bytes"].get<uint64_t>();
    if (bytes != expected)
      throw RunError(file_path + ": file is " + std::to_string(bytes) + " bytes but the manifest "
                     "says " + std::to_string(expected) + " (file " +
                     (bytes < expected ? "truncated" : "corrupt") + ")" + kWhatToDo);
    if (file_xxh3_hex(file_path) != entry["xxh3_64"].get<std::string>())
      throw RunError(file_path + ": checksum mismatch (file corrupt)" + kWhatToDo);
    loaded.files.emplace(name, SafetensorsFile(file_path));
  }
  return loaded;
}

}  // namespace

LoadedCheckpoint load_checkpoint(const std::string& path) {
  try {
    return load_checkpoint_unchecked(path);
  } catch (const nlohmann::json::exception& e) {  // a field of the wrong JSON type
    throw RunError((fs::path(path) / kManifestName).string() + ": unexpected content (" +
                   e.what() + ")" + kWhatToDo);
  }
}

std::optional<std::string> find_resume_checkpoint(const std::string& checkpoints_dir,
                                                  const std::string& resume,
                                                  std::vector<std::string>* warnings) {
  if (resume == "never") return std::nullopt;
  if (resume != "auto") {
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
