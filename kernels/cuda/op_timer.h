#pragma once
// Per-op GPU time for SINGULARITY_PROFILE_OPS=1 (backend/op_profile.h). An op of the CUDA backend
// returns as soon as its work is queued, so the host's wall clock says nothing about it; instead
// a pair of CUDA events brackets the op's work on the compute stream, and the time between them
// (cudaEventElapsedTime) is what the GPU spent on it, host gaps inside the op included.
//
// Pairs come from a pool made on demand (at most kMaxPairs, never created per call). Their times
// are collected lazily: by collect(), which the backend calls where the host has waited for the
// stream anyway (synchronize, copy_to_host, sum_of_squares), when the pool runs out (then the
// host waits for the ops queued so far), and at exit. With profiling off, timing an op costs one branch.
//   const OpTimer::Scope timed(timer, "gelu_forward");  // then queue the op's work
#include <cuda_runtime.h>

#include <vector>

namespace sg::cuda {

class OpTimer {
  struct Pair {
    cudaEvent_t start = nullptr, stop = nullptr;
    const char* name = nullptr;  // a string literal
  };

 public:
  static constexpr size_t kMaxPairs = 1024;

  // Events on `stream` (of the device current now, the backend's).
  explicit OpTimer(cudaStream_t stream);
  ~OpTimer();
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

  bool enabled() const { return enabled_; }

  // Records the start event when constructed and the stop event when destroyed, unless an
  // exception leaves the op (then the pair goes back unused).
  class Scope {
   public:
    Scope(OpTimer& timer, const char* name)
        : timer_(timer.enabled_ ? &timer : nullptr) {
      if (timer_ != nullptr) begin(name);
    }
    ~Scope() {
      if (timer_ != nullptr) end();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    void begin(const char* name);
    void end() noexcept;
    OpTimer* timer_;
    Pair pair_;
    int exceptions_ = 0;  // std::uncaught_exceptions() at the start
  };

  // The times of every op whose stop event has been recorded, into record_op_time. Waits for
  // the last of them (nothing to wait for where the host has just synchronised the stream).
  void collect();

 private:
  Pair take();
  void release() noexcept;

  bool enabled_;
  cudaStream_t stream_;
  int device_ = 0;
  std::vector<Pair> free_;     // made, not in use
  std::vector<Pair> pending_;  // both events recorded, time not collected, in stream order
  size_t made_ = 0;
};

}  // namespace sg::cuda
