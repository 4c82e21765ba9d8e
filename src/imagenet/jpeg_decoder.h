#pragma once
// JPEG decoding with TurboJPEG (libjpeg-turbo 2.1): any JPEG (RGB, grayscale, CMYK/YCCK) to
// 8-bit RGB, optionally downscaled in the DCT domain (1/2, 1/4, 1/8), which skips most of the
// inverse-DCT and colour-conversion work for large images and acts as an antialiasing box filter.
// A decoder holds one TurboJPEG handle: one per thread.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sg {

struct RgbImage {
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;  // (height, width, 3), row-major
};

struct JpegHeader {
  int width = 0, height = 0;
  bool cmyk = false;
};

class JpegDecoder {
 public:
  JpegDecoder();
  ~JpegDecoder();
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;

  // false (and last_error() says why) when the bytes are not a readable JPEG header.
  bool read_header(const uint8_t* jpeg, size_t size, JpegHeader& header);

  // Decodes at the smallest DCT scale whose output is still at least min_width x min_height
  // (pass 0, 0 for full size; never scales up). false on a corrupt or truncated file: a JPEG
  // whose data ends early is an error, not a grey-padded image.
  bool decode(const uint8_t* jpeg, size_t size, int min_width, int min_height, RgbImage& out);

  const std::string& last_error() const { return error_; }

 private:
  void* handle_ = nullptr;  // tjhandle
  std::string error_;
  std::vector<uint8_t> cmyk_;  // scratch for CMYK output
};

// The scale num/den (1/1, or 1/2, 1/4, 1/8 from tjGetScalingFactors) chosen for an image of width x height that
// must stay at least min_width x min_height.
void choose_dct_scale(int width, int height, int min_width, int min_height, int& num, int& den);

// RGB encode with quality 1..100 (used to write packs); throws sg::RunError.
std::vector<uint8_t> encode_jpeg(const RgbImage& image, int quality);

}  // namespace sg
