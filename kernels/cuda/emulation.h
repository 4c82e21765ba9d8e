#pragma once
// Host emulation of the CUDA kernel model, so that our kernel bodies (kernels/cuda/*.cuh) also
// compile with the host compiler and run on the CPU in the tests (docs/architecture.md, "Testing").
// Included through kernel_support.cuh when __CUDACC__ is not defined; never in a CUDA build.
//
// A launch runs a grid's blocks one after another; a block's threads are host threads. Shared
// memory (`__shared__` locals) is then shared by exactly the threads of the block running.
// __syncthreads is a barrier of the block's threads; warp shuffles go through per-warp slots
// between two barriers of the warp's threads. A barrier that waits over 30 s (a thread returned
// early, or one warp skipped a shuffle) aborts with a message instead of hanging the test.
// Only the features our kernels use are here: 1-D and 2-D grids, static and dynamic shared
// memory, __syncthreads, __shfl_xor_sync / __shfl_down_sync / __shfl_sync on 32-bit and 64-bit
// values, and the bf16 type and conversions of cuda_bf16.h (which compiles on the host).
// ThreadSanitizer sees the mutex and condition-variable barriers, so it catches a missing one.
#include <cuda_bf16.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace sg::emu {

// CUDA's own dim3 (vector_types.h, which cuda_bf16.h brings in; a plain host struct).
using Dim3 = ::dim3;
inline unsigned count(const Dim3& d) { return d.x * d.y * d.z; }

// A reusable barrier of n threads (mutex + condition variable: ThreadSanitizer models them).
class Barrier {
 public:
  explicit Barrier(unsigned n = 1) : n_(n) {}
  void reset(unsigned n) { n_ = n; }
  void wait(const char* what) {
    std::unique_lock<std::mutex> lock(mutex_);
    const unsigned generation = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    if (!cv_.wait_for(lock, std::chrono::seconds(30), [&] { return generation != generation_; })) {
      std::fprintf(stderr, "cuda emulation: %s waited 30 s for its threads: a thread returned "
                   "early or skipped it\n", what);
      std::abort();
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  unsigned n_, arrived_ = 0, generation_ = 0;
};

// One launched block's shared state.
struct Block {
  Dim3 grid, block, index;
  Barrier barrier;
  std::vector<std::unique_ptr<Barrier>> warp_barriers;
  std::vector<uint64_t> warp_slots;  // 32 per warp
  std::vector<unsigned char> dynamic_shared;
};

// What a thread of the emulated kernel sees as threadIdx, blockIdx, ...
struct ThreadContext {
  Block* block = nullptr;
  Dim3 thread;
  unsigned linear = 0;  // thread.x + thread.y * block.x + ...
};

inline ThreadContext& context() {
  thread_local ThreadContext c;
  return c;
}

inline unsigned lane_id() { return context().linear % 32; }

inline void syncthreads() { context().block->barrier.wait("__syncthreads"); }

template <class T>
T shuffle(T value, unsigned source_lane, bool valid) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "shuffles of at most 64 bits");
  ThreadContext& c = context();
  const unsigned warp = c.linear / 32, lane = c.linear % 32;
  uint64_t* slots = c.block->warp_slots.data() + static_cast<size_t>(warp) * 32;
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  slots[lane] = bits;
  c.block->warp_barriers[warp]->wait("a warp shuffle");
  T out = value;
  if (valid) std::memcpy(&out, &slots[source_lane], sizeof(T));
  c.block->warp_barriers[warp]->wait("a warp shuffle");
  return out;
}

// Runs kernel() for every thread of every block of the grid.
inline void launch(Dim3 grid, Dim3 block, size_t dynamic_shared_bytes,
                   const std::function<void()>& kernel) {
  const unsigned threads = count(block);
  if (threads == 0 || threads > 1024) {
    std::fprintf(stderr, "cuda emulation: a block of %u threads (1..1024 allowed)\n", threads);
    std::abort();
  }
  Block b;
  b.grid = grid;
  b.block = block;
  b.barrier.reset(threads);
  const unsigned warps = (threads + 31) / 32;
  for (unsigned w = 0; w < warps; ++w) {
    b.warp_barriers.push_back(std::make_unique<Barrier>(std::min(32u, threads - w * 32)));
  }
  b.warp_slots.assign(static_cast<size_t>(warps) * 32, 0);
  b.dynamic_shared.assign(dynamic_shared_bytes, 0);
  Barrier block_done(threads);
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (unsigned t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ThreadContext& c = context();
      c.block = &b;
      c.linear = t;
      c.thread = Dim3(t % block.x, (t / block.x) % block.y, t / (block.x * block.y));
      for (unsigned z = 0; z < grid.z; ++z) {
        for (unsigned y = 0; y < grid.y; ++y) {
          for (unsigned x = 0; x < grid.x; ++x) {
            if (t == 0) b.index = Dim3(x, y, z);
            block_done.wait("the start of a block");  // everyone sees the new index
            kernel();
            block_done.wait("the end of a block");  // shared memory is the next block's
          }
        }
      }
      c.block = nullptr;
    });
  }
  for (std::thread& th : pool) th.join();
}

template <class T>
T* dynamic_shared() {
  return reinterpret_cast<T*>(context().block->dynamic_shared.data());
}

}  // namespace sg::emu

// The CUDA names our kernels use, over the emulation (cuda_bf16.h defined some of them for a host
// compiler already: they are redefined here).
#undef __global__
#undef __device__
#undef __host__
#undef __forceinline__
#undef __shared__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define threadIdx (sg::emu::context().thread)
#define blockIdx (sg::emu::context().block->index)
#define blockDim (sg::emu::context().block->block)
#define gridDim (sg::emu::context().block->grid)
#define __syncthreads() sg::emu::syncthreads()

template <class T>
T __shfl_xor_sync(unsigned, T value, int lane_mask, int width = 32) {
  const unsigned lane = sg::emu::lane_id();
  const unsigned source = lane ^ static_cast<unsigned>(lane_mask);
  return sg::emu::shuffle(value, source, source / width == lane / width);
}
template <class T>
T __shfl_down_sync(unsigned, T value, unsigned delta, int width = 32) {
  const unsigned lane = sg::emu::lane_id();
  const unsigned source = lane + delta;
  return sg::emu::shuffle(value, source, source / width == lane / width);
}
template <class T>
T __shfl_sync(unsigned, T value, int source_lane, int width = 32) {
  const unsigned lane = sg::emu::lane_id();
  const unsigned base = lane / width * width;
  return sg::emu::shuffle(value, base + static_cast<unsigned>(source_lane) % width, true);
}
inline float __expf(float x) { return std::exp(x); }
inline float __fmul_rn(float a, float b) { return a * b; }  // rounded, never contracted
inline float __logf(float x) { return std::log(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
