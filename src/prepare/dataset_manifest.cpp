#include "prepare/dataset_manifest.h"

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

}  // namespace

void prepare_destination(const std::string& dst, const std::string& kind, const std::string& source,
                         bool force) {
  std::error_code ec;
  if (fs::exists(dst, ec) && !fs::is_directory(dst, ec))
    throw SpecError(dst + ": exists and is not a directory; give a directory for the dataset");
  fs::create_directories(dst, ec);
  if (ec) throw RunError(dst + ": cannot create the directory: " + ec.message());

  const std::string manifest_path = dst + "/" + kDatasetManifestName;
  std::vector<fs::path> shards;
  for (const auto& entry : fs::directory_iterator(dst, ec))
    if (entry.is_regular_file() && is_shard_name(entry.path().filename().string()))
      shards.push_back(entry.path());

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
  // From here the old dataset is gone: without a dataset.json a half-written DST never passes
  // for a complete one.
  fs::remove(manifest_path, ec);
  for (const auto& s : shards) fs::remove(s, ec);
}

void write_dataset_manifest(const std::string& dst, const nlohmann::json& manifest) {
  AtomicFileWriter out(dst + "/" + kDatasetManifestName);
  const std::string text = manifest.dump(2) + "\n";
  out.write(text.data(), text.size());
  out.commit();
}

}  // namespace sg
