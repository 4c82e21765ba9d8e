#pragma once
// Time per op, for finding where a step goes: with SINGULARITY_PROFILE_OPS=1 in the
// environment, every backend op adds its wall-clock time to a per-name total, and the table
// (calls, total seconds, share) is printed to stderr when the process exits. Off by default: then
// a timer costs one branch.
#include <chrono>

namespace sg {

bool op_profiling_enabled();
void record_op_time(const char* name, double seconds);

class ScopedOpTimer {
 public:
  explicit ScopedOpTimer(const char* name) : name_(op_profiling_enabled() ? name : nullptr) {
    if (name_) start_ = std::chrono::steady_clock::now();
  }
  ~ScopedOpTimer() {
    if (name_) {
      record_op_time(name_, std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    }
  }
  ScopedOpTimer(const ScopedOpTimer&) = delete;
  ScopedOpTimer& operator=(const ScopedOpTimer&) = delete;

 private:
  const char* name_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace sg
