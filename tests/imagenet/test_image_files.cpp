// Image files that must not cost what they claim or block: a JPEG whose header claims more than
// kMaxImagePixels (a decompression bomb) is refused from its header by the decoder, the training
// transform and `prepare imagenet`; a FIFO or a folder named .JPEG is skipped by the scan with a
// line naming it and refused by the loader without blocking; a symlink loop in a tree is a
// problem line, not an exception. The images are made here, so no shared data is needed.
#include <doctest/doctest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <memory>

#include "imagenet/image_batch_loader.h"
#include "imagenet/image_index.h"
#include "imagenet/image_pack.h"
#include "imagenet/jpeg_decoder.h"
#include "imagenet/prepare_imagenet.h"
#include "imagenet_fixture.h"
#include "tests/fifo_guard.h"
#include "temp_dir.h"

using namespace sg;
namespace fs = std::filesystem;

namespace {

std::vector<uint8_t> small_jpeg(int width, int height) {
  RgbImage image;
  image.width = width;
  image.height = height;
  image.pixels.resize(static_cast<size_t>(width) * height * 3);
  for (size_t i = 0; i < image.pixels.size(); ++i) image.pixels[i] = static_cast<uint8_t>(i * 7);
  return encode_jpeg(image, 90);
}

// The same bytes with the frame header (SOF0..SOF2) claiming width x height: a few hundred bytes
// that say 65500 x 65500 are what a decompression bomb looks like.
std::vector<uint8_t> claiming(std::vector<uint8_t> jpeg, int width, int height) {
  for (size_t i = 2; i + 9 < jpeg.size(); ++i) {
    if (jpeg[i] == 0xFF && jpeg[i + 1] >= 0xC0 && jpeg[i + 1] <= 0xC2) {
      jpeg[i + 5] = static_cast<uint8_t>(height >> 8);
      jpeg[i + 6] = static_cast<uint8_t>(height);
      jpeg[i + 7] = static_cast<uint8_t>(width >> 8);
      jpeg[i + 8] = static_cast<uint8_t>(width);
      return jpeg;
    }
  }
  FAIL("no SOF marker in the encoded JPEG");
  return jpeg;
}

void write_jpeg(const std::string& path, const std::vector<uint8_t>& bytes) {
  test::write_file_bytes(path, bytes.data(), bytes.size());
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("a JPEG claiming more than kMaxImagePixels is refused from its header, in training too") {
  const auto bomb = claiming(small_jpeg(16, 16), 65500, 65500);
  CHECK(bomb.size() < 1000);
  JpegDecoder decoder;
  JpegHeader header;
  // REQUIRE: before the limit, the decodes below cost gigabytes and seconds.
  REQUIRE_FALSE(decoder.read_header(bomb.data(), bomb.size(), header));
  CHECK(decoder.last_error().find("65500x65500 = 4290250000 pixels") != std::string::npos);
  CHECK(decoder.last_error().find("89478485-pixel limit") != std::string::npos);
  CHECK(over_pixel_limit(header));  // the claimed size, to tell this refusal from damage

  const auto start = std::chrono::steady_clock::now();
  RgbImage image;
  CHECK_FALSE(decoder.decode(bomb.data(), bomb.size(), 0, 0, image));
  LoaderOptions options;
  options.augment.size = 32;
  std::vector<float> out(3 * 32 * 32, 1.0f);
  std::string why;
  CHECK_FALSE(decode_and_transform(out.data(), bomb.data(), bomb.size(), Split::Train, 1, 0, 0,
                                   options, decoder, image, &why));
  CHECK(why.find("pixel limit") != std::string::npos);
  CHECK(std::all_of(out.begin(), out.end(), [](float v) { return v == 0.0f; }));
  CHECK(seconds_since(start) < 0.5);

  // The limit itself: 9459 x 9459 = 89,472,681 pixels passes, 9460 x 9459 = 89,482,140 does not.
  const auto largest = claiming(small_jpeg(16, 16), 9459, 9459);
  CHECK(decoder.read_header(largest.data(), largest.size(), header));
  CHECK(header.width == 9459);
  const auto over = claiming(small_jpeg(16, 16), 9460, 9459);
  CHECK_FALSE(decoder.read_header(over.data(), over.size(), header));
}

TEST_CASE("prepare imagenet counts a decompression bomb as a problem, headers or full decode") {
  test::TempDir dir;
  const std::string src = dir / "src", dst = dir / "dst";
  for (const char* split : {"train", "val"}) {
    fs::create_directories(src + "/" + split + "/n01440764");
    write_jpeg(src + "/" + split + "/n01440764/good.JPEG", small_jpeg(64, 48));
  }
  write_jpeg(src + "/train/n01440764/bomb.JPEG", claiming(small_jpeg(16, 16), 65500, 65500));
  ImagenetPrepareOptions options;
  options.threads = 2;
  options.strict = true;  // exit code 1 when problems were found
  // REQUIRE: before the limit, the full decode below used 12.6 GB.
  REQUIRE(run_prepare_imagenet(src, dst, options) == 1);
  CHECK(load_image_index(dst + "/imagenet_index.json").train.size() == 1);

  options.full_decode = true;
  const auto start = std::chrono::steady_clock::now();
  CHECK(run_prepare_imagenet(src, dst, options) == 1);
  CHECK(seconds_since(start) < 5.0);
  CHECK(load_image_index(dst + "/imagenet_index.json").train.size() == 1);
}

TEST_CASE("a FIFO or a folder named .JPEG in data.root is skipped by the scan and named") {
  test::TempDir dir;
  write_jpeg(dir / "n01440764_good.JPEG", small_jpeg(64, 48));
  REQUIRE(::mkfifo((dir / "n01440764_fifo.JPEG").c_str(), 0600) == 0);
  fs::create_directory(dir / "n01440764_dir.JPEG");
  std::vector<std::string> problems;
  const ImageIndex index = open_image_index(dir.path(), &problems);
  CHECK(index.train.size() == 1);
  REQUIRE(problems.size() == 2);
  CHECK(problems[0].find(dir / "n01440764_dir.JPEG: is a directory") != std::string::npos);
  CHECK(problems[1].find(dir / "n01440764_fifo.JPEG: is a FIFO") != std::string::npos);
}

TEST_CASE("the loader refuses a FIFO or a folder named .JPEG at once, saying which") {
  // An index written before they appeared still names them: the loader must not block on the
  // FIFO (it hung training) nor allocate the directory's "size" (std::bad_alloc).
  test::TempDir dir;
  REQUIRE(::mkfifo((dir / "n01440764_fifo.JPEG").c_str(), 0600) == 0);
  fs::create_directory(dir / "n01440764_dir.JPEG");
  const std::vector<std::unique_ptr<ImagePackReader>> no_packs;
  LoaderOptions options;
  options.augment.size = 32;
  JpegDecoder decoder;
  RgbImage scratch;
  std::vector<uint8_t> bytes;
  std::vector<float> out(3 * 32 * 32);
  for (const char* name : {"n01440764_fifo.JPEG", "n01440764_dir.JPEG"}) {
    const ImageEntry entry{dir / name, 0};
    bool ok = true;
    std::string why;
    const auto load = [&] {
      ok = load_sample(out.data(), entry, no_packs, Split::Val, 0, 0, 0, options, decoder, scratch,
                       bytes, &why);
    };
    bool in_time = false;
    CHECK_NOTHROW(in_time = test::returns_without_blocking(dir / "n01440764_fifo.JPEG", load));
    CHECK(in_time);
    CHECK_FALSE(ok);
    CHECK_MESSAGE(why.find("not a regular file") != std::string::npos, why);
  }
}

TEST_CASE("a symbolic link loop in an ImageNet tree is a problem line, not an exception") {
  test::TempDir dir;
  const std::string src = dir / "src";
  for (const char* split : {"train", "val"}) {
    fs::create_directories(src + "/" + split + "/n01440764");
    write_jpeg(src + "/" + split + "/n01440764/good.JPEG", small_jpeg(64, 48));
  }
  fs::create_symlink("loop.JPEG", src + "/train/n01440764/loop.JPEG");
  fs::create_directory_symlink("n01440764", src + "/train/n01443537");  // a folder link is fine
  std::vector<std::string> problems;
  ImageIndex index;
  CHECK_NOTHROW(index = scan_imagenet(src, &problems));
  CHECK(index.train.size() == 2);  // good.JPEG in both class folders
  bool named = false;
  for (const auto& p : problems)
    named |= p.find(src + "/train/n01440764/loop.JPEG: a symbolic link loop") != std::string::npos;
  const std::string first = problems.empty() ? "no problems" : problems.front();
  CHECK_MESSAGE(named, first);
}
