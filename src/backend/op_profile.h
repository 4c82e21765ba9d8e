#pragma once
// Time per op, for finding where a step goes: with SINGULARITY_PROFILE_OPS=1 in the
// environment, every backend op adds its time to a per-name total, and the table (calls, total
// seconds, share) is printed to stderr when the process exits. Off by default: then a timer
// costs one branch. The CPU backend times its ops by the wall clock (ScopedOpTimer); the CUDA
// backend, whose ops return before they run, by CUDA events on its stream (kernels/cuda/
// op_timer.h). The CUDA module compiles this file in and prints its own table, titled with
// set_op_time_source.
#include <chrono>
#include <functional>
#include <string>

namespace sg {

bool op_profiling_enabled();
void record_op_time(const char* name, double seconds);
// What the times are, printed above the table ("wall-clock" when never set).
void set_op_time_source(const std::string& description);
// Runs before the table is printed at exit: a device backend records the times it has not
// collected yet.
void add_op_profile_flush(std::function<void()> flush);

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
