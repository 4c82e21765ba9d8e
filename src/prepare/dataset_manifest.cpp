#include "prepare/dataset_manifest.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "data/file_io.h"
#include "util/error.h"

namespace sg {

namespace fs = std::filesystem;

namespace {

bool is_shard_name(const std::string& name) {
  static const std::regex pattern("(train|val)_[0-9]{6}\\.bin");
  return std::regex_match(name, pattern);
}

std::vector<fs::path> dataset_shards(const std::string& dir) {
  std::error_code ec;
  std::vector<fs::path> shards;
  for (const auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file() && is_shard_name(entry.path().filename().string()))
      shards.push_back(entry.path());
  return shards;
}

}  // namespace

std::string prepare_destination(const std::string& dst, const std::string& kind,
                                const std::string& source, bool force) {
  std::error_code ec;
  if (fs::exists(dst, ec) && !fs::is_directory(dst, ec))
    throw SpecError(dst + ": exists and is not a directory; give a directory for the dataset");
  fs::create_directories(dst, ec);
  if (ec) throw RunError(dst + ": cannot create the directory: " + ec.message());

  const std::string manifest_path = dst + "/" + kDatasetManifestName;
  const std::vector<fs::path> shards = dataset_shards(dst);
  if (!force) {
    const std::string advice = "; choose another destination or pass --force to replace it";
    if (fs::exists(manifest_path)) {
      std::ifstream in(manifest_path);
      std::stringstream text;
      text << in.rdbuf();
      const auto old = nlohmann::json::parse(text.str(), nullptr, false);
      if (old.is_discarded() || !old.is_object())
        throw SpecError(manifest_path + ": unreadable, so this may be another dataset" + advice);
      const std::string old_kind = old.value("kind", ""), old_source = old.value("source", "");
      if (old_kind != kind || old_source != source)
        throw SpecError(dst + ": holds another dataset (" + old_kind + " from " + old_source +
                        ")" + advice);
    } else if (!shards.empty()) {
      throw SpecError(dst + ": holds token shards (" + shards.front().filename().string() +
                      ") but no dataset.json, so they may belong to another dataset" + advice);
    }
  }
  // Staging directories of earlier prepares that died (a kill leaves no chance to clean up).
  for (const auto& entry : fs::directory_iterator(dst, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_directory() && name.rfind(".prepare-", 0) == 0) fs::remove_all(entry.path(), ec);
  }
  const std::string staging = dst + "/.prepare-" + std::to_string(getpid());
  fs::create_directory(staging, ec);
  if (ec) throw RunError(staging + ": cannot create the directory: " + ec.message());
  return staging;
}

void install_dataset(const std::string& dst, const std::string& staging) {
  std::error_code ec;
  const std::string manifest = std::string("/") + kDatasetManifestName;
  fs::remove(dst + manifest, ec);
  for (const auto& s : dataset_shards(dst)) fs::remove(s, ec);
  for (const auto& s : dataset_shards(staging)) {
    fs::rename(s, fs::path(dst) / s.filename(), ec);
    if (ec) throw RunError(dst + ": cannot move the new shard " + s.filename().string() +
                           " in: " + ec.message() + "; the new dataset is in " + staging);
  }
  fs::rename(staging + manifest, dst + manifest, ec);
  if (ec) throw RunError(dst + manifest + ": cannot move the new manifest in: " + ec.message());
  fs::remove_all(staging, ec);
}

void discard_staging(const std::string& staging) {
  std::error_code ec;
  fs::remove_all(staging, ec);
}

void write_dataset_manifest(const std::string& dst, const nlohmann::json& manifest) {
  AtomicFileWriter out(dst + "/" + kDatasetManifestName);
  const std::string text = manifest.dump(2) + "\n";
  out.write(text.data(), text.size());
  out.commit();
}

}  // namespace sg
