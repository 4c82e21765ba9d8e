#include "imagenet/jpeg_decoder.h"

#include <fmt/format.h>
#include <turbojpeg.h>

#include <cstring>

#include "util/error.h"

namespace sg {

void choose_dct_scale(int width, int height, int min_width, int min_height, int& num, int& den) {
  num = 1;
  den = 1;
  int count = 0;
  const tjscalingfactor* factors = tjGetScalingFactors(&count);
  // Keep the smallest factor that still covers the minimum, among 1/2, 1/4 and 1/8 only: those
  // have SIMD inverse DCTs in libjpeg-turbo and average whole pixel blocks, while 3/8..7/8 run
  // slower C code and resample with a phase that moves edges by a fraction of a pixel (measured:
  // mean 2 steps off PIL at 7/8 on a 333x500 image, against 0.25 at full size).
  int best_w = width;
  for (int i = 0; i < count; ++i) {
    const tjscalingfactor f = factors[i];
    if (f.num != 1 || (f.denom != 2 && f.denom != 4 && f.denom != 8)) continue;
    const int w = TJSCALED(width, f), h = TJSCALED(height, f);
    if (w >= min_width && h >= min_height && w <= best_w) {
      best_w = w;
      num = f.num;
      den = f.denom;
    }
  }
}

JpegDecoder::JpegDecoder() : handle_(tjInitDecompress()) {
  if (handle_ == nullptr) throw RunError(fmt::format("TurboJPEG: cannot create a decoder ({})", tjGetErrorStr2(nullptr)));
}

JpegDecoder::~JpegDecoder() { tjDestroy(static_cast<tjhandle>(handle_)); }

bool JpegDecoder::read_header(const uint8_t* jpeg, size_t size, JpegHeader& header) {
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (size < 4 || jpeg[0] != 0xFF || jpeg[1] != 0xD8) {
    error_ = "not a JPEG (no SOI marker)";
    return false;
  }
  if (tjDecompressHeader3(static_cast<tjhandle>(handle_), jpeg, static_cast<unsigned long>(size), &width, &height,
                          &subsampling, &colorspace) != 0) {
    error_ = tjGetErrorStr2(static_cast<tjhandle>(handle_));
    return false;
  }
  if (width <= 0 || height <= 0) {
    error_ = "zero-sized image";
    return false;
  }
  header.width = width;
  header.height = height;
  header.cmyk = colorspace == TJCS_CMYK || colorspace == TJCS_YCCK;
  return true;
}

bool JpegDecoder::decode(const uint8_t* jpeg, size_t size, int min_width, int min_height, RgbImage& out) {
  JpegHeader header;
  if (!read_header(jpeg, size, header)) return false;
  int num = 1, den = 1;
  if (min_width > 0 || min_height > 0) choose_dct_scale(header.width, header.height, min_width, min_height, num, den);
  const tjscalingfactor factor{num, den};
  const int w = TJSCALED(header.width, factor), h = TJSCALED(header.height, factor);
  out.width = w;
  out.height = h;
  out.pixels.resize(static_cast<size_t>(w) * h * 3);
  auto* handle = static_cast<tjhandle>(handle_);
  // TurboJPEG 2.1 cannot convert CMYK/YCCK to RGB itself ("Unsupported color conversion"), so
  // CMYK comes out raw and is converted below.
  uint8_t* target = out.pixels.data();
  if (header.cmyk) {
    cmyk_.resize(static_cast<size_t>(w) * h * 4);
    target = cmyk_.data();
  }
  const int rc = tjDecompress2(handle, jpeg, static_cast<unsigned long>(size), target, w, 0, h,
                               header.cmyk ? TJPF_CMYK : TJPF_RGB, 0);
  if (rc != 0) {
    error_ = tjGetErrorStr2(handle);
    // Warnings (e.g. "extraneous bytes before marker") leave a complete image and PIL accepts
    // those files too; a premature end leaves grey padding, so it counts as undecodable.
    if (tjGetErrorCode(handle) != TJERR_WARNING || error_.find("Premature end") != std::string::npos) return false;
  }
  if (header.cmyk) {
    // Adobe (Photoshop) CMYK JPEGs store inverted ink values; like PIL we assume that
    // convention, so with stored s: R = s_C * s_K / 255 (= (255 - C)(255 - K) / 255).
    const size_t n = static_cast<size_t>(w) * h;
    for (size_t i = 0; i < n; ++i) {
      const unsigned k = cmyk_[4 * i + 3];
      for (int c = 0; c < 3; ++c) out.pixels[3 * i + c] = static_cast<uint8_t>((cmyk_[4 * i + c] * k + 127) / 255);
    }
  }
  return true;
}

std::vector<uint8_t> encode_jpeg(const RgbImage& image, int quality) {
  tjhandle handle = tjInitCompress();
  if (handle == nullptr) throw RunError("TurboJPEG: cannot create an encoder");
  unsigned char* buffer = nullptr;
  unsigned long size = 0;
  const int rc = tjCompress2(handle, image.pixels.data(), image.width, 0, image.height, TJPF_RGB, &buffer, &size,
                             TJSAMP_420, quality, 0);
  std::string error = rc != 0 ? tjGetErrorStr2(handle) : "";
  std::vector<uint8_t> out;
  if (rc == 0) out.assign(buffer, buffer + size);
  tjFree(buffer);
  tjDestroy(handle);
  if (rc != 0) throw RunError(fmt::format("TurboJPEG: cannot encode a {}x{} image ({})", image.width, image.height, error));
  return out;
}

}  // namespace sg
