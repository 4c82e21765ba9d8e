// The ImageNet batch source the trainer reads (imagenet_source.h) on the real samples: the flat
// sample folder and the tree index alike, batches a pure function of the sample number (any
// worker count, any prefetch order, any split of a batch into rows), epochs reshuffled,
// evaluation centre-cropped and fixed, an undecodable image counted and trained as zeros.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>

#include "data/synthetic_images.h"
#include "imagenet/image_pack.h"
#include "imagenet/imagenet_source.h"
#include "imagenet_fixture.h"
#include "temp_dir.h"
#include "util/error.h"

using namespace sg;

namespace {

constexpr int kSize = 48;

std::vector<BatchField> fields(int n) {
  return {{"images", DType::F32, {n, 3, kSize, kSize}}, {"labels", DType::I32, {n}}};
}

MicroBatch batch_of(BatchSource& source, uint64_t first, int n) {
  MicroBatch b(fields(n));
  source.fill(b, first);
  return b;
}

bool same(const MicroBatch& a, const MicroBatch& b, int n) {
  const size_t pixels = static_cast<size_t>(n) * 3 * kSize * kSize;
  return std::equal(a.data<float>(0), a.data<float>(0) + pixels, b.data<float>(0)) &&
         std::equal(a.data<int32_t>(1), a.data<int32_t>(1) + n, b.data<int32_t>(1));
}

}  // namespace

TEST_CASE("imagenet source: the flat sample folder, labels in the standard 1000-class order") {
  const std::string data = test::imagenet_data_dir();
  if (data.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/imagenet/sample not found");
    return;
  }
  const ImageIndex index = open_image_index(data + "/sample", nullptr);
  CHECK(index.wnids.size() == 1000);  // from ../imagenet_class_index.json or LOC_synset_mapping.txt
  CHECK(index.train.size() == 100);
  CHECK(index.val.size() == 100);
  for (const ImageEntry& e : index.train) {
    const std::string name = std::filesystem::path(e.path).filename().string();
    REQUIRE(name.starts_with(index.wnids[static_cast<size_t>(e.label)]));
    REQUIRE(e.label % 10 == 0);  // the samples are every tenth class
  }
  CHECK_THROWS_AS(open_image_index(data + "/no-such-dir", nullptr), RunError);
}

TEST_CASE("imagenet source: a pure function of the sample number, whatever the workers and order") {
  const std::string data = test::imagenet_data_dir();
  if (data.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/imagenet/sample not found");
    return;
  }
  auto index = std::make_shared<const ImageIndex>(open_image_index(data + "/sample", nullptr));
  ImageNetSource one(index, Split::Train, kSize, 11, 1), three(index, Split::Train, kSize, 11, 3);
  // Prefetched out of order on three workers, or decoded on demand by one.
  three.prefetch({150, 90, 4}, 6);
  const MicroBatch a = batch_of(one, 90, 6), b = batch_of(three, 90, 6);
  CHECK(same(a, b, 6));
  CHECK(same(batch_of(one, 150, 6), batch_of(three, 150, 6), 6));  // across the epoch boundary
  // Rows filled separately equal the batch filled at once (how replicas share a fused batch).
  MicroBatch rows(fields(6));
  three.fill_rows(rows, 0, 2, 90);
  three.fill_rows(rows, 2, 4, 92);
  CHECK(same(a, rows, 6));
  // Epoch 1 is another order and other crops of the same images.
  const MicroBatch epoch0 = batch_of(one, 0, 100), epoch1 = batch_of(one, 100, 100);
  CHECK_FALSE(same(epoch0, epoch1, 100));
  std::vector<int32_t> l0(epoch0.data<int32_t>(1), epoch0.data<int32_t>(1) + 100);
  std::vector<int32_t> l1(epoch1.data<int32_t>(1), epoch1.data<int32_t>(1) + 100);
  CHECK(l0 != l1);
  std::sort(l0.begin(), l0.end());
  std::sort(l1.begin(), l1.end());
  CHECK(l0 == l1);  // every image once per epoch
  // Another seed, other batches.
  ImageNetSource other_seed(index, Split::Train, kSize, 12, 1);
  CHECK_FALSE(same(a, batch_of(other_seed, 90, 6), 6));
  // Validation: the split in order, centre-cropped, the same every time.
  ImageNetSource val(index, Split::Val, kSize, 11, 2);
  const MicroBatch v1 = batch_of(val, 0, 4), v2 = batch_of(val, 100, 4);
  CHECK(same(v1, v2, 4));
  CHECK(v1.data<int32_t>(1)[1] == index->val[1].label);
}

