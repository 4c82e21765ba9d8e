#pragma once
// Backend device interface: what `info` reports and what training asks of a device.
// The CUDA implementation lives in kernels/cuda/device.cu, inside the CUDA module that
// src/backend/cuda_loader.cpp loads on first use; where the build has no module, or it cannot be
// loaded, these functions throw saying so (never a silent CPU fallback).
#include <cstddef>
#include <string>
#include <vector>

namespace sg {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  size_t total_memory_bytes = 0;
  int compute_major = 0, compute_minor = 0;
  int multiprocessors = 0;
};

// True when this binary was built with the CUDA backend.
bool cuda_backend_compiled();
// Versions of the CUDA runtime, driver, cuBLAS, cuDNN and NCCL this binary was built against
// (and, where a driver is present, runs with), one "name version" per entry.
std::vector<std::string> cuda_library_versions();
// Devices visible to this process. Empty when there is no driver or no GPU.
// Throws RunError on a build without CUDA.
std::vector<CudaDeviceInfo> cuda_devices();

// Device memory owned by the backend. Throws RunError when allocation fails or CUDA is absent.
void* cuda_allocate(size_t bytes, int device);
void cuda_free(void* ptr);

class Backend;
// The CUDA backend on GPU `device` (kernels/cuda/cuda_backend.cu): one per device per process,
// made on first use. RunError when the build has no CUDA or the device does not exist.
Backend& cuda_backend(int device);

}  // namespace sg
