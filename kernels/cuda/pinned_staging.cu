// Page-locked staging of host -> device copies; see pinned_staging.h.
#include "kernels/cuda/pinned_staging.h"

#include <cstdio>
#include <cstring>

#include "kernels/cuda/cuda_check.h"

namespace sg::cuda {

PinnedStaging::~PinnedStaging() {
  // Errors are ignored: this may run at exit, while the CUDA runtime unloads.
  for (Slot& slot : slots_) {
    if (slot.in_flight) cudaEventSynchronize(slot.done);
    if (slot.done != nullptr) cudaEventDestroy(slot.done);
    if (slot.host != nullptr) cudaFreeHost(slot.host);
  }
}

// The slot free (its last copy finished) and at least `bytes` large; false when page-locked
// memory was refused.
bool PinnedStaging::ready(Slot& slot, size_t bytes) {
  if (slot.in_flight) {
    SG_CUDA_CHECK(cudaEventSynchronize(slot.done));
    slot.in_flight = false;
  }
  if (slot.done == nullptr) {
    SG_CUDA_CHECK(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
  }
  if (slot.capacity >= bytes) return true;
  if (slot.host != nullptr) SG_CUDA_CHECK(cudaFreeHost(slot.host));
  slot.host = nullptr;
  slot.capacity = 0;
  // Grown to a power of two from 64 KiB, so a batch that varies a little keeps its slot.
  size_t capacity = size_t{64} << 10;
  while (capacity < bytes) capacity *= 2;
  if (cudaHostAlloc(&slot.host, capacity, cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();  // not sticky; clear it so the next check does not report it
    slot.host = nullptr;
    std::fprintf(stderr, "cuda: warning: %zu bytes of page-locked memory refused (the locked-"
                 "memory limit, ulimit -l?); batches upload from pageable memory, slower\n",
                 capacity);
    return false;
  }
  slot.capacity = capacity;
  return true;
}

bool PinnedStaging::copy(void* dst, const void* host_src, size_t bytes) {
  if (unavailable_ || bytes == 0 || bytes > kMaxBytes) return false;
  Slot& slot = slots_[next_];
  if (!ready(slot, bytes)) {
    unavailable_ = true;
    return false;
  }
  next_ = (next_ + 1) % slots_.size();
  std::memcpy(slot.host, host_src, bytes);
  SG_CUDA_CHECK(cudaMemcpyAsync(dst, slot.host, bytes, cudaMemcpyHostToDevice, stream_));
  SG_CUDA_CHECK(cudaEventRecord(slot.done, stream_));
  slot.in_flight = true;
  return true;
}

}  // namespace sg::cuda
