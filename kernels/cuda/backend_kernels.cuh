#pragma once
// The CUDA backend's own small kernels around the ops: a fill with any 2-, 4- or 8-byte element
// pattern (Backend::fill of every dtype; 1-byte ones and zeros go through cudaMemsetAsync), and
// the classifier's per-row top-1/top-5 flags counted into two int64s in a fixed order.
#include "kernels/cuda/kernel_support.cuh"

namespace sg::cuda {

constexpr unsigned kCountThreads = 256;

namespace kernel {

template <class T>
__global__ void fill_pattern(T* data, T value, long n) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    data[i] = value;
  }
}

// One block: thread t counts rows t, t + blockDim.x, ...; thread 0 adds the threads' counts in
// thread order. *top1, *top5 are written with =.
__global__ void count_flags(int64_t* top1, int64_t* top5, const int32_t* flags1,
                            const int32_t* flags5, int N) {
  __shared__ int64_t counts1[kCountThreads], counts5[kCountThreads];
  int64_t c1 = 0, c5 = 0;
  for (int i = threadIdx.x; i < N; i += blockDim.x) {
    c1 += flags1[i];
    c5 += flags5[i];
  }
  counts1[threadIdx.x] = c1;
  counts5[threadIdx.x] = c5;
  __syncthreads();
  if (threadIdx.x == 0) {
    int64_t t1 = 0, t5 = 0;
    for (unsigned t = 0; t < blockDim.x; ++t) {
      t1 += counts1[t];
      t5 += counts5[t];
    }
    *top1 = t1;
    *top5 = t5;
  }
}

}  // namespace kernel

// data[0:n] = value (T: a 2-, 4- or 8-byte element's bits).
template <class T>
inline void fill_pattern(T* data, T value, long n, Stream s) {
  SG_LAUNCH(kernel::fill_pattern<T>, dim3(grid_stride_blocks(n)), dim3(256), 0, s, data, value, n);
}

// *top1 = sum of flags1[0:N], *top5 = sum of flags5[0:N] (device int64s).
inline void count_flags(int64_t* top1, int64_t* top5, const int32_t* flags1, const int32_t* flags5,
                        int N, Stream s) {
  SG_LAUNCH(kernel::count_flags, dim3(1), dim3(kCountThreads), 0, s, top1, top5, flags1, flags5, N);
}

}  // namespace sg::cuda
