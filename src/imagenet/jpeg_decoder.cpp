#include "imagenet/jpeg_decoder.h"

#include <fmt/format.h>
#include <turbojpeg.h>

// jpeglib.h needs size_t and FILE declared first.
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <jpeglib.h>
#include <jerror.h>

#include <algorithm>

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

// libjpeg reports fatal errors through error_exit, which must not return: we longjmp back to
// the call that started the work. Warnings (e.g. "extraneous bytes before marker") leave a
// complete image and PIL accepts those files too; a premature end of the data leaves grey
// padding, so it counts as an error.
struct JpegDecoder::Impl {
  struct Errors {
    jpeg_error_mgr pub;
    std::jmp_buf jump;
    Impl* impl;
  };
  jpeg_decompress_struct cinfo{};
  Errors errors{};
  char message[JMSG_LENGTH_MAX] = {};
  bool premature_end = false;
  // The bytes whose header cinfo holds (state DSTATE_READY), and where their first scan starts.
  const uint8_t* header_of = nullptr;
  size_t header_size = 0;
  size_t scan_start = 0;
  std::vector<JSAMPROW> rows;

  static void error_exit(j_common_ptr cinfo) {
    auto* e = reinterpret_cast<Errors*>(cinfo->err);
    (*cinfo->err->format_message)(cinfo, e->impl->message);
    std::longjmp(e->jump, 1);
  }
  static void emit_message(j_common_ptr cinfo, int level) {
    if (level >= 0) return;  // trace messages
    auto* e = reinterpret_cast<Errors*>(cinfo->err);
    if (cinfo->err->msg_code == JWRN_JPEG_EOF) {
      e->impl->premature_end = true;
      (*cinfo->err->format_message)(cinfo, e->impl->message);
    }
    ++cinfo->err->num_warnings;
  }
  static void output_message(j_common_ptr) {}

  Impl() {
    cinfo.err = jpeg_std_error(&errors.pub);
    errors.pub.error_exit = error_exit;
    errors.pub.emit_message = emit_message;
    errors.pub.output_message = output_message;
    errors.impl = this;
    jpeg_create_decompress(&cinfo);  // only fails on out-of-memory, which error_exit cannot jump from here
  }
  ~Impl() { jpeg_destroy_decompress(&cinfo); }

  // Reads the header (with reuse: unless cinfo already holds the one of these bytes, read by
  // the call just before); false with message set on failure.
  bool header(const uint8_t* jpeg, size_t size, bool reuse) {
    if (reuse && header_of == jpeg && header_size == size) return true;
    header_of = nullptr;
    if (setjmp(errors.jump) != 0) {
      jpeg_abort_decompress(&cinfo);
      return false;
    }
    jpeg_abort_decompress(&cinfo);
    premature_end = false;
    jpeg_mem_src(&cinfo, jpeg, static_cast<unsigned long>(size));
    jpeg_read_header(&cinfo, TRUE);
    header_of = jpeg;
    header_size = size;
    scan_start = size - cinfo.src->bytes_in_buffer;
    return true;
  }

  // Decodes the window into out (resized here) at scale 1/den; the image's header must be read.
  // components: 3 (RGB) or 4 (CMYK). left/width come back widened to whole iMCUs.
  bool window(const uint8_t* jpeg, size_t size, int den, bool cmyk, int x0, int y0, int x1, int y1,
              std::vector<uint8_t>& out, RgbImage& shape) {
    header_of = nullptr;  // whatever happens, the header is used up
    if (setjmp(errors.jump) != 0) {
      jpeg_abort_decompress(&cinfo);
      return false;
    }
    return decode_rows(jpeg, size, den, cmyk, x0, y0, x1, y1, out, shape);
  }

