// Per-op GPU time from CUDA event pairs; see op_timer.h.
#include "kernels/cuda/op_timer.h"

#include <cstdio>
#include <exception>
#include <mutex>
#include <set>

#include "backend/op_profile.h"
#include "kernels/cuda/cuda_check.h"
#include "util/error.h"

namespace sg::cuda {
namespace {

// The live timers, so that the times not collected yet reach the table at exit (one flush for
// all of them; a timer destroyed before exit collects its own and leaves).
struct Timers {
  std::mutex mutex;
  std::set<OpTimer*> live;
};

Timers& timers() {
  static Timers t;  // made before the flush is registered, so it outlives it
  return t;
}

void collect_all_at_exit() noexcept {
  Timers& t = timers();
  const std::lock_guard<std::mutex> lock(t.mutex);
  for (OpTimer* timer : t.live) {
    try {
      timer->collect();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warning: the last GPU op times were not collected: %s\n", e.what());
    }
  }
}

void register_timer(OpTimer* timer) {
  static std::once_flag once;
  Timers& t = timers();
  std::call_once(once, [] { add_op_profile_flush(collect_all_at_exit); });
  const std::lock_guard<std::mutex> lock(t.mutex);
  t.live.insert(timer);
}

void unregister_timer(OpTimer* timer) noexcept {
  Timers& t = timers();
  const std::lock_guard<std::mutex> lock(t.mutex);
  t.live.erase(timer);
}

}  // namespace

OpTimer::OpTimer(cudaStream_t stream) : enabled_(op_profiling_enabled()), stream_(stream) {
  if (!enabled_) return;
  SG_CUDA_CHECK(cudaGetDevice(&device_));
  // Capacity for every pair up front: recording a stop event never allocates (Scope::end is
  // noexcept).
  free_.reserve(kMaxPairs);
  pending_.reserve(kMaxPairs);
  set_op_time_source("GPU time per op (CUDA events around each op on the compute stream)");
  register_timer(this);
}

OpTimer::~OpTimer() {
  if (!enabled_) return;
  unregister_timer(this);
  try {
    collect();
  } catch (const std::exception&) {
    // at exit the runtime may be unloading: the times are lost, the events freed below
  }
  release();
}

void OpTimer::release() noexcept {
  for (const std::vector<Pair>* list : {&free_, &pending_}) {
    for (const Pair& p : *list) {
      cudaEventDestroy(p.start);
      cudaEventDestroy(p.stop);
    }
  }
  free_.clear();
  pending_.clear();
}

OpTimer::Pair OpTimer::take() {
  if (free_.empty() && made_ < kMaxPairs) {
    Pair p;
    SG_CUDA_CHECK(cudaEventCreate(&p.start));
    const cudaError_t status = cudaEventCreate(&p.stop);
    if (status != cudaSuccess) {
      cudaEventDestroy(p.start);
      SG_CUDA_CHECK(status);
    }
    ++made_;
    return p;
  }
  if (free_.empty()) collect();  // every pair is pending: wait for them and reuse
  if (free_.empty()) {
    throw RunError("GPU op timing: all " + std::to_string(kMaxPairs) +
                   " event pairs are in ops still running on the host (nested too deeply)");
  }
  const Pair p = free_.back();
  free_.pop_back();
  return p;
}

void OpTimer::collect() {
  if (pending_.empty()) return;
  int current = -1;
  SG_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device_) SG_CUDA_CHECK(cudaSetDevice(device_));
  // The pairs were recorded in stream order: once the last stop event is done, all are.
  SG_CUDA_CHECK(cudaEventSynchronize(pending_.back().stop));
  std::vector<Pair> done;
  done.reserve(kMaxPairs);
  done.swap(pending_);  // pending_ keeps the reserved capacity (done's)
  for (const Pair& p : done) {
    float milliseconds = 0.0f;
    SG_CUDA_CHECK(cudaEventElapsedTime(&milliseconds, p.start, p.stop));
    record_op_time(p.name, 1e-3 * milliseconds);
    free_.push_back(p);
  }
  if (current != device_) SG_CUDA_CHECK(cudaSetDevice(current));
}

void OpTimer::Scope::begin(const char* name) {
  pair_ = timer_->take();
  pair_.name = name;
  exceptions_ = std::uncaught_exceptions();
  const cudaError_t status = cudaEventRecord(pair_.start, timer_->stream_);
  if (status != cudaSuccess) {
    timer_->free_.push_back(pair_);
    timer_ = nullptr;  // not timed; the constructor throws below
    SG_CUDA_CHECK(status);
  }
}

void OpTimer::Scope::end() noexcept {
  // An op that throws is not timed (its work may be partly queued); its pair is reused.
  if (std::uncaught_exceptions() > exceptions_) {
    timer_->free_.push_back(pair_);
    return;
  }
  const cudaError_t status = cudaEventRecord(pair_.stop, timer_->stream_);
  if (status != cudaSuccess) {
    cudaGetLastError();  // not thrown from a destructor: the op's own checks report the GPU's state
    std::fprintf(stderr, "warning: GPU op timing of %s dropped: %s\n", pair_.name,
                 cudaGetErrorString(status));
    timer_->free_.push_back(pair_);
    return;
  }
  timer_->pending_.push_back(pair_);
}

}  // namespace sg::cuda
