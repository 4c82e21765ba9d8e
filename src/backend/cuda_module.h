#pragma once
// The CUDA backend is a module of its own (libsingularity_cuda.so, built from kernels/cuda/
// where nvcc is found) that the core loads on first use (cuda_loader.cpp), so a CPU job never
// maps cuBLAS, cuDNN and NCCL (about 160 MB resident). The module exports one C function
// returning this table; core and module are built together, so C++ types cross it as they are.
#include <memory>
#include <string>
#include <vector>

#include "backend/device.h"

namespace sg {

class Backend;
class Communicator;

struct CudaModuleApi {
  static constexpr int kVersion = 1;  // bumped whenever the table changes
  int version = kVersion;
  std::vector<std::string> (*library_versions)() = nullptr;
  std::vector<CudaDeviceInfo> (*devices)() = nullptr;
  void* (*allocate)(size_t bytes, int device) = nullptr;
  void (*free)(void* ptr) = nullptr;
  Backend& (*backend)(int device) = nullptr;
  std::unique_ptr<Communicator> (*device_communicator)(Communicator& host_group,
                                                       Backend& backend) = nullptr;
};

}  // namespace sg

// The module's one export.
#define SINGULARITY_CUDA_MODULE_ENTRY "singularity_cuda_module"
extern "C" const sg::CudaModuleApi* singularity_cuda_module();
