// libFuzzer target: the JPEG path of the ImageNet loader (src/imagenet/jpeg_decoder.cpp,
// docs/faults.md "Fuzzing"). Input: a JPEG file.
// Contract (src/imagenet/jpeg_decoder.h): read_header refuses more than kMaxImagePixels pixels
// (a decompression bomb) before decoding; decode and decode_window return false on a corrupt
// file and otherwise give exactly the pixels their size says, a window inside the image.
// Images above 4 megapixels are decoded at 1/8 scale only, so that legitimate large headers on
// a few fuzzed bytes do not read as timeouts; the bomb check itself runs on every input.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_files.h"
#include "imagenet/jpeg_decoder.h"

namespace {

void check_image(const sg::RgbImage& image, const char* what) {
  if (image.width <= 0 || image.height <= 0 ||
      image.pixels.size() != static_cast<size_t>(image.width) * image.height * 3)
    sg::fuzz::contract_broken(std::string(what) + " gave " + std::to_string(image.width) + "x" +
                              std::to_string(image.height) + " with " +
                              std::to_string(image.pixels.size()) + " bytes");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static sg::JpegDecoder decoder;  // one per thread, reused as the loader's workers do
  sg::JpegHeader header;
  if (!decoder.read_header(data, size, header)) {
    sg::fuzz::note("refused: " + decoder.last_error());
    return 0;
  }
  sg::fuzz::note("header: " + std::to_string(header.width) + "x" + std::to_string(header.height));
  const int64_t pixels = static_cast<int64_t>(header.width) * header.height;
  if (header.width <= 0 || header.height <= 0 || pixels > sg::kMaxImagePixels)
    sg::fuzz::contract_broken("read_header accepted " + std::to_string(header.width) + "x" +
                              std::to_string(header.height) + " (more than kMaxImagePixels)");
  sg::RgbImage image;
  if (pixels > (int64_t{1} << 22)) {
    if (decoder.decode(data, size, 1, 1, image)) check_image(image, "decode at 1/8");
    return 0;
  }
  if (decoder.decode(data, size, 0, 0, image)) check_image(image, "decode");
  // A scaled window, its scale and place taken from the input's size.
  const int den = 1 << (size % 4);
  const int w = sg::dct_scaled(header.width, den), h = sg::dct_scaled(header.height, den);
  const int x0 = static_cast<int>(size % 7) * w / 8, y0 = static_cast<int>(size % 5) * h / 6;
  sg::RgbImage window;
  if (decoder.decode_window(data, size, den, x0, y0, w, h, window)) {
    check_image(window, "decode_window");
    if (window.left < 0 || window.top < 0 || window.left + window.width > window.whole_width() ||
        window.top + window.height > window.whole_height())
      sg::fuzz::contract_broken("decode_window gave a window outside its image");
  }
  return 0;
}
