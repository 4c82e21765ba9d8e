#pragma once
// Synthetic images for tests and benchmarks without data: micro-batches of (images (B, 3, S, S)
// float, labels (B) int32), like ImageNet's. Sample i is image i % count of its split: its label
// and pixels are a pure function of (seed, split seed, i % count), so batches are reproducible
// on any process count. The class prototypes depend on the job's seed only, so the train and
// validation splits (different split seeds) show the same classes. Each class has a prototype (a colour and a low-frequency stripe pattern); an
// image is its class's prototype plus noise of unit variance (near-Gaussian: each value a sum of
// four uniforms), so a network can learn the classes but not instantly. A batch of eight
// 224x224 images takes about 2 ms on two cores (synthetic_images.cpp).
#include <cstdint>

#include "data/batch_source.h"

namespace sg {

class SyntheticImages final : public BatchSource {
 public:
  SyntheticImages(int classes, int image_size, int64_t count, uint64_t seed, uint64_t split_seed);
  void fill_rows(MicroBatch& batch, int row, int count, uint64_t first) override;
  int32_t label_of(int64_t image) const;

 private:
  int classes_, size_;
  int64_t count_;
  uint64_t seed_, split_seed_;
};

}  // namespace sg
