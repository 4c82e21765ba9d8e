#include "data/synthetic_images.h"

#include <cmath>
#include <vector>

#include "util/rng.h"

namespace sg {
namespace {

uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t state = a ^ (b * 0x9E3779B97F4A7C15ull);
  return splitmix64(state);
}

// Noise of mean 0 and variance 1, near a Gaussian: per value one 64-bit word, the sum of its four
// 16-bit parts minus their mean (Irwin-Hall: variance (2^32 - 1) / 3), scaled.
// Integer sums and one float product: tests/interop/interop.py repeats them bit for bit.
void fill_noise(float* out, size_t n, Rng& rng) {
  const float scale = static_cast<float>(std::sqrt(3.0) / 65536.0);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t w = rng.next_u64();
    const int64_t sum = static_cast<int64_t>((w & 0xFFFF) + ((w >> 16) & 0xFFFF) +
                                             ((w >> 32) & 0xFFFF) + (w >> 48));
    out[i] = static_cast<float>(sum - 131070) * scale;
  }
}

// pattern(y, x) = sin(fx x + fy y + phase) as sin(a + b) = sin a cos b + cos a sin b, from
// per-column and per-row tables of the double sines rounded to float; the float products and
// sum stay unfused (no FMA) so that the NumPy mirror gets the same bits on any -march.
[[gnu::optimize("fp-contract=off")]] void add_pattern(float* out, int size, float colour,
                                                      const float* sa, const float* ca,
                                                      const float* sb, const float* cb) {
  for (int y = 0; y < size; ++y) {
    float* row = out + static_cast<size_t>(y) * size;
    for (int x = 0; x < size; ++x) row[x] = (colour + (sa[x] * cb[y] + ca[x] * sb[y])) + row[x];
  }
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
  const int B = count, S = size_;
  const size_t plane = static_cast<size_t>(S) * S;
  float* images = batch.data<float>(0) + static_cast<size_t>(row) * 3 * plane;
  int32_t* labels = batch.data<int32_t>(1) + row;
#pragma omp parallel for schedule(static)
  for (int b = 0; b < B; ++b) {
    const int64_t image = static_cast<int64_t>((first + static_cast<uint64_t>(b)) % static_cast<uint64_t>(count_));
    const int32_t label = label_of(image);
    labels[b] = label;
    Rng prototype(mix(seed_ ^ 0x5ca1ab1eull, static_cast<uint64_t>(label)));
    float colour[3];
    double phase[3];
    for (int c = 0; c < 3; ++c) {
      colour[c] = static_cast<float>(2 * prototype.uniform() - 1);
      phase[c] = 2 * M_PI * prototype.uniform();
    }
    const double fx = (1 + 3 * prototype.uniform()) * 2.0 * M_PI / S;
    const double fy = (1 + 3 * prototype.uniform()) * 2.0 * M_PI / S;
    std::vector<float> tables(4 * static_cast<size_t>(S));
    float *sa = tables.data(), *ca = sa + S, *sb = ca + S, *cb = sb + S;
    for (int x = 0; x < S; ++x) {
      sa[x] = static_cast<float>(std::sin(fx * x));
      ca[x] = static_cast<float>(std::cos(fx * x));
    }
    Rng noise(mix(split_seed_, static_cast<uint64_t>(image) + 0x1000000000ull));
    float* out = images + static_cast<size_t>(b) * 3 * plane;
    fill_noise(out, 3 * plane, noise);
    for (int c = 0; c < 3; ++c) {
      for (int y = 0; y < S; ++y) {
        sb[y] = static_cast<float>(std::sin(fy * y + phase[c]));
        cb[y] = static_cast<float>(std::cos(fy * y + phase[c]));
      }
      add_pattern(out + c * plane, S, colour[c], sa, ca, sb, cb);
    }
  }
}

}  // namespace sg
