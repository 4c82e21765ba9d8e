#include "data/synthetic_images.h"

#include <cmath>

#include "util/rng.h"

namespace sg {
namespace {

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t state = a ^ (b * 0x9E3779B97F4A7C15ull);
  return splitmix64(state);
}

}  // namespace

SyntheticImages::SyntheticImages(int classes, int image_size, int64_t count, uint64_t seed,
                                 uint64_t split_seed)
    : classes_(classes), size_(image_size), count_(count), seed_(seed), split_seed_(split_seed) {}

int32_t SyntheticImages::label_of(int64_t image) const {
  return static_cast<int32_t>(mix(split_seed_, static_cast<uint64_t>(image)) %
                              static_cast<uint64_t>(classes_));
}

void SyntheticImages::fill_rows(MicroBatch& batch, int row, int count, uint64_t first) {
  const int B = count;
  const size_t plane = static_cast<size_t>(size_) * size_;
  float* images = batch.data<float>(0) + static_cast<size_t>(row) * 3 * plane;
  int32_t* labels = batch.data<int32_t>(1) + row;
#pragma omp parallel for schedule(static)
  for (int b = 0; b < B; ++b) {
    const int64_t image = static_cast<int64_t>((first + static_cast<uint64_t>(b)) % static_cast<uint64_t>(count_));
    const int32_t label = label_of(image);
    labels[b] = label;
    Rng prototype(mix(seed_ ^ 0x5ca1ab1eull, static_cast<uint64_t>(label)));
    float colour[3], phase[3];
    for (int c = 0; c < 3; ++c) {
      colour[c] = static_cast<float>(2 * prototype.uniform() - 1);
      phase[c] = static_cast<float>(2 * M_PI * prototype.uniform());
    }
    const float fx = static_cast<float>(1 + 3 * prototype.uniform()) * 2.0f * static_cast<float>(M_PI) / size_;
    const float fy = static_cast<float>(1 + 3 * prototype.uniform()) * 2.0f * static_cast<float>(M_PI) / size_;
    Rng noise(mix(split_seed_, static_cast<uint64_t>(image) + 0x1000000000ull));
    float* out = images + static_cast<size_t>(b) * 3 * plane;
    for (int c = 0; c < 3; ++c) {
      for (int y = 0; y < size_; ++y) {
        for (int x = 0; x < size_; ++x) {
          const float pattern = std::sin(fx * x + fy * y + phase[c]);
          out[c * plane + static_cast<size_t>(y) * size_ + x] =
              colour[c] + pattern + static_cast<float>(noise.normal());
        }
      }
    }
  }
}

}  // namespace sg
