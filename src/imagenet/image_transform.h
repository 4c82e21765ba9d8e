#pragma once
// The training and evaluation transforms, as torchvision defines them, in two steps: choose a
// crop box in the original image's pixels (a pure function of the image size and, for training,
// of (seed, epoch, sample index)), then resample that box to size x size and normalise.
//
// Resampling is PIL's bilinear filter (what torchvision's PIL path runs): a triangle filter
// whose support widens with the downscale factor, so downscaling antialiases. It is computed in
// float without PIL's rounding to 8 bits between the two passes, so results differ from PIL by
// at most about one 8-bit step; the decoder's DCT-domain downscaling (a box filter over 8x8
// blocks) changes large downscales by a few steps more (tests state the tolerances).
#include <cstdint>

#include "imagenet/jpeg_decoder.h"

namespace sg {

struct AugmentOptions {
  int size = 224;              // output side
  int resize = 256;            // eval: shorter side before the center crop
  double min_scale = 0.08, max_scale = 1.0;
  double min_ratio = 3.0 / 4.0, max_ratio = 4.0 / 3.0;
  double flip_probability = 0.5;
};

// A crop box in pixels of the image it was chosen for. clamp_to_box: the filter may not read
// outside the box (torchvision crops, then resizes); otherwise it may read up to the image edge
// (resize the whole image, then crop).
struct CropBox {
  double x = 0, y = 0, w = 0, h = 0;
  bool flip = false;
  bool clamp_to_box = true;
};

// RandomResizedCrop(size, scale, ratio) + RandomHorizontalFlip(p), as torchvision 0.14: ten
// attempts at a box of random area and log-uniform aspect ratio, then the center-crop fallback.
// The random numbers come from (seed, epoch, sample_index) alone.
CropBox random_resized_crop_box(int width, int height, uint64_t seed, int64_t epoch, int64_t sample_index,
                                const AugmentOptions& options);

// Resize(resize) (shorter side; longer side int(resize * long / short)) then CenterCrop(size),
// expressed as one box in the original image.
CropBox center_crop_box(int width, int height, const AugmentOptions& options);

// The box mapped onto the same image decoded at another size (DCT-scaled).
CropBox scale_box(const CropBox& box, int from_width, int from_height, int to_width, int to_height);

// The smallest decoded size that still gives `size` pixels across the box: the minimum to pass
// to JpegDecoder::decode.
void min_decode_size(const CropBox& box, int width, int height, int size, int& min_width, int& min_height);

// The window [x0, x1) x [y0, y1) of a width x height image that resample_normalize reads for
// this box, with a pixel to spare on each side (where the image has one): what to decode.
void resample_window(const CropBox& box, int width, int height, int size, int& x0, int& y0, int& x1, int& y1);

// out (3, size, size), channel-major: the box (in the whole image's pixels; image may hold only
// a window of it that covers resample_window) resampled, flipped if box.flip, then
// (v / 255 - mean) / std with ImageNet's mean (0.485, 0.456, 0.406) and std (0.229, 0.224, 0.225).
void resample_normalize(float* out, const RgbImage& image, const CropBox& box, int size);

// Uint8 resize of a whole image (pack writing: shorter side to `short_side`, never enlarged).
RgbImage resize_shorter_side(const RgbImage& image, int short_side);

// Stateless 64-bit mixing (splitmix64 finaliser): the seed of every random choice here.
uint64_t mix64(uint64_t x);

}  // namespace sg
