#pragma once
// JPEG decoding with libjpeg-turbo (2.1): any JPEG (RGB, grayscale, CMYK/YCCK) to 8-bit RGB,
// optionally downscaled in the DCT domain (1/2, 1/4, 1/8), which skips most of the inverse-DCT
// and colour-conversion work for large images and acts as an antialiasing box filter, and
// optionally only a window of it: columns outside the window skip the inverse DCT and colour
// conversion, rows above it skip all but Huffman decoding, and rows below it are not read at
// all. A window's pixels are the same bytes the whole-image decode gives there (tests check).
// A decoder holds one libjpeg decompressor and its buffers: one per thread.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sg {

// (height, width, 3) pixels, row-major. When they are a window of a larger decoded image
// (JpegDecoder::decode_window), left/top say where the window lies in it and full_width x
// full_height is that image's size; for a whole image left = top = 0 and full_* = 0 or the size.
struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;
  int left = 0, top = 0, full_width = 0, full_height = 0;

  int whole_width() const { return full_width > 0 ? full_width : width; }
  int whole_height() const { return full_height > 0 ? full_height : height; }
};

// The most pixels (width x height, as the header states them) an image may have: PIL's
// Image.MAX_IMAGE_PIXELS, 2^30 / 4 / 3 = 89,478,485 (e.g. 9459 x 9459). A JPEG of a few hundred
// bytes can claim 65500 x 65500 and cost gigabytes and seconds to decode (a decompression bomb);
// read_header(), and so every decode, refuses a larger one before decoding any pixel. README.md
// "Limits" documents it.
constexpr int64_t kMaxImagePixels = 89'478'485;

struct JpegHeader {
  int width = 0, height = 0;
  bool cmyk = false;
};

// Whether the image is over kMaxImagePixels. read_header() fills in the size the header claims
// even when it refuses the image for it, so a caller can tell this refusal from damage.
inline bool over_pixel_limit(const JpegHeader& header) {
  return static_cast<int64_t>(header.width) * header.height > kMaxImagePixels;
}

class JpegDecoder {
 public:
  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // false (and last_error() says why) when the bytes are not a readable JPEG header or the
  // image has more than kMaxImagePixels pixels. A decode_window of the same bytes (same address
  // and size, unchanged) right after reuses the parsed header instead of parsing it again.
  bool read_header(const uint8_t* jpeg, size_t size, JpegHeader& header);

  // Decodes at the smallest DCT scale whose output is still at least min_width x min_height
  // (pass 0, 0 for full size; never scales up). false on a corrupt or truncated file: a JPEG
  // whose data ends early is an error, not a grey-padded image.
  bool decode(const uint8_t* jpeg, size_t size, int min_width, int min_height, RgbImage& out);

  // Decodes at scale 1/den (den 1, 2, 4 or 8) at least the window [x0, x1) x [y0, y1) of the
  // scaled image (clipped to it; columns widen to whole iMCUs, so out may be wider). A file
  // whose data ends before its end-of-image marker is refused as in decode(), even when the
  // window ends above the missing part; corrupt data below the window goes unnoticed.
  bool decode_window(const uint8_t* jpeg, size_t size, int den, int x0, int y0, int x1, int y1, RgbImage& out);

  const std::string& last_error() const { return error_; }

  struct Impl;  // the libjpeg state (defined in the .cpp)

 private:
  bool parse_header(const uint8_t* jpeg, size_t size, JpegHeader& header, bool reuse);

  std::unique_ptr<Impl> impl_;
  std::string error_;
  std::vector<uint8_t> cmyk_;  // scratch for CMYK output
};

// The scale num/den (1/1, or 1/2, 1/4, 1/8 from tjGetScalingFactors) chosen for an image of width x height that
// must stay at least min_width x min_height.
void choose_dct_scale(int width, int height, int min_width, int min_height, int& num, int& den);

// The size of a width x height image decoded at scale 1/den (rounded up, as libjpeg does).
inline int dct_scaled(int size, int den) { return (size + den - 1) / den; }

// RGB encode with quality 1..100 (used to write packs); throws sg::RunError.
std::vector<uint8_t> encode_jpeg(const RgbImage& image, int quality);

}  // namespace sg
