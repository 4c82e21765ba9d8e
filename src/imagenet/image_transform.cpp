#include "imagenet/image_transform.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "util/error.h"

namespace sg {
namespace {

// A stream of uniform numbers from one 64-bit state (splitmix64).
struct SplitMix {
  uint64_t state;
  uint64_t next() { return mix64(state += 0x9E3779B97F4A7C15ULL); }
  double uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53; }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }  // n << 2^64
};

// Python's round(): halves to even, as torchvision's int(round(...)).
int round_half_even(double v) { return static_cast<int>(std::nearbyint(v)); }

// PIL's precompute_coeffs for the bilinear (triangle) filter over [in0, in1) of a line whose
// readable pixels are [lo, hi): per output pixel, the first input pixel and its weights.
struct Coefficients {
  int taps = 0;
  std::vector<int> first;     // (out)
  std::vector<int> count;     // (out) taps with a non-zero weight, all inside the line
  std::vector<float> weight;  // (out, taps)
};

// Fills c (its buffers are reused from call to call).
void bilinear_coefficients(Coefficients& c, double in0, double in1, int lo, int hi, int out_size) {
  const double scale = (in1 - in0) / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter_scale;  // the triangle's support is 1, widened when downscaling
  c.taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  c.first.resize(out_size);
  c.count.resize(out_size);
  c.weight.assign(static_cast<size_t>(out_size) * c.taps, 0.0f);
  thread_local std::vector<double> w;
  w.resize(c.taps);
  for (int o = 0; o < out_size; ++o) {
    const double center = in0 + (o + 0.5) * scale;
    const int first = std::max(static_cast<int>(center - support + 0.5), lo);
    const int last = std::min(static_cast<int>(center + support + 0.5), hi);
    const int n = std::min(last - first, c.taps);
    double total = 0;
    for (int k = 0; k < n; ++k) {
      const double x = std::abs((k + first - center + 0.5) / filter_scale);
      w[k] = x < 1.0 ? 1.0 - x : 0.0;
      total += w[k];
    }
    c.first[o] = first;
    int used = n;
    while (used > 0 && w[used - 1] == 0.0) --used;  // trailing zero weights: fewer reads
    c.count[o] = std::max(used, 0);
    for (int k = 0; k < n; ++k) c.weight[static_cast<size_t>(o) * c.taps + k] = static_cast<float>(total > 0 ? w[k] / total : 0);
  }
}

// tmp (rows, out_w, 3) = the rows [row0, row0 + rows) of the image resampled horizontally.
// Rows and columns are in the whole image's coordinates; image may hold a window of it.
void resample_rows(float* tmp, const RgbImage& image, int row0, int rows, const Coefficients& cx, int out_w) {
  for (int r = 0; r < rows; ++r) {
    const uint8_t* line = image.pixels.data() + static_cast<size_t>(row0 + r - image.top) * image.width * 3;
    float* dst = tmp + static_cast<size_t>(r) * out_w * 3;
    for (int o = 0; o < out_w; ++o) {
      const float* w = &cx.weight[static_cast<size_t>(o) * cx.taps];
      const uint8_t* src = line + static_cast<size_t>(cx.first[o] - image.left) * 3;
      float s0 = 0, s1 = 0, s2 = 0;
      for (int k = 0; k < cx.count[o]; ++k) {
        s0 += w[k] * src[3 * k];
        s1 += w[k] * src[3 * k + 1];
        s2 += w[k] * src[3 * k + 2];
      }
      dst[3 * o] = s0;
      dst[3 * o + 1] = s1;
      dst[3 * o + 2] = s2;
    }
  }
}

}  // namespace

uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

