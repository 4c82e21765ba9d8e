// The ImageNet index: labels in sorted-wnid order, flat val with a labels file, problems named.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "imagenet/image_index.h"
#include "imagenet_fixture.h"
#include "temp_dir.h"
#include "error_of.h"

using namespace sg;

namespace {

bool any_contains(const std::vector<std::string>& lines, const std::string& part) {
  for (const auto& l : lines)
    if (l.find(part) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("scan_imagenet with the class index file: standard labels, names, flat val") {
  const std::string data = test::imagenet_data_dir();
  if (data.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/imagenet/sample not found");
    return;
  }
  test::TempDir dir;
  const auto samples = test::make_imagenet_tree(dir.path(), data, true);
  std::vector<std::string> problems;
  const ImageIndex index = scan_imagenet(dir.path(), &problems);
  REQUIRE(index.wnids.size() == 1000);
  REQUIRE(index.train.size() == 100);
  REQUIRE(index.val.size() == 100);
  // The samples are classes 0, 10, ..., 990: the i-th in wnid order has label 10 i.
  for (size_t i = 0; i < samples.size(); ++i) {
    CHECK(index.train[i].label == static_cast<int32_t>(10 * i));
    CHECK(index.wnids[index.train[i].label] == samples[i].wnid);
    CHECK(index.class_names[index.train[i].label] == samples[i].name);
    // val/ILSVRC2012_val_<i+1> is sample i, labelled through LOC_val_solution.csv.
    CHECK(index.val[i].label == static_cast<int32_t>(10 * i));
  }
  CHECK(std::is_sorted(index.wnids.begin(), index.wnids.end()));
  // 900 classes have no training images: one line says so.
  CHECK(any_contains(problems, "900 of 1000 classes have no training images"));
}

TEST_CASE("scan_imagenet without a class list: labels are the sorted folder order; problems named") {
  const std::string data = test::imagenet_data_dir();
  if (data.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/imagenet/sample not found");
    return;
  }
  test::TempDir dir;
  const auto samples = test::make_imagenet_tree(dir.path(), data, false);
  std::ofstream(dir / "train/n01440764/notes.txt") << "not an image\n";
  std::filesystem::create_directories(dir / "train/n99999999");  // empty class folder
  std::filesystem::remove(dir / "val/ILSVRC2012_val_00000007.JPEG");
  std::filesystem::create_symlink(samples[0].path, dir / "val/ILSVRC2012_val_00000999.JPEG");  // no label
  std::vector<std::string> problems;
  const ImageIndex index = scan_imagenet(dir.path(), &problems);
  REQUIRE(index.wnids.size() == 101);
  CHECK(index.wnids.back() == "n99999999");
  CHECK(index.class_names == index.wnids);
  REQUIRE(index.train.size() == 100);
  for (size_t i = 0; i < samples.size(); ++i) CHECK(index.train[i].label == static_cast<int32_t>(i));
  CHECK(index.val.size() == 99);
  CHECK(any_contains(problems, "notes.txt: not a .JPEG file"));
  CHECK(any_contains(problems, "n99999999: empty class folder"));
  CHECK(any_contains(problems, "ILSVRC2012_val_00000999.JPEG: no label"));
}

TEST_CASE("scan_imagenet: val in wnid folders; a tree that is not ImageNet is an error") {
  test::TempDir dir;
  std::filesystem::create_directories(dir / "train/n02");
  std::filesystem::create_directories(dir / "train/n01");
  std::filesystem::create_directories(dir / "val/n02");
  std::ofstream(dir / "train/n01/a.JPEG") << "x";
  std::ofstream(dir / "train/n02/b.jpeg") << "x";
  std::ofstream(dir / "val/n02/c.JPEG") << "x";
  std::vector<std::string> problems;
  const ImageIndex index = scan_imagenet(dir.path(), &problems);
  REQUIRE(index.train.size() == 2);
  CHECK(index.train[0].label == 0);
  CHECK(index.train[1].label == 1);
  REQUIRE(index.val.size() == 1);
  CHECK(index.val[0].label == 1);
  CHECK(problems.empty());

  test::TempDir empty;
  const std::string message = test::error_of([&] { scan_imagenet(empty.path(), nullptr); });
  CHECK(message.find(empty.path()) != std::string::npos);
  CHECK(message.find("no train/ or val/") != std::string::npos);
}

TEST_CASE("flat val without a labels file is reported, and the devkit's file is named") {
  test::TempDir dir;
  std::filesystem::create_directories(dir / "train/n01");
  std::filesystem::create_directories(dir / "val");
  std::ofstream(dir / "train/n01/a.JPEG") << "x";
  std::ofstream(dir / "val/ILSVRC2012_val_00000001.JPEG") << "x";
  std::ofstream(dir / "ILSVRC2012_validation_ground_truth.txt") << "1\n";
  std::vector<std::string> problems;
  const ImageIndex index = scan_imagenet(dir.path(), &problems);
  CHECK(index.val.empty());
  CHECK(any_contains(problems, "flat val/ without labels (the devkit's ground truth needs meta.mat"));
}

TEST_CASE("save_image_index / load_image_index round trip; a corrupt index is named") {
  test::TempDir dir;
  ImageIndex index;
  index.root = dir.path();
  index.wnids = {"n01", "n02"};
  index.class_names = {"cat", "dog"};
  index.train = {{dir / "train/n01/a.JPEG", 0}, {"/elsewhere/b.JPEG", 1}};
  index.val = {{dir / "val/c.JPEG", 1, 0, 40, 123}};
  index.packs = {"val_00000.sgpk"};
  save_image_index(index, dir / "index.json");
  const ImageIndex back = load_image_index(dir / "index.json");
  CHECK(back.root == index.root);
  CHECK(back.wnids == index.wnids);
  CHECK(back.class_names == index.class_names);
  REQUIRE(back.train.size() == 2);
  CHECK(back.train[0].path == index.train[0].path);
  CHECK(back.train[1].path == "/elsewhere/b.JPEG");
  CHECK(back.train[1].label == 1);
  CHECK(back.train[0].shard == -1);
  REQUIRE(back.val.size() == 1);
  CHECK(back.val[0].shard == 0);
  CHECK(back.val[0].offset == 40);
  CHECK(back.val[0].size == 123);
  CHECK(back.packs == std::vector<std::string>{dir / "val_00000.sgpk"});  // beside the index

  std::ofstream(dir / "bad.json") << R"({"format": "singularity-imagenet-index", "version": 1, "root": "/", )"
                                  << R"("wnids": ["a"], "class_names": ["a"], "packs": [], )"
                                  << R"("train": {"paths": ["x"], "labels": [5]}, "val": {"paths": [], "labels": []}})";
  const std::string message = test::error_of([&] { load_image_index(dir / "bad.json"); });
  CHECK(message.find("bad.json: corrupt image index (label 5 out of range)") != std::string::npos);
}
