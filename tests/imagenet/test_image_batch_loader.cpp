// The batch loader on the real samples: shapes, labels, normalisation, determinism across thread
// counts, resume from (epoch, position), undecodable files counted and flagged.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include "imagenet/image_batch_loader.h"
#include "imagenet_fixture.h"
#include "temp_dir.h"
#include "util/error.h"

using namespace sg;

namespace {

std::vector<ImageBatch> all_batches(const ImageIndex& index, Split split, const LoaderOptions& options,
                                    size_t limit = 1000) {
  ImageBatchLoader loader(index, split, options);
  std::vector<ImageBatch> out;
  ImageBatch batch;
  while (out.size() < limit && loader.next(batch)) out.push_back(batch);
  return out;
}

bool same(const std::vector<ImageBatch>& a, const std::vector<ImageBatch>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].images != b[i].images || a[i].labels != b[i].labels || a[i].samples != b[i].samples ||
        a[i].epoch != b[i].epoch || a[i].position != b[i].position)
      return false;
  return true;
}

}  // namespace

TEST_CASE("epoch_order is a seeded permutation") {
  const auto a = epoch_order(7, 0, 1000), b = epoch_order(7, 0, 1000), c = epoch_order(7, 1, 1000);
  CHECK(a == b);
  CHECK(a != c);
  auto sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<uint32_t> identity(1000);
  std::iota(identity.begin(), identity.end(), 0u);
  CHECK(sorted == identity);
  CHECK(epoch_order(8, 0, 1000) != a);
}

TEST_CASE("loader: batch shapes, labels and normalisation on the samples") {
  const std::string data = test::imagenet_data_dir();
  if (data.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/imagenet/sample not found");
    return;
  }
  test::TempDir dir;
  test::make_imagenet_tree(dir.path(), data, true);
  const ImageIndex index = scan_imagenet(dir.path(), nullptr);
  LoaderOptions options;
  options.batch_size = 32;
  options.threads = 2;
  const auto batches = all_batches(index, Split::Val, options);
  REQUIRE(batches.size() == 4);  // 32 + 32 + 32 + 4
  CHECK(batches[3].n == 4);
  double sum[3] = {0, 0, 0}, sum_sq[3] = {0, 0, 0};
  size_t count = 0, seen = 0;
  for (const auto& b : batches) {
    REQUIRE(b.images.size() == static_cast<size_t>(b.n) * 3 * 224 * 224);
    CHECK(b.size == 224);
    for (int i = 0; i < b.n; ++i) {
      CHECK(b.ok[i] == 1);
      CHECK(b.samples[i] == static_cast<int64_t>(seen));  // val runs in index order
      CHECK(b.labels[i] == index.val[seen].label);
      CHECK(b.labels[i] == static_cast<int32_t>(10 * seen));
      ++seen;
      for (int c = 0; c < 3; ++c)
        for (size_t p = 0; p < 224 * 224; ++p) {
          const double v = b.images[(static_cast<size_t>(i) * 3 + c) * 224 * 224 + p];
          sum[c] += v;
          sum_sq[c] += v * v;
        }
    }
    count += static_cast<size_t>(b.n) * 224 * 224;
  }
  // Normalised with ImageNet's statistics, 100 ImageNet images have per-channel mean near 0 and
  // standard deviation near 1 (unnormalised or /255-only data would be far outside).
  for (int c = 0; c < 3; ++c) {
    const double mean = sum[c] / count, sd = std::sqrt(sum_sq[c] / count - mean * mean);
    MESSAGE("channel " << c << ": mean " << mean << ", sd " << sd);
    CHECK(std::abs(mean) < 0.3);
    CHECK(sd > 0.8);
    CHECK(sd < 1.25);
  }
}