  // window()'s work, in its own frame so that the longjmp leaves no local of window() clobbered.
  [[gnu::noinline]] bool decode_rows(const uint8_t* jpeg, size_t size, int den, bool cmyk, int x0, int y0, int x1,
                                     int y1, std::vector<uint8_t>& out, RgbImage& shape) {
    cinfo.scale_num = 1;
    cinfo.scale_denom = static_cast<unsigned>(den);
    cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_EXT_RGB;
    cinfo.dct_method = JDCT_ISLOW;
    cinfo.do_fancy_upsampling = TRUE;
    jpeg_start_decompress(&cinfo);
    const int components = cmyk ? 4 : 3;
    const int full_width = static_cast<int>(cinfo.output_width), full_height = static_cast<int>(cinfo.output_height);
    // Clipped to the image, and at least one pixel (an empty window would make an empty image).
    x0 = std::clamp(x0, 0, full_width - 1);
    x1 = std::clamp(x1, x0 + 1, full_width);
    y0 = std::clamp(y0, 0, full_height - 1);
    y1 = std::clamp(y1, y0 + 1, full_height);
    JDIMENSION crop_x = static_cast<JDIMENSION>(x0), crop_w = static_cast<JDIMENSION>(x1 - x0);
    if (x0 > 0 || x1 < full_width) jpeg_crop_scanline(&cinfo, &crop_x, &crop_w);
    shape.left = static_cast<int>(crop_x);
    shape.width = static_cast<int>(crop_w);
    shape.top = y0;
    shape.height = y1 - y0;
    shape.full_width = full_width;
    shape.full_height = full_height;
    const size_t stride = static_cast<size_t>(shape.width) * components;
    out.resize(stride * static_cast<size_t>(y1 - y0));
    if (y0 > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(y0));
    rows.resize(static_cast<size_t>(std::max(1, cinfo.rec_outbuf_height)));
    while (static_cast<int>(cinfo.output_scanline) < y1) {
      const int row = static_cast<int>(cinfo.output_scanline) - y0;
      const int n = std::min(static_cast<int>(rows.size()), y1 - static_cast<int>(cinfo.output_scanline));
      for (int i = 0; i < n; ++i) rows[i] = out.data() + static_cast<size_t>(row + i) * stride;
      jpeg_read_scanlines(&cinfo, rows.data(), static_cast<JDIMENSION>(n));
    }
    if (y1 == full_height) {
      jpeg_finish_decompress(&cinfo);  // reads on to the end-of-image marker
    } else {
      jpeg_abort_decompress(&cinfo);
      // The data below the window is not read, so its end is checked here: a complete file has
      // an end-of-image marker (FF D9) after its first scan, which entropy-coded data, where FF
      // is always followed by 00 or a restart marker D0..D7, cannot contain.
      if (!premature_end) {
        bool found = false;
        for (size_t i = size; i >= scan_start + 2 && !found; --i) found = jpeg[i - 2] == 0xFF && jpeg[i - 1] == 0xD9;
        if (!found) {
          premature_end = true;
          std::snprintf(message, sizeof(message), "Premature end of JPEG file (no end-of-image marker)");
        }
      }
    }
    return !premature_end;
  }
};

JpegDecoder::JpegDecoder() : impl_(std::make_unique<Impl>()) {}

JpegDecoder::~JpegDecoder() = default;

bool JpegDecoder::read_header(const uint8_t* jpeg, size_t size, JpegHeader& header) {
  return parse_header(jpeg, size, header, false);
}

bool JpegDecoder::parse_header(const uint8_t* jpeg, size_t size, JpegHeader& header, bool reuse) {
  if (jpeg == nullptr || size < 4 || jpeg[0] != 0xFF || jpeg[1] != 0xD8) {
    error_ = "not a JPEG (no SOI marker)";
    return false;
  }
  Impl& d = *impl_;
  if (!d.header(jpeg, size, reuse)) {
    error_ = d.message;
    return false;
  }
  if (d.cinfo.image_width == 0 || d.cinfo.image_height == 0) {
    error_ = "zero-sized image";
    d.header_of = nullptr;
    return false;
  }
  header.width = static_cast<int>(d.cinfo.image_width);
  header.height = static_cast<int>(d.cinfo.image_height);
  if (over_pixel_limit(header)) {  // refused with the claimed size left in `header`
    error_ = fmt::format(
        "{}x{} = {} pixels, over the {}-pixel limit (a decompression bomb or a damaged header; "
        "shrink or remove the file)",
        header.width, header.height, static_cast<int64_t>(header.width) * header.height,
        kMaxImagePixels);
    d.header_of = nullptr;
    return false;
  }
  header.cmyk = d.cinfo.jpeg_color_space == JCS_CMYK || d.cinfo.jpeg_color_space == JCS_YCCK;
  return true;
}

bool JpegDecoder::decode(const uint8_t* jpeg, size_t size, int min_width, int min_height, RgbImage& out) {
  JpegHeader header;
  if (!read_header(jpeg, size, header)) return false;
  int num = 1, den = 1;
  if (min_width > 0 || min_height > 0) choose_dct_scale(header.width, header.height, min_width, min_height, num, den);
  return decode_window(jpeg, size, den, 0, 0, dct_scaled(header.width, den), dct_scaled(header.height, den), out);
}

bool JpegDecoder::decode_window(const uint8_t* jpeg, size_t size, int den, int x0, int y0, int x1, int y1,
                                RgbImage& out) {
  JpegHeader header;
  if (!parse_header(jpeg, size, header, true)) return false;
  if (den != 1 && den != 2 && den != 4 && den != 8)
    throw RunError(fmt::format("JpegDecoder::decode_window: scale 1/{} is not 1/1, 1/2, 1/4 or 1/8", den));
  Impl& d = *impl_;
  // libjpeg-turbo converts CMYK/YCCK to RGB only as raw CMYK, converted below.
  std::vector<uint8_t>& target = header.cmyk ? cmyk_ : out.pixels;
  if (!d.window(jpeg, size, den, header.cmyk, x0, y0, x1, y1, target, out)) {
    error_ = d.message;
    return false;
  }
  if (header.cmyk) {
    // Adobe (Photoshop) CMYK JPEGs store inverted ink values; like PIL we assume that
    // convention, so with stored s: R = s_C * s_K / 255 (= (255 - C)(255 - K) / 255).
    const size_t n = static_cast<size_t>(out.width) * out.height;
    out.pixels.resize(n * 3);
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
