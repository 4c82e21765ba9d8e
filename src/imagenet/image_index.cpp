#include "imagenet/image_index.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/file_io.h"
#include "util/error.h"

namespace fs = std::filesystem;

namespace sg {
namespace {

void note(std::vector<std::string>* problems, std::string line) {
  if (problems != nullptr) problems->push_back(std::move(line));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RunError(fmt::format("{}: cannot read; check the file's permissions", path));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string first_existing(const std::vector<std::string>& dirs, const char* name) {
  for (const auto& d : dirs) {
    std::error_code ec;
    if (fs::is_regular_file(fs::path(d) / name, ec)) return (fs::path(d) / name).string();
  }
  return "";
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n' || s.back() == ' ')) s.pop_back();
  size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

// Class list from LOC_synset_mapping.txt ("<wnid> <names>" per line) or imagenet_class_index.json
// ({"0": [wnid, name], ...}); false when neither exists.
bool read_class_list(const std::vector<std::string>& dirs, std::vector<std::string>& wnids,
                     std::vector<std::string>& names) {
  std::vector<std::pair<std::string, std::string>> classes;
  if (std::string path = first_existing(dirs, "LOC_synset_mapping.txt"); !path.empty()) {
    std::istringstream in(read_text(path));
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      line = trim(line);
      if (line.empty()) continue;
      size_t space = line.find(' ');
      if (line[0] != 'n')
        throw RunError(fmt::format("{}:{}: expected '<wnid> <names>'; is this LOC_synset_mapping.txt?",
                                   path, number));
      classes.emplace_back(line.substr(0, space),
                           space == std::string::npos ? line : trim(line.substr(space + 1)));
    }
  } else if (path = first_existing(dirs, "imagenet_class_index.json"); !path.empty()) {
    try {
      auto j = nlohmann::json::parse(read_text(path));
      for (auto it = j.begin(); it != j.end(); ++it)
        classes.emplace_back(it.value().at(0).get<std::string>(), it.value().at(1).get<std::string>());
    } catch (const nlohmann::json::exception& e) {
      throw RunError(fmt::format("{}: not a class index ({}); expected {{\"0\": [wnid, name], ...}}",
                                 path, e.what()));
    }
  } else {
    return false;
  }
  std::sort(classes.begin(), classes.end());
  for (auto& [w, n] : classes) {
    wnids.push_back(w);
    names.push_back(n);
  }
  return true;
}

std::vector<fs::path> sorted_children(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    out.push_back(it->path());
  if (ec)
    throw RunError(
        fmt::format("{}: cannot list ({}); check its permissions", dir.string(), ec.message()));
  std::sort(out.begin(), out.end());
  return out;
}

bool is_folder(const fs::path& p) {
  std::error_code ec;  // a link loop or a dangling link is no folder, not an exception
  return fs::is_directory(p, ec);
}

// "" when `file` (links followed) is a regular file, else why it cannot be an image: a FIFO
// would block the loader's read forever and a directory named .JPEG is no image either.
std::string not_an_image_file(const fs::path& file) {
  struct stat st{};
  if (::stat(file.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ELOOP) return "a symbolic link loop; fix or remove the link";
    return fmt::format("cannot be read ({})", std::strerror(err));
  }
  if (S_ISREG(st.st_mode)) return "";
  return "is " + special_file_kind(file.string(), true) + ", not an image file";
}

// Whether `file` may go into the index: a regular file with a JPEG extension. Notes the others
// (what a JPEG-named entry is, so a FIFO or folder named .JPEG is explained).
bool accept_image_file(const fs::path& file, std::vector<std::string>* problems) {
  if (!has_jpeg_extension(file.filename().string())) {
    note(problems, fmt::format("{}: not a .JPEG file; skipped", file.string()));
    return false;
  }
  const std::string why = not_an_image_file(file);
  if (!why.empty()) note(problems, fmt::format("{}: {}; skipped", file.string(), why));
  return why.empty();
}

// Class folders under `dir` (train/ or a foldered val/) appended to `out`.
void scan_class_folders(const fs::path& dir, const std::map<std::string, int32_t>& label_of,
                        std::vector<ImageEntry>& out, std::vector<std::string>* problems) {
  for (const auto& sub : sorted_children(dir)) {
    if (!is_folder(sub)) {
      note(problems, fmt::format("{}: not a class folder; skipped", sub.string()));
      continue;
    }
    auto it = label_of.find(sub.filename().string());
    if (it == label_of.end()) {
      note(problems, fmt::format("{}: '{}' is not in the class list; folder skipped", sub.string(),
                                 sub.filename().string()));
      continue;
    }
    size_t before = out.size();
    for (const auto& file : sorted_children(sub))
      if (accept_image_file(file, problems)) out.push_back({file.string(), it->second});
    if (out.size() == before) note(problems, fmt::format("{}: empty class folder", sub.string()));
  }
}

// Flat val/: labels from LOC_val_solution.csv or imagenet_2012_validation_synset_labels.txt.
void scan_flat_val(const fs::path& val_dir, const std::vector<std::string>& label_dirs,
                   const std::map<std::string, int32_t>& label_of, std::vector<ImageEntry>& out,
                   std::vector<std::string>* problems) {
  std::vector<fs::path> files;
  for (const auto& f : sorted_children(val_dir))
    if (accept_image_file(f, problems)) files.push_back(f);
  std::map<std::string, std::string> wnid_of_stem;  // ImageId -> wnid
  std::string labels_path;
  if (labels_path = first_existing(label_dirs, "LOC_val_solution.csv"); !labels_path.empty()) {
    std::istringstream in(read_text(labels_path));
    std::string line;
    int number = 0;
    while (std::getline(in, line)) {
      ++number;
      line = trim(line);
      if (line.empty() || (number == 1 && line.rfind("ImageId", 0) == 0)) continue;
      size_t comma = line.find(',');
      if (comma == std::string::npos || comma + 1 >= line.size()) {
        note(problems, fmt::format("{}:{}: expected 'ImageId,wnid ...'; line skipped", labels_path, number));
        continue;
      }
      std::string rest = line.substr(comma + 1);
      wnid_of_stem[line.substr(0, comma)] = rest.substr(0, rest.find(' '));
    }
  } else if (labels_path = first_existing(label_dirs, "imagenet_2012_validation_synset_labels.txt");
             !labels_path.empty()) {
    std::istringstream in(read_text(labels_path));
    std::string line;
    size_t i = 0;
    while (std::getline(in, line)) {
      line = trim(line);
      if (line.empty()) continue;
      if (i < files.size()) wnid_of_stem[files[i].stem().string()] = line;
      ++i;
    }
    if (i != files.size())
      note(problems, fmt::format("{}: {} labels for {} images in {}; labels are matched in file-name order",
                                 labels_path, i, files.size(), val_dir.string()));
  } else {
    std::string devkit = first_existing(label_dirs, "ILSVRC2012_validation_ground_truth.txt");
    note(problems, fmt::format(
        "{}: flat val/ without labels{}; put LOC_val_solution.csv (Kaggle) beside train/, or sort val/ "
        "into wnid folders; val skipped",
        val_dir.string(),
        devkit.empty() ? "" : " (the devkit's ground truth needs meta.mat's id->wnid map, not read)"));
    return;
  }
  size_t missing = 0;
  for (const auto& f : files) {
    auto w = wnid_of_stem.find(f.stem().string());
    if (w == wnid_of_stem.end()) {
      if (++missing <= 5) note(problems, fmt::format("{}: no label in {}; skipped", f.string(), labels_path));
      continue;
    }
    auto l = label_of.find(w->second);
    if (l == label_of.end()) {
      note(problems, fmt::format("{}: label '{}' from {} is not a known class; skipped", f.string(),
                                 w->second, labels_path));
      continue;
    }
    out.push_back({f.string(), l->second});
  }
  if (missing > 5) note(problems, fmt::format("{}: {} val images in all have no label", labels_path, missing));
}

}  // namespace

bool has_jpeg_extension(const std::string& filename) {
  std::string ext = fs::path(filename).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".jpeg" || ext == ".jpg";
}

const std::vector<ImageEntry>& entries_of(const ImageIndex& index, Split split) {
  return split == Split::Train ? index.train : index.val;
}

ImageIndex scan_imagenet(const std::string& root, std::vector<std::string>* problems) {
  std::error_code ec;
  fs::path image_root = root;
  if (fs::is_directory(fs::path(root) / "ILSVRC/Data/CLS-LOC", ec)) image_root /= "ILSVRC/Data/CLS-LOC";
  const fs::path train_dir = image_root / "train", val_dir = image_root / "val";
  const bool has_train = fs::is_directory(train_dir, ec), has_val = fs::is_directory(val_dir, ec);
  if (!has_train && !has_val)
    throw RunError(fmt::format("{}: no train/ or val/ folder; expected the ILSVRC-2012 layout "
                               "train/<wnid>/*.JPEG, val/...", root));
  const std::vector<std::string> label_dirs = {root, image_root.string()};

  ImageIndex index;
  index.root = root;
  if (!read_class_list(label_dirs, index.wnids, index.class_names)) {
    // No mapping file: the classes are the folders present.
    const fs::path class_dir = has_train ? train_dir : val_dir;
    for (const auto& sub : sorted_children(class_dir))
      if (is_folder(sub)) index.wnids.push_back(sub.filename().string());
    index.class_names = index.wnids;
    if (index.wnids.empty())
      throw RunError(fmt::format("{}: no class folders and no LOC_synset_mapping.txt; cannot name the classes",
                                 class_dir.string()));
  }
  std::map<std::string, int32_t> label_of;
  for (size_t i = 0; i < index.wnids.size(); ++i) label_of[index.wnids[i]] = static_cast<int32_t>(i);

  if (has_train) {
    scan_class_folders(train_dir, label_of, index.train, problems);
    std::vector<bool> seen(index.wnids.size(), false);
    for (const auto& e : index.train) seen[e.label] = true;
    size_t missing = std::count(seen.begin(), seen.end(), false);
    if (missing > 0)
      note(problems, fmt::format("{}: {} of {} classes have no training images (first: {})", train_dir.string(),
                                 missing, index.wnids.size(),
                                 index.wnids[std::find(seen.begin(), seen.end(), false) - seen.begin()]));
  } else {
    note(problems, fmt::format("{}: no train/ folder", root));
  }
  if (has_val) {
    bool foldered = false;
    for (const auto& sub : sorted_children(val_dir))
      if (is_folder(sub)) foldered = true;
    if (foldered)
      scan_class_folders(val_dir, label_of, index.val, problems);
    else
      scan_flat_val(val_dir, label_dirs, label_of, index.val, problems);
    std::sort(index.val.begin(), index.val.end(),
              [](const ImageEntry& a, const ImageEntry& b) { return a.path < b.path; });
  } else {
    note(problems, fmt::format("{}: no val/ folder", root));
  }
  return index;
}

ImageIndex scan_flat_images(const std::string& dir, std::vector<std::string>* problems) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw RunError(fmt::format("{}: no such directory", dir));
  ImageIndex index;
  index.root = dir;
  const std::string parent = fs::path(dir).lexically_normal().parent_path().string();
  std::vector<std::pair<std::string, std::string>> files;  // (wnid, path)
  for (const auto& f : sorted_children(dir)) {
    const std::string name = f.filename().string();
    const size_t cut = name.find('_');
    if (!has_jpeg_extension(name) || cut == std::string::npos || name[0] != 'n') continue;
    if (const std::string why = not_an_image_file(f); !why.empty()) {
      note(problems, fmt::format("{}: {}; skipped", f.string(), why));
      continue;
    }
    files.emplace_back(name.substr(0, cut), f.string());
  }
  if (files.empty()) {
    throw RunError(fmt::format("{}: no train/ or val/ folder and no <wnid>_*.JPEG images; expected "
                               "the ILSVRC-2012 layout, an imagenet_index.json, or a flat folder of "
                               "ImageNet-named JPEGs", dir));
  }
  if (!read_class_list({dir, parent}, index.wnids, index.class_names)) {
    for (const auto& [wnid, path] : files) index.wnids.push_back(wnid);
    std::sort(index.wnids.begin(), index.wnids.end());
    index.wnids.erase(std::unique(index.wnids.begin(), index.wnids.end()), index.wnids.end());
    index.class_names = index.wnids;
  }
  std::map<std::string, int32_t> label_of;
  for (size_t i = 0; i < index.wnids.size(); ++i) label_of[index.wnids[i]] = static_cast<int32_t>(i);
  for (const auto& [wnid, path] : files) {
    auto it = label_of.find(wnid);
    if (it == label_of.end()) {
      throw RunError(fmt::format("{}: wnid {} is not in the class list", path, wnid));
    }
    index.train.push_back({path, it->second});
  }
  index.val = index.train;
  return index;
}

ImageIndex open_image_index(const std::string& root, std::vector<std::string>* problems) {
  std::error_code ec;
  if (fs::is_regular_file(root, ec)) return load_image_index(root);
  const fs::path index_file = fs::path(root) / "imagenet_index.json";
  if (fs::is_regular_file(index_file, ec)) return load_image_index(index_file.string());
  if (!fs::is_directory(root, ec)) {
    throw RunError(fmt::format("{}: no such file or directory; set data.root to an ImageNet tree or "
                               "the directory `singularity prepare imagenet` wrote, or train on "
                               "synthetic images with --set data.dataset=synthetic", root));
  }
  const bool tree = fs::is_directory(fs::path(root) / "train", ec) ||
                    fs::is_directory(fs::path(root) / "val", ec) ||
                    fs::is_directory(fs::path(root) / "ILSVRC/Data/CLS-LOC", ec);
  return tree ? scan_imagenet(root, problems) : scan_flat_images(root, problems);
}

namespace {

nlohmann::json split_to_json(const std::vector<ImageEntry>& entries, const std::string& root) {
  const std::string prefix = root.empty() || root.back() == '/' ? root : root + "/";
  std::vector<std::string> paths;
  std::vector<int32_t> labels, shards;
  std::vector<uint64_t> offsets;
  std::vector<uint32_t> sizes;
  bool packed = false;
  for (const auto& e : entries) {
    paths.push_back(!prefix.empty() && e.path.rfind(prefix, 0) == 0 ? e.path.substr(prefix.size()) : e.path);
    labels.push_back(e.label);
    shards.push_back(e.shard);
    offsets.push_back(e.offset);
    sizes.push_back(e.size);
    packed |= e.shard >= 0;
  }
  nlohmann::json j = {{"paths", paths}, {"labels", labels}};
  if (packed) {
    j["shards"] = shards;
    j["offsets"] = offsets;
    j["sizes"] = sizes;
  }
  return j;
}

std::vector<ImageEntry> split_from_json(const nlohmann::json& j, const std::string& root, size_t classes,
                                        size_t packs) {
  auto paths = j.at("paths").get<std::vector<std::string>>();
  auto labels = j.at("labels").get<std::vector<int32_t>>();
  if (labels.size() != paths.size()) throw std::runtime_error("paths and labels differ in length");
  const bool packed = j.contains("shards");
  std::vector<int32_t> shards;
  std::vector<uint64_t> offsets;
  std::vector<uint32_t> sizes;
  if (packed) {
    shards = j.at("shards").get<std::vector<int32_t>>();
    offsets = j.at("offsets").get<std::vector<uint64_t>>();
    sizes = j.at("sizes").get<std::vector<uint32_t>>();
    if (shards.size() != paths.size() || offsets.size() != paths.size() || sizes.size() != paths.size())
      throw std::runtime_error("pack arrays differ in length from paths");
  }
  std::vector<ImageEntry> out(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    if (labels[i] < 0 || static_cast<size_t>(labels[i]) >= classes)
      throw std::runtime_error(fmt::format("label {} out of range", labels[i]));
    out[i].path = !paths[i].empty() && paths[i][0] == '/' ? paths[i] : root + "/" + paths[i];
    out[i].label = labels[i];
    if (packed) {
      if (shards[i] >= static_cast<int64_t>(packs)) throw std::runtime_error("shard out of range");
      out[i].shard = shards[i];
      out[i].offset = offsets[i];
      out[i].size = sizes[i];
    }
  }
  return out;
}

}  // namespace

void save_image_index(const ImageIndex& index, const std::string& path) {
  nlohmann::json j = {{"format", "singularity-imagenet-index"}, {"version", 1},
                      {"root", index.root},  {"wnids", index.wnids},
                      {"class_names", index.class_names}, {"packs", index.packs},
                      {"train", split_to_json(index.train, index.root)},
                      {"val", split_to_json(index.val, index.root)}};
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << j.dump() << '\n';
  out.close();
  if (!out) throw RunError(fmt::format("{}: cannot write the image index; check space and permissions", path));
}

ImageIndex load_image_index(const std::string& path) {
  const std::string text = read_text(path);
  try {
    auto j = nlohmann::json::parse(text);
    if (j.value("format", "") != "singularity-imagenet-index" || j.value("version", 0) != 1)
      throw std::runtime_error("not a singularity-imagenet-index version 1");
    ImageIndex index;
    index.root = j.at("root").get<std::string>();
    index.wnids = j.at("wnids").get<std::vector<std::string>>();
    index.class_names = j.at("class_names").get<std::vector<std::string>>();
    if (index.class_names.size() != index.wnids.size()) throw std::runtime_error("wnids and class_names differ");
    // Pack files sit beside the index, so a prepared directory can be moved as a whole.
    const std::string dir = fs::path(path).parent_path().string();
    for (const auto& p : j.at("packs").get<std::vector<std::string>>())
      index.packs.push_back(p.empty() || p[0] == '/' || dir.empty() ? p : dir + "/" + p);
    index.train = split_from_json(j.at("train"), index.root, index.wnids.size(), index.packs.size());
    index.val = split_from_json(j.at("val"), index.root, index.wnids.size(), index.packs.size());
    return index;
  } catch (const std::exception& e) {
    throw RunError(fmt::format("{}: corrupt image index ({}); run `singularity prepare imagenet` again",
                               path, e.what()));
  }
}

}  // namespace sg
