#pragma once
// Host -> device copies through page-locked staging (the batches a step uploads: token ids and
// targets, images and labels). From pageable memory the driver stages a large copy in chunks and
// the calling thread waits until the last chunk has gone, i.e. until the stream's earlier work,
// the previous micro-batch's compute, is done: the next batch's host work then runs while the GPU
// waits. Here the bytes are copied into one of a few page-locked slots and the DMA is queued on
// the stream behind the ops before it (which may still read the destination), so the call
// returns at once; a slot is reused after the copy queued from it has finished.
#include <cuda_runtime.h>

#include <array>
#include <cstddef>

namespace sg::cuda {

class PinnedStaging {
 public:
  // Copies of at most kMaxBytes go through the slots; larger ones (a model's parameters at
  // start-up) stay pageable copies.
  static constexpr size_t kMaxBytes = size_t{512} << 20;

  explicit PinnedStaging(cudaStream_t stream) : stream_(stream) {}
  ~PinnedStaging();
  PinnedStaging(const PinnedStaging&) = delete;
  PinnedStaging& operator=(const PinnedStaging&) = delete;

  // Queues the copy of `bytes` from host_src to dst on the stream through a page-locked slot;
  // host_src may be reused when this returns. False (nothing queued) when the copy is larger
  // than kMaxBytes or page-locked memory could not be had (a container's locked-memory limit):
  // the caller copies from pageable memory then.
  bool copy(void* dst, const void* host_src, size_t bytes);

 private:
  // Four slots: two micro-batches of two fields each in flight.
  struct Slot {
    void* host = nullptr;
    size_t capacity = 0;
    cudaEvent_t done = nullptr;  // recorded after the copy from this slot
    bool in_flight = false;
  };
  bool ready(Slot& slot, size_t bytes);
  cudaStream_t stream_;
  std::array<Slot, 4> slots_{};
  size_t next_ = 0;
  bool unavailable_ = false;  // page-locked memory was refused once: pageable from then on
};

}  // namespace sg::cuda