CropBox random_resized_crop_box(int width, int height, uint64_t seed, int64_t epoch, int64_t sample_index,
                                const AugmentOptions& options) {
  SplitMix rng{mix64(mix64(mix64(seed) ^ static_cast<uint64_t>(epoch)) ^ static_cast<uint64_t>(sample_index))};
  const double area = static_cast<double>(width) * height;
  const double log_lo = std::log(options.min_ratio), log_hi = std::log(options.max_ratio);
  CropBox box;
  bool found = false;
  for (int attempt = 0; attempt < 10 && !found; ++attempt) {
    const double target_area = area * rng.uniform(options.min_scale, options.max_scale);
    const double aspect = std::exp(rng.uniform(log_lo, log_hi));
    const int w = round_half_even(std::sqrt(target_area * aspect));
    const int h = round_half_even(std::sqrt(target_area / aspect));
    if (0 < w && w <= width && 0 < h && h <= height) {
      box.y = static_cast<double>(rng.below(height - h + 1));
      box.x = static_cast<double>(rng.below(width - w + 1));
      box.w = w;
      box.h = h;
      found = true;
    }
  }
  if (!found) {
    const double in_ratio = static_cast<double>(width) / height;
    int w = width, h = height;
    if (in_ratio < options.min_ratio) {
      h = round_half_even(w / options.min_ratio);
    } else if (in_ratio > options.max_ratio) {
      w = round_half_even(h * options.max_ratio);
    }
    box = {static_cast<double>((width - w) / 2), static_cast<double>((height - h) / 2), static_cast<double>(w),
           static_cast<double>(h)};
  }
  box.flip = rng.uniform(0.0, 1.0) < options.flip_probability;
  box.clamp_to_box = true;
  return box;
}

CropBox center_crop_box(int width, int height, const AugmentOptions& options) {
  const bool wide = width >= height;
  const int short_side = wide ? height : width, long_side = wide ? width : height;
  const int new_long = static_cast<int>(static_cast<double>(options.resize) * long_side / short_side);
  const int new_w = wide ? new_long : options.resize, new_h = wide ? options.resize : new_long;
  const int top = round_half_even((new_h - options.size) / 2.0), left = round_half_even((new_w - options.size) / 2.0);
  const double sx = static_cast<double>(width) / new_w, sy = static_cast<double>(height) / new_h;
  CropBox box{left * sx, top * sy, options.size * sx, options.size * sy};
  box.flip = false;
  box.clamp_to_box = false;
  return box;
}

CropBox scale_box(const CropBox& box, int from_width, int from_height, int to_width, int to_height) {
  const double sx = static_cast<double>(to_width) / from_width, sy = static_cast<double>(to_height) / from_height;
  CropBox out = box;
  out.x *= sx;
  out.w *= sx;
  out.y *= sy;
  out.h *= sy;
  return out;
}

void min_decode_size(const CropBox& box, int width, int height, int size, int& min_width, int& min_height) {
  min_width = static_cast<int>(std::ceil(size * width / box.w - 1e-6));
  min_height = static_cast<int>(std::ceil(size * height / box.h - 1e-6));
}

namespace {

// The pixels [lo_x, hi_x) x [lo_y, hi_y) of a width x height image that the filter may read.
void readable_range(const CropBox& box, int width, int height, int& lo_x, int& hi_x, int& lo_y, int& hi_y) {
  lo_x = box.clamp_to_box ? std::max(0, static_cast<int>(std::floor(box.x + 1e-9))) : 0;
  hi_x = box.clamp_to_box ? std::min(width, static_cast<int>(std::ceil(box.x + box.w - 1e-9))) : width;
  lo_y = box.clamp_to_box ? std::max(0, static_cast<int>(std::floor(box.y + 1e-9))) : 0;
  hi_y = box.clamp_to_box ? std::min(height, static_cast<int>(std::ceil(box.y + box.h - 1e-9))) : height;
}

// Narrows readable [lo, hi) to the pixels the filter can read from [in0, in1): bounds on the
// taps of the first and last output pixels (see bilinear_coefficients), then adds a spare pixel
// on each side within [0, extent).
void filter_span(double in0, double in1, int size, int extent, int& lo, int& hi) {
  const double support = std::max((in1 - in0) / size, 1.0);
  lo = std::max(0, std::max(lo, static_cast<int>(std::floor(in0 - support))) - 1);
  hi = std::min(extent, std::min(hi, static_cast<int>(std::ceil(in1 + support)) + 1) + 1);
}

}  // namespace

void resample_window(const CropBox& box, int width, int height, int size, int& x0, int& y0, int& x1, int& y1) {
  readable_range(box, width, height, x0, x1, y0, y1);
  filter_span(box.x, box.x + box.w, size, width, x0, x1);
  filter_span(box.y, box.y + box.h, size, height, y0, y1);
}

