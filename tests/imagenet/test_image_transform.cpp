// Crop boxes as torchvision chooses them, and the resampled, normalised output against
// torchvision/PIL itself (reference computed at test time by torchvision_reference.py).
//
// Tolerances, in normalised units (one 8-bit step is 1/255/std ~ 0.0175..0.0171):
//   - full-size decode: PIL rounds to 8 bits after each resampling pass and we do not, so a
//     pixel may differ by about one step: max |diff| <= 1.25 steps, mean <= 0.35 step (measured:
//     max 0.9-1.0, mean 0.25-0.26, the mean of a uniform rounding error);
//   - DCT-scaled decode: an 8x8-block box filter replaces part of the triangle filter, which
//     shifts edges slightly: mean |diff| <= 3 steps (measured 1.2 at scale 1/2), max not bounded (edges).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <set>

#include "imagenet/image_batch_loader.h"
#include "imagenet/image_transform.h"
#include "imagenet_fixture.h"
#include "temp_dir.h"

using namespace sg;

namespace {

constexpr double kStep = 1.0 / 255.0 / 0.224;

struct Diff {
  double max = 0, mean = 0;
};

Diff compare(const float* a, const float* b, size_t n) {
  Diff d;
  for (size_t i = 0; i < n; ++i) {
    const double e = std::abs(static_cast<double>(a[i]) - b[i]);
    d.max = std::max(d.max, e);
    d.mean += e;
  }
  d.mean /= static_cast<double>(n);
  return d;
}

std::vector<float> read_floats(const std::string& path) {
  const auto bytes = test::read_file_bytes(path);
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

}  // namespace

TEST_CASE("random_resized_crop_box is a pure function of (seed, epoch, index) within torchvision's ranges") {
  AugmentOptions options;
  int flips = 0;
  std::set<std::pair<double, double>> origins;
  for (int64_t i = 0; i < 2000; ++i) {
    const CropBox box = random_resized_crop_box(500, 375, 42, 3, i, options);
    const CropBox again = random_resized_crop_box(500, 375, 42, 3, i, options);
    CHECK((box.x == again.x && box.y == again.y && box.w == again.w && box.h == again.h && box.flip == again.flip));
    REQUIRE(box.w >= 1);
    REQUIRE(box.h >= 1);
    CHECK(box.x + box.w <= 500);
    CHECK(box.y + box.h <= 375);
    CHECK(box.x == std::floor(box.x));
    const double area = box.w * box.h / (500.0 * 375.0), ratio = box.w / box.h;
    // Integer rounding of w and h moves area and ratio slightly past the sampled range.
    CHECK(area >= 0.075);
    CHECK(ratio >= 0.70);
    CHECK(ratio <= 1.40);
    flips += box.flip;
    origins.insert({box.x, box.y});
  }
  CHECK(flips > 900);
  CHECK(flips < 1100);
  CHECK(origins.size() > 1500);
  const CropBox other_epoch = random_resized_crop_box(500, 375, 42, 4, 7, options);
  const CropBox same = random_resized_crop_box(500, 375, 42, 3, 7, options);
  CHECK((other_epoch.x != same.x || other_epoch.w != same.w || other_epoch.y != same.y));
}

TEST_CASE("random_resized_crop_box falls back to the central crop as torchvision does") {
  AugmentOptions options;
  // 1000 x 10: every attempt's height exceeds 10, so the fallback clamps the ratio to 4/3.
  const CropBox box = random_resized_crop_box(1000, 10, 1, 0, 0, options);
  CHECK(box.h == 10);
  CHECK(box.w == 13);
  CHECK(box.x == (1000 - 13) / 2);
  CHECK(box.y == 0);
}

TEST_CASE("center_crop_box: Resize(256) then CenterCrop(224) as one box") {
  AugmentOptions options;
  const CropBox box = center_crop_box(500, 375, options);
  // Resize gives 341 x 256 (int(256 * 500 / 375) = 341); the crop starts at round(58.5) = 58, 16.
  CHECK(box.x == doctest::Approx(58 * 500.0 / 341));
  CHECK(box.y == doctest::Approx(16 * 375.0 / 256));
  CHECK(box.w == doctest::Approx(224 * 500.0 / 341));
  CHECK(box.h == doctest::Approx(224 * 375.0 / 256));
  CHECK_FALSE(box.clamp_to_box);
}

TEST_CASE("eval transform and a training crop match torchvision/PIL") {
  const std::string data = test::imagenet_data_dir();
  if (data.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/imagenet/sample not found");
    return;
  }
  // Upscaled (106 x 150), grayscale (333 x 500), and DCT-downscaled (1152 x 864).
  const std::vector<std::string> images = {data + "/sample/n03825788_nipple.JPEG",
                                           data + "/sample/n03908714_pencil_sharpener.JPEG",
                                           data + "/sample/n01924916_flatworm.JPEG"};
  test::TempDir dir;
  std::string args = "eval " + (dir / "eval.f32");
  for (const auto& p : images) args += " " + p;
  if (!test::run_torchvision_reference(args)) {
    MESSAGE("skipped: /usr/bin/python3 with torchvision and PIL is not available");
    return;
  }
  const auto reference = read_floats(dir / "eval.f32");
  const size_t plane = 3 * 224 * 224;
  REQUIRE(reference.size() == images.size() * plane);
  JpegDecoder decoder;
  RgbImage scratch;
  std::vector<float> out(plane);
  for (size_t i = 0; i < images.size(); ++i) {
    const auto bytes = test::read_file_bytes(images[i]);
    for (bool dct : {false, true}) {
      LoaderOptions options;
      options.dct_scaling = dct;
      REQUIRE(decode_and_transform(out.data(), bytes.data(), bytes.size(), Split::Val, 0, 0, 0, options, decoder,
                                   scratch, nullptr));
      const Diff d = compare(out.data(), reference.data() + i * plane, plane);
      MESSAGE(images[i] << std::string(dct ? " DCT-scaled" : " full size") << ": max |diff| " << d.max / kStep
                        << " steps, mean " << d.mean / kStep << " steps");
      if (!dct) {
        CHECK(d.max <= 1.25 * kStep);
        CHECK(d.mean <= 0.35 * kStep);
      } else {
        CHECK(d.mean <= 3 * kStep);
      }
    }
  }

  // A training crop (box, flip) from the grayscale image against PIL crop + resize + flip.
  const CropBox box{40, 60, 250, 180, true, true};
  REQUIRE(test::run_torchvision_reference("crop " + (dir / "crop.f32") + " " + images[1] + " 40 60 250 180 1"));
  const auto crop_reference = read_floats(dir / "crop.f32");
  REQUIRE(crop_reference.size() == plane);
  const auto bytes = test::read_file_bytes(images[1]);
  RgbImage full;
  REQUIRE(decoder.decode(bytes.data(), bytes.size(), 0, 0, full));
  resample_normalize(out.data(), full, box, 224);
  const Diff d = compare(out.data(), crop_reference.data(), plane);
  MESSAGE("training crop: max |diff| " << d.max / kStep << " steps, mean " << d.mean / kStep << " steps");
  CHECK(d.max <= 1.25 * kStep);
  CHECK(d.mean <= 0.35 * kStep);
}

TEST_CASE("decode_and_transform decodes only the window it reads: the same bytes as a whole-image decode") {
  const std::string data = test::imagenet_data_dir();
  if (data.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/imagenet/sample not found");
    return;
  }
  const size_t plane = 3 * 224 * 224;
  std::vector<float> windowed(plane), whole(plane);
  JpegDecoder decoder;
  RgbImage scratch, full;
  int compared = 0, different = 0;
  for (const auto& s : test::sample_images(data)) {
    const auto bytes = test::read_file_bytes(s.path);
    for (Split split : {Split::Train, Split::Val})
      for (bool dct : {false, true})
        for (int64_t index = 0; index < (split == Split::Train ? 4 : 1); ++index) {
          LoaderOptions options;
          options.dct_scaling = dct;
          REQUIRE(decode_and_transform(windowed.data(), bytes.data(), bytes.size(), split, 7, 3, index, options,
                                       decoder, scratch, nullptr));
          // The reference: the whole image at the scale decode() picks, then the same resampling.
          JpegHeader header;
          REQUIRE(decoder.read_header(bytes.data(), bytes.size(), header));
          const CropBox box = split == Split::Train
                                  ? random_resized_crop_box(header.width, header.height, 7, 3, index, options.augment)
                                  : center_crop_box(header.width, header.height, options.augment);
          int min_w = 0, min_h = 0;
          if (dct) min_decode_size(box, header.width, header.height, 224, min_w, min_h);
          REQUIRE(decoder.decode(bytes.data(), bytes.size(), min_w, min_h, full));
          resample_normalize(whole.data(), full, scale_box(box, header.width, header.height, full.width, full.height), 224);
          ++compared;
          if (std::memcmp(windowed.data(), whole.data(), plane * sizeof(float)) != 0) {
            ++different;
            MESSAGE(s.path << (split == Split::Train ? " train" : " val") << (dct ? " DCT" : "") << " index " << index);
          }
        }
  }
  CHECK(compared == 1000);
  CHECK(different == 0);
}
