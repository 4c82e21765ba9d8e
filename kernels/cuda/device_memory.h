#pragma once
// Device memory of the CUDA backend: cudaMalloc with an out-of-memory message that says what to
// do, and the grow-only scratch area the ops share (layernorm's partial sums, the flash
// attention's row deltas, the convolutions' transposed filters and workspaces, ...). Never
// managed memory: a page fault in the middle of a step would hide a size mistake behind a
// slowdown.
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "util/error.h"

namespace sg::cuda {

// RunError for a full device: the request, the free memory, and what to do.
[[noreturn]] inline void throw_out_of_memory(size_t bytes, const char* what) {
  cudaGetLastError();  // not sticky: clear it so the next call does not report it again
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  int device = 0;
  cudaGetDevice(&device);
  throw RunError("cannot allocate " + std::to_string(bytes) + " bytes of " + what + " on cuda:" +
                 std::to_string(device) + " (" + std::to_string(free_bytes) + " of " +
                 std::to_string(total_bytes) +
                 " bytes free): lower train.micro_batch or the model size, or use more devices");
}

// `bytes` of memory on the current device (cudaMalloc: 256-byte aligned). RunError naming the
// request and the free memory when the device is full.
inline void* allocate_device(size_t bytes, const char* what = "device memory") {
  void* ptr = nullptr;
  const cudaError_t status = cudaMalloc(&ptr, bytes);
  if (status == cudaErrorMemoryAllocation) throw_out_of_memory(bytes, what);
  SG_CUDA_CHECK(status);
  return ptr;
}

// Byte offsets of consecutive regions in one scratch area, each 256-byte aligned (as cudaMalloc
// aligns, so vectorised loads and cuDNN/cuBLASLt alignment requirements hold in every region).
class ScratchLayout {
 public:
  size_t add(size_t bytes) {
    const size_t at = (end_ + kAlign - 1) / kAlign * kAlign;
    end_ = at + bytes;
    return at;
  }
  size_t bytes() const { return end_; }

 private:
  static constexpr size_t kAlign = 256;
  size_t end_ = 0;
};

// A device area that only grows. Ops on one stream use it one after another (stream order), so
// one area serves them all. Growing is stream-ordered too (cudaFreeAsync / cudaMallocAsync on
// that stream): the old area is released once the work queued before it is done, with no
// device-wide synchronisation. A plain cudaFree would wait for every stream, collectives in
// flight on the communication stream included, which wait for peers that may in turn be waiting
// for this process: a deadlock. Where the device has no stream-ordered allocator, growing waits
// for the stream and uses cudaFree / cudaMalloc.
class DeviceScratch {
 public:
  DeviceScratch() = default;
  ~DeviceScratch() {
    if (data_ != nullptr) cudaFree(data_);  // errors at exit (runtime unloading) are ignored
  }
  DeviceScratch(const DeviceScratch&) = delete;
  DeviceScratch& operator=(const DeviceScratch&) = delete;

  // At least `bytes` of device memory, valid until the next call that grows it.
  unsigned char* get(size_t bytes, cudaStream_t stream) {
    if (bytes <= capacity_) return data_;
    constexpr size_t kGranule = size_t{1} << 20;  // whole MiB: fewer regrowths
    const size_t rounded = (bytes + kGranule - 1) / kGranule * kGranule;
    const bool ordered = stream_ordered();
    if (!ordered) SG_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (data_ != nullptr) SG_CUDA_CHECK(ordered ? cudaFreeAsync(data_, stream) : cudaFree(data_));
    data_ = nullptr;
    capacity_ = 0;
    if (ordered) {
      void* fresh = nullptr;
      const cudaError_t status = cudaMallocAsync(&fresh, rounded, stream);
      if (status == cudaErrorMemoryAllocation) throw_out_of_memory(rounded, "backend scratch");
      SG_CUDA_CHECK(status);
      data_ = static_cast<unsigned char*>(fresh);
    } else {
      data_ = static_cast<unsigned char*>(allocate_device(rounded, "backend scratch"));
    }
    capacity_ = rounded;
    return data_;
  }
  size_t capacity() const { return capacity_; }

 private:
  // Whether the current device has CUDA's stream-ordered allocator (asked once).
  bool stream_ordered() {
    if (pools_ < 0) {
      int device = 0, supported = 0;
      SG_CUDA_CHECK(cudaGetDevice(&device));
      SG_CUDA_CHECK(cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device));
      pools_ = supported != 0 ? 1 : 0;
    }
    return pools_ == 1;
  }
  unsigned char* data_ = nullptr;
  size_t capacity_ = 0;
  int pools_ = -1;  // unknown until the first growth
};

}  // namespace sg::cuda