void resample_normalize(float* out, const RgbImage& image, const CropBox& box, int size) {
  int lo_x = 0, hi_x = 0, lo_y = 0, hi_y = 0;
  readable_range(box, image.whole_width(), image.whole_height(), lo_x, hi_x, lo_y, hi_y);
  thread_local Coefficients cx, cy;  // per-thread buffers: no allocation per image
  bilinear_coefficients(cx, box.x, box.x + box.w, lo_x, hi_x, size);
  bilinear_coefficients(cy, box.y, box.y + box.h, lo_y, hi_y, size);
  // Only the rows the vertical pass reads are resampled horizontally.
  const int row0 = cy.first.front();
  int row_end = row0;
  for (int o = 0; o < size; ++o) row_end = std::max(row_end, cy.first[o] + cy.count[o]);
  int col_end = cx.first.front();
  for (int o = 0; o < size; ++o) col_end = std::max(col_end, cx.first[o] + cx.count[o]);
  if (row0 < image.top || row_end > image.top + image.height || cx.first.front() < image.left ||
      col_end > image.left + image.width)
    throw RunError(fmt::format("resample_normalize: the filter reads [{}, {}) x [{}, {}) outside the decoded window "
                               "[{}, {}) x [{}, {})", cx.first.front(), col_end, row0, row_end, image.left,
                               image.left + image.width, image.top, image.top + image.height));
  thread_local std::vector<float> tmp;
  tmp.resize(static_cast<size_t>(row_end - row0) * size * 3);
  resample_rows(tmp.data(), image, row0, row_end - row0, cx, size);

  static constexpr float kMean[3] = {0.485f, 0.456f, 0.406f}, kStd[3] = {0.229f, 0.224f, 0.225f};
  float scale[3], shift[3];
  for (int c = 0; c < 3; ++c) {
    scale[c] = 1.0f / (255.0f * kStd[c]);
    shift[c] = -kMean[c] / kStd[c];
  }
  const size_t plane = static_cast<size_t>(size) * size;
  thread_local std::vector<float> line;
  line.resize(static_cast<size_t>(size) * 3);
  for (int oy = 0; oy < size; ++oy) {
    std::fill(line.begin(), line.end(), 0.0f);
    const float* w = &cy.weight[static_cast<size_t>(oy) * cy.taps];
    for (int k = 0; k < cy.count[oy]; ++k) {
      const float* src = tmp.data() + static_cast<size_t>(cy.first[oy] + k - row0) * size * 3;
      for (int i = 0; i < size * 3; ++i) line[i] += w[k] * src[i];
    }
    for (int ox = 0; ox < size; ++ox) {
      const int dst_x = box.flip ? size - 1 - ox : ox;
      for (int c = 0; c < 3; ++c)
        out[c * plane + static_cast<size_t>(oy) * size + dst_x] = line[3 * ox + c] * scale[c] + shift[c];
    }
  }
}

RgbImage resize_shorter_side(const RgbImage& image, int short_side) {
  const int current = std::min(image.width, image.height);
  if (current <= short_side) return image;
  const bool wide = image.width >= image.height;
  const int long_side = static_cast<int>(static_cast<double>(short_side) * std::max(image.width, image.height) / current);
  RgbImage out;
  out.width = wide ? long_side : short_side;
  out.height = wide ? short_side : long_side;
  Coefficients cx, cy;
  bilinear_coefficients(cx, 0, image.width, 0, image.width, out.width);
  bilinear_coefficients(cy, 0, image.height, 0, image.height, out.height);
  std::vector<float> tmp(static_cast<size_t>(image.height) * out.width * 3);
  resample_rows(tmp.data(), image, 0, image.height, cx, out.width);
  out.pixels.resize(static_cast<size_t>(out.width) * out.height * 3);
  for (int oy = 0; oy < out.height; ++oy) {
    const float* w = &cy.weight[static_cast<size_t>(oy) * cy.taps];
    for (int i = 0; i < out.width * 3; ++i) {
      float s = 0;
      for (int k = 0; k < cy.count[oy]; ++k)
        s += w[k] * tmp[static_cast<size_t>(cy.first[oy] + k) * out.width * 3 + i];
      out.pixels[static_cast<size_t>(oy) * out.width * 3 + i] = static_cast<uint8_t>(std::clamp(s + 0.5f, 0.0f, 255.0f));
    }
  }
  return out;
}

}  // namespace sg