TEST_CASE("loader: the same batches for any thread count and prefetch depth; resume continues exactly") {
  const std::string data = test::imagenet_data_dir();
  if (data.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/imagenet/sample not found");
    return;
  }
  test::TempDir dir;
  test::make_imagenet_tree(dir.path(), data, false);
  const ImageIndex index = scan_imagenet(dir.path(), nullptr);
  LoaderOptions options;
  options.batch_size = 24;  // 100 = 4 x 24 + 4: the batches do not line up with epochs
  options.seed = 1234;
  options.epoch = 2;
  options.loop = true;
  options.augment.size = 64;  // small outputs keep the test fast; the maths is the same
  const auto serial = all_batches(index, Split::Train, options, 7);
  REQUIRE(serial.size() == 7);
  CHECK(serial[4].n == 4);
  CHECK(serial[5].epoch == 3);
  CHECK(serial[5].position == 0);
  // Each epoch is a permutation of all 100 samples.
  std::set<int64_t> epoch2;
  for (int k = 0; k < 5; ++k) epoch2.insert(serial[k].samples.begin(), serial[k].samples.end());
  CHECK(epoch2.size() == 100);
  CHECK(serial[0].samples != std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18,
                                                  19, 20, 21, 22, 23});
  for (int threads : {1, 3}) {
    for (int prefetch : {1, 4}) {
      options.threads = threads;
      options.prefetch_batches = prefetch;
      CHECK_MESSAGE(same(serial, all_batches(index, Split::Train, options, 7)),
                    threads << " threads, prefetch " << prefetch);
    }
  }
  // Twice the same run: the same bytes.
  options.threads = 2;
  CHECK(same(serial, all_batches(index, Split::Train, options, 7)));
  // A different seed changes the crops and the order.
  options.seed = 1235;
  CHECK_FALSE(same(serial, all_batches(index, Split::Train, options, 7)));
  options.seed = 1234;

  // Resume after batch 3 from the saved (epoch, position).
  int64_t epoch = 0, position = 0;
  {
    ImageBatchLoader loader(index, Split::Train, options);
    ImageBatch batch;
    for (int k = 0; k < 3; ++k) REQUIRE(loader.next(batch));
    epoch = loader.epoch();
    position = loader.position();
  }
  CHECK(epoch == 2);
  CHECK(position == 72);
  options.epoch = epoch;
  options.position = position;
  const auto resumed = all_batches(index, Split::Train, options, 4);
  CHECK(same(std::vector<ImageBatch>(serial.begin() + 3, serial.end()), resumed));

  // Without loop, the loader stops at the end of the epoch.
  options.loop = false;
  CHECK(all_batches(index, Split::Train, options).size() == 2);
  options.batch_size = 0;
  CHECK_THROWS_AS(ImageBatchLoader(index, Split::Train, options), SpecError);
}

TEST_CASE("loader: a truncated JPEG and a text file named .JPEG are counted and flagged, not fatal") {
  const std::string data = test::imagenet_data_dir();
  if (data.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/imagenet/sample not found");
    return;
  }
  test::TempDir dir;
  const auto samples = test::sample_images(data);
  ImageIndex index;
  index.root = dir.path();
  index.wnids = {"n0", "n1"};
  index.class_names = index.wnids;
  const auto bytes = test::read_file_bytes(samples[0].path);
  test::write_file_bytes(dir / "truncated.JPEG", bytes.data(), bytes.size() / 2);
  std::ofstream(dir / "text.JPEG") << "not a JPEG\n";
  index.val = {{samples[0].path, 0}, {dir / "truncated.JPEG", 1}, {dir / "text.JPEG", 0}, {dir / "gone.JPEG", 1},
               {samples[1].path, 1}};
  LoaderOptions options;
  options.batch_size = 5;
  options.threads = 2;
  ImageBatchLoader loader(index, Split::Val, options);
  ImageBatch batch;
  REQUIRE(loader.next(batch));
  CHECK(batch.n == 5);
  CHECK(loader.undecodable() == 3);
  CHECK(batch.ok == std::vector<uint8_t>{1, 0, 0, 0, 1});
  CHECK(batch.labels == std::vector<int32_t>{0, 1, 0, 1, 1});
  const size_t plane = 3 * 224 * 224;
  for (int i = 1; i <= 3; ++i) {
    const float* image = batch.images.data() + i * plane;
    CHECK(std::all_of(image, image + plane, [](float v) { return v == 0.0f; }));
  }
  CHECK_FALSE(std::all_of(batch.images.begin(), batch.images.begin() + plane, [](float v) { return v == 0.0f; }));
  CHECK_FALSE(loader.next(batch));
}
