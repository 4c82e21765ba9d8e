#pragma once
// The table of backend-op cases (as ggml's test-backend-ops): one entry per op of
// src/backend/backend.h that computes the same thing on every backend (not attention_storage,
// device_memory_peak or conv2d_filter, whose results are each backend's own), each calling the op on a subject backend and on the CPU
// backend (the reference) with the same random inputs at small, awkward shapes, and comparing
// every output. backend_ops_test.cpp runs the table on the guarded backend (tests/
// guarded_backend.h: the CPU's kernels behind device-only memory, bitwise); the GPU test
// (tests/cuda/cuda_backend_test.cpp) on the CUDA backend, at each case's tolerance.
// tests/cuda/backend_ops.txt lists every op; op_coverage_test.py checks that each op it marks
// `test` or `composite` is in this table or called by a hand-written GPU test.
#include <span>

#include "tests/backend/op_run.h"

namespace sg::test {

struct BackendOpCase {
  const char* op;     // the Backend method the case calls (others may run to set it up)
  double tolerance;   // relative, against the largest reference value, for a GPU
  void (*run)(OpRun& run);
};

std::span<const BackendOpCase> backend_op_cases();

}  // namespace sg::test
