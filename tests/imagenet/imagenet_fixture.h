#pragma once
// Test trees in the ILSVRC-2012 layout, built in a temp dir from the real sample JPEGs in
// $SINGULARITY_TEST_DATA/imagenet (symlinked, never copied into the repository).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace sg::test {

// $SINGULARITY_TEST_DATA/imagenet, or "" when absent (the test then skips with a MESSAGE).
inline std::string imagenet_data_dir() {
  const char* root = std::getenv("SINGULARITY_TEST_DATA");
  if (root == nullptr) return "";
  const std::string dir = std::string(root) + "/imagenet";
  return std::filesystem::is_directory(dir + "/sample") ? dir : "";
}

struct SampleImage {
  std::string path, wnid, name;  // sample/<wnid>_<name>.JPEG
};

inline std::vector<SampleImage> sample_images(const std::string& data_dir) {
  std::vector<SampleImage> out;
  for (const auto& e : std::filesystem::directory_iterator(data_dir + "/sample")) {
    const std::string stem = e.path().stem().string();
    const size_t cut = stem.find('_');
    out.push_back({e.path().string(), stem.substr(0, cut), stem.substr(cut + 1)});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.path < b.path; });
  return out;
}

// root/train/<wnid>/<wnid>_1.JPEG for every sample, and a flat root/val/ILSVRC2012_val_<k>.JPEG
// (k = 1..100, the samples in sorted order) with root/LOC_val_solution.csv. With class_list,
// root also gets imagenet_class_index.json, so labels follow the full 1000-class order.
inline std::vector<SampleImage> make_imagenet_tree(const std::string& root, const std::string& data_dir,
                                                   bool class_list) {
  namespace fs = std::filesystem;
  const auto samples = sample_images(data_dir);
  fs::create_directories(root + "/val");
  std::ofstream csv(root + "/LOC_val_solution.csv");
  csv << "ImageId,PredictionString\n";
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto& s = samples[i];
    fs::create_directories(root + "/train/" + s.wnid);
    fs::create_symlink(s.path, root + "/train/" + s.wnid + "/" + s.wnid + "_1.JPEG");
    char id[64];
    std::snprintf(id, sizeof id, "ILSVRC2012_val_%08zu", i + 1);
    fs::create_symlink(s.path, root + "/val/" + id + ".JPEG");
    csv << id << "," << s.wnid << " 10 20 100 200 " << s.wnid << " 5 5 50 50\n";
  }
  if (class_list) fs::create_symlink(data_dir + "/imagenet_class_index.json", root + "/imagenet_class_index.json");
  return samples;
}

inline std::vector<uint8_t> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_file_bytes(const std::string& path, const uint8_t* data, size_t n) {
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n));
}

// Runs tests/imagenet/torchvision_reference.py with /usr/bin/python3 (torch, torchvision, PIL);
// false when that python or its packages are missing (the caller skips) or the script fails.
inline bool run_torchvision_reference(const std::string& args) {
  if (!std::filesystem::exists("/usr/bin/python3")) return false;
  const std::string command = std::string("/usr/bin/python3 " SINGULARITY_SOURCE_ROOT
                                          "/tests/imagenet/torchvision_reference.py ") + args + " 2>&1";
  return std::system(command.c_str()) == 0;
}

}  // namespace sg::test