TEST_CASE("imagenet source: an undecodable image trains as zeros, counted") {
  const std::string data = test::imagenet_data_dir();
  if (data.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/imagenet/sample not found");
    return;
  }
  test::TempDir dir;
  const auto samples = test::sample_images(data);
  std::ofstream(dir / "bad.JPEG") << "not a JPEG\n";
  auto index = std::make_shared<ImageIndex>();
  index->root = dir.path();
  index->wnids = {"n0", "n1"};
  index->class_names = index->wnids;
  index->val = {{samples[0].path, 0}, {dir / "bad.JPEG", 1}};
  ImageNetSource val(index, Split::Val, kSize, 1, 2);
  const MicroBatch b = batch_of(val, 0, 2);
  CHECK(val.failures() == 1);
  const size_t plane = 3 * kSize * kSize;
  CHECK(std::all_of(b.data<float>(0) + plane, b.data<float>(0) + 2 * plane, [](float v) { return v == 0.0f; }));
  CHECK(b.data<int32_t>(1)[1] == 1);
}

TEST_CASE("imagenet source: a worker's failure reaches the fill that waits for it") {
  const std::string data = test::imagenet_data_dir();
  if (data.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/imagenet/sample not found");
    return;
  }
  test::TempDir dir;
  const auto samples = test::sample_images(data);
  ImagePackWriter writer(dir / "val_00000.sgpk");
  writer.add(test::read_file_bytes(samples[0].path));
  const std::vector<uint64_t> offsets = writer.finish();
  auto index = std::make_shared<ImageIndex>();
  index->root = dir.path();
  index->wnids = {"n0"};
  index->class_names = index->wnids;
  index->packs = {dir / "val_00000.sgpk"};
  // The second entry points past the pack's end, as a stale index of a rewritten pack would.
  index->val = {{"a", 0, 0, offsets[0], 100}, {"b", 0, 0, offsets[0] + (1u << 30), 100}};
  ImageNetSource val(index, Split::Val, kSize, 1, 2);
  val.prefetch({0}, 2);
  MicroBatch b(fields(2));
  CHECK_THROWS_AS(val.fill(b, 0), RunError);
  // The source still works for what it can read.
  MicroBatch one(fields(1));
  CHECK_NOTHROW(val.fill(one, 0));
}

TEST_CASE("synthetic images: reproducible, labelled, the same classes in train and val") {
  SyntheticImages train(10, kSize, 100, 7, 7), again(10, kSize, 100, 7, 7), val(10, kSize, 10, 7, 8);
  CHECK(same(batch_of(train, 3, 4), batch_of(again, 3, 4), 4));
  CHECK(same(batch_of(train, 3, 4), batch_of(train, 103, 4), 4));  // count images, then again
  const MicroBatch v = batch_of(val, 0, 10);
  for (int i = 0; i < 10; ++i) REQUIRE(v.data<int32_t>(1)[i] >= 0);
  // An image's mean colour tells its class: two images of one class share their prototype.
  int32_t label = train.label_of(0);
  int other = 1;
  while (train.label_of(other) != label) ++other;
  const MicroBatch a = batch_of(train, 0, 1), b = batch_of(train, static_cast<uint64_t>(other), 1);
  double mean_a = 0, mean_b = 0;
  for (int i = 0; i < kSize * kSize; ++i) mean_a += a.data<float>(0)[i], mean_b += b.data<float>(0)[i];
  CHECK(std::fabs(mean_a - mean_b) / (kSize * kSize) < 0.2);
}
