// JPEG decoding: sizes, DCT-domain scaling, grayscale and CMYK to RGB, broken files refused.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "imagenet/jpeg_decoder.h"
#include "imagenet_fixture.h"
#include "temp_dir.h"

using namespace sg;

TEST_CASE("choose_dct_scale picks the smallest of 1/2, 1/4, 1/8 that covers the minimum, else 1") {
  int num = 0, den = 0;
  choose_dct_scale(2400, 1600, 0, 0, num, den);
  CHECK((num == 1 && den == 8));  // no minimum: the smallest factor
  choose_dct_scale(2400, 1600, 300, 200, num, den);
  CHECK((num == 1 && den == 8));
  choose_dct_scale(2400, 1600, 301, 200, num, den);
  CHECK((num == 1 && den == 4));  // 1/8 gives 300 < 301; 1/4 is the next factor up
  choose_dct_scale(500, 375, 256, 192, num, den);
  CHECK((num == 1 && den == 1));  // 1/2 would give 250 < 256; 5/8 is not used
  choose_dct_scale(1152, 864, 341, 256, num, den);
  CHECK((num == 1 && den == 2));
  choose_dct_scale(100, 80, 400, 300, num, den);
  CHECK((num == 1 && den == 1));  // upscaling is the resampler's job
}

TEST_CASE("decode: the samples, full size and DCT-scaled; grayscale comes out as RGB") {
  const std::string data = test::imagenet_data_dir();
  if (data.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/imagenet/sample not found");
    return;
  }
  JpegDecoder decoder;
  int gray_seen = 0;
  for (const auto& s : test::sample_images(data)) {
    const auto bytes = test::read_file_bytes(s.path);
    JpegHeader header;
    REQUIRE_MESSAGE(decoder.read_header(bytes.data(), bytes.size(), header), s.path);
    CHECK(header.width >= 68);
    CHECK(header.width <= 2400);
    RgbImage image;
    REQUIRE_MESSAGE(decoder.decode(bytes.data(), bytes.size(), 224, 224, image), s.path);
    CHECK(std::min(image.width, image.height) >= std::min(224, std::min(header.width, header.height)));
    CHECK(image.width <= header.width);
    if (s.wnid == "n03908714") {  // the pencil sharpener is a grayscale JPEG, 333 x 500
      ++gray_seen;
      RgbImage full;
      REQUIRE(decoder.decode(bytes.data(), bytes.size(), 0, 0, full));
      CHECK(full.width == 333);
      CHECK(full.height == 500);
      bool channels_equal = true;
      for (size_t i = 0; i < full.pixels.size(); i += 3)
        channels_equal &= full.pixels[i] == full.pixels[i + 1] && full.pixels[i] == full.pixels[i + 2];
      CHECK(channels_equal);
    }
  }
  CHECK(gray_seen == 1);
}

TEST_CASE("decode: a CMYK JPEG (made by PIL) matches PIL's RGB conversion") {
  test::TempDir dir;
  if (!test::run_torchvision_reference("cmyk " + (dir / "cmyk.jpg") + " " + (dir / "cmyk.rgb"))) {
    MESSAGE("skipped: /usr/bin/python3 with PIL, torchvision and numpy is not available");
    return;
  }
  const auto jpeg = test::read_file_bytes(dir / "cmyk.jpg");
  const auto reference = test::read_file_bytes(dir / "cmyk.rgb");
  JpegDecoder decoder;
  JpegHeader header;
  REQUIRE(decoder.read_header(jpeg.data(), jpeg.size(), header));
  CHECK(header.cmyk);
  RgbImage image;
  REQUIRE(decoder.decode(jpeg.data(), jpeg.size(), 0, 0, image));
  REQUIRE(image.width == 64);
  REQUIRE(image.height == 48);
  REQUIRE(reference.size() == image.pixels.size());
  int max_diff = 0;
  for (size_t i = 0; i < reference.size(); ++i) max_diff = std::max(max_diff, std::abs(reference[i] - image.pixels[i]));
  // Same libjpeg output, PIL's fixed-point CMYK->RGB against our rounding: one step at most.
  CHECK(max_diff <= 1);
}

TEST_CASE("decode: a truncated JPEG, a text file and an empty file are refused with a reason") {
  const std::string data = test::imagenet_data_dir();
  JpegDecoder decoder;
  RgbImage image;
  const std::string text = "this is a text file named .JPEG\n";
  CHECK_FALSE(decoder.decode(reinterpret_cast<const uint8_t*>(text.data()), text.size(), 0, 0, image));
  CHECK(decoder.last_error().find("not a JPEG") != std::string::npos);
  CHECK_FALSE(decoder.decode(nullptr, 0, 0, 0, image));
  if (data.empty()) {
    MESSAGE("truncated-file case skipped: SINGULARITY_TEST_DATA/imagenet/sample not found");
    return;
  }
  const auto bytes = test::read_file_bytes(test::sample_images(data)[0].path);
  CHECK_FALSE(decoder.decode(bytes.data(), bytes.size() / 2, 0, 0, image));
  CHECK(decoder.last_error().find("Premature end") != std::string::npos);
  CHECK_FALSE(decoder.decode(bytes.data(), 300, 0, 0, image));  // header cut short
}

