#pragma once
// Time per op, for finding where a step goes: with SINGULARITY_PROFILE_OPS=1 in the
// environment, every backend op adds its time to a per-name total, and the table (calls, total
// seconds, share) is printed to stderr when the process exits. Off by default: then a timer
// costs one branch. The CPU backend times its ops by the wall clock (ScopedOpTimer); the CUDA
// backend, whose ops return before they run, by CUDA events on its stream (kernels/cuda/
// op_timer.h). The CUDA module compiles this file in and prints its own table, titled with
// set_op_time_source.
//
// With SINGULARITY_PROFILE_OPS_TRACE=<path> (which turns the profiling on as well) every call the
// CPU backend times is also kept, and written to <path> at exit, one tab-separated line per call:
// op name, start (seconds since the first timed call), seconds. Under mpirun with several
// processes each writes <path>.rank<N>. Ops that share a name (the
// matmul_forward of every layer and the LM head) can then be told apart by their order within a
// step, and a step's ops summed and set against its measured time (scripts/bench/gpt-cpu does).
#include <chrono>
#include <functional>
#include <string>

namespace sg {

bool op_profiling_enabled();
void record_op_time(const char* name, double seconds);
// Whether SINGULARITY_PROFILE_OPS_TRACE names a file for the per-call trace.
bool op_trace_enabled();
// record_op_time, plus one line of the trace (when it is on) starting at `start`.
void record_op_call(const char* name, std::chrono::steady_clock::time_point start, double seconds);
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
      const auto end = std::chrono::steady_clock::now();
      record_op_call(name_, start_, std::chrono::duration<double>(end - start_).count());
    }
  }
  ScopedOpTimer(const ScopedOpTimer&) = delete;
  ScopedOpTimer& operator=(const ScopedOpTimer&) = delete;

 private:
  const char* name_;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace sg