TEST_CASE("decode_window: the window's pixels are the whole-image decode's, at every DCT scale") {
  const std::string data = test::imagenet_data_dir();
  if (data.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/imagenet/sample not found");
    return;
  }
  JpegDecoder decoder;
  RgbImage whole, window;
  uint64_t state = 12345;
  auto below = [&state](int n) {  // a small LCG: the windows only need to vary
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>((state >> 33) % static_cast<uint64_t>(n));
  };
  int windows = 0, mismatches = 0;
  for (const auto& s : test::sample_images(data)) {
    const auto bytes = test::read_file_bytes(s.path);
    for (int den : {1, 2, 4, 8}) {
      JpegHeader header;
      REQUIRE(decoder.read_header(bytes.data(), bytes.size(), header));
      const int w = dct_scaled(header.width, den), h = dct_scaled(header.height, den);
      REQUIRE(decoder.decode_window(bytes.data(), bytes.size(), den, 0, 0, w, h, whole));
      REQUIRE(whole.width == w);
      REQUIRE(whole.height == h);
      for (int k = 0; k < 3; ++k) {
        // Random windows, and one touching the top-left and one the bottom-right corner.
        int x0 = below(w), y0 = below(h);
        int x1 = x0 + 1 + below(w - x0), y1 = y0 + 1 + below(h - y0);
        if (k == 1) x0 = y0 = 0;
        if (k == 2) x1 = w, y1 = h;
        REQUIRE(decoder.decode_window(bytes.data(), bytes.size(), den, x0, y0, x1, y1, window));
        ++windows;
        REQUIRE(window.full_width == w);
        REQUIRE(window.full_height == h);
        REQUIRE(window.top == y0);
        REQUIRE(window.height == y1 - y0);
        REQUIRE(window.left <= x0);
        REQUIRE(window.left + window.width >= x1);
        // Every pixel except the window's outermost columns inside the image: libjpeg's fancy
        // upsampling sees no chroma neighbour there (measured: up to 2 steps off), so
        // resample_window keeps a spare pixel on each side. Rows have no such edge.
        const int c0 = window.left > 0 ? window.left + 1 : 0;
        const int c1 = window.left + window.width < w ? window.left + window.width - 1 : w;
        if (c1 <= c0) continue;
        bool same = true;
        for (int y = y0; y < y1 && same; ++y)
          same = std::memcmp(&window.pixels[(static_cast<size_t>(y - y0) * window.width + (c0 - window.left)) * 3],
                             &whole.pixels[(static_cast<size_t>(y) * w + c0) * 3],
                             static_cast<size_t>(c1 - c0) * 3) == 0;
        if (!same) {
          ++mismatches;
          MESSAGE(s.path << " 1/" << den << " window [" << x0 << ", " << x1 << ") x [" << y0 << ", " << y1 << ")");
        }
      }
    }
  }
  CHECK(windows == 1200);
  CHECK(mismatches == 0);
}

TEST_CASE("decode_window: a truncated JPEG is refused even when the window lies above the cut") {
  const std::string data = test::imagenet_data_dir();
  if (data.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/imagenet/sample not found");
    return;
  }
  const auto bytes = test::read_file_bytes(test::sample_images(data)[0].path);
  JpegDecoder decoder;
  RgbImage image;
  REQUIRE(decoder.decode_window(bytes.data(), bytes.size(), 1, 0, 0, 16, 16, image));
  CHECK_FALSE(decoder.decode_window(bytes.data(), bytes.size() * 3 / 4, 1, 0, 0, 16, 16, image));
  CHECK(decoder.last_error().find("Premature end") != std::string::npos);
  // The decoder is usable again after a refusal.
  CHECK(decoder.decode_window(bytes.data(), bytes.size(), 1, 0, 0, 16, 16, image));
}

TEST_CASE("read_header parses again when a reused buffer holds another JPEG of the same size") {
  const std::string data = test::imagenet_data_dir();
  if (data.empty()) {
    MESSAGE("skipped: SINGULARITY_TEST_DATA/imagenet/sample not found");
    return;
  }
  const auto samples = test::sample_images(data);
  auto a = test::read_file_bytes(samples[0].path), b = test::read_file_bytes(samples[1].path);
  if (a.size() < b.size()) std::swap(a, b);
  JpegDecoder decoder;
  JpegHeader ha, hb, reread;
  REQUIRE(decoder.read_header(b.data(), b.size(), hb));
  std::vector<uint8_t> buffer = a;
  REQUIRE(decoder.read_header(buffer.data(), buffer.size(), ha));
  std::fill(buffer.begin(), buffer.end(), 0);
  std::copy(b.begin(), b.end(), buffer.begin());  // b, then zeros after its end marker
  REQUIRE(decoder.read_header(buffer.data(), buffer.size(), reread));
  CHECK(reread.width == hb.width);
  CHECK(reread.height == hb.height);
  RgbImage image;
  REQUIRE(decoder.decode(buffer.data(), buffer.size(), 0, 0, image));
  CHECK(image.width == hb.width);
  REQUIRE((ha.width != hb.width || ha.height != hb.height));  // the case means something
}
