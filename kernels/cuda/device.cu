// CUDA backend, step 1: device discovery and device memory. Kernels arrive in later steps,
// each checked against its CPU reference in kernels/cpu/.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <source_location>
#include <string>

#include "backend/device.h"
#include "util/error.h"

namespace sg {
namespace {

void check_cuda(cudaError_t status, const char* what,
                std::source_location where = std::source_location::current()) {
  if (status != cudaSuccess) {
    throw RunError(std::string(what) + " failed: " + cudaGetErrorString(status) + " (" +
                   where.file_name() + ":" + std::to_string(where.line()) + ")");
  }
}

std::string version_string(int v, int major_div, int minor_div, int minor_mod) {
  return std::to_string(v / major_div) + "." + std::to_string((v / minor_div) % minor_mod);
}

}  // namespace

bool cuda_backend_compiled() { return true; }

std::vector<std::string> cuda_library_versions() {
  std::vector<std::string> out;
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  out.push_back("cuda-runtime " + version_string(runtime, 1000, 10, 100));
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) {
    out.push_back("cuda-driver " + version_string(driver, 1000, 10, 100));
  } else {
    out.push_back("cuda-driver none");
  }
  out.push_back("cublas " + std::to_string(CUBLAS_VER_MAJOR) + "." +
                std::to_string(CUBLAS_VER_MINOR));
  out.push_back("cudnn " + std::to_string(CUDNN_MAJOR) + "." + std::to_string(CUDNN_MINOR) +
                "." + std::to_string(CUDNN_PATCHLEVEL));
  out.push_back("nccl " + std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." +
                std::to_string(NCCL_PATCH));
  return out;
}

std::vector<CudaDeviceInfo> cuda_devices() {
  int count = 0;
  // No driver or no device is not an error for discovery: report none.
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return {};
  }
  std::vector<CudaDeviceInfo> devices;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, i), "cudaGetDeviceProperties");
    devices.push_back({i, prop.name, prop.totalGlobalMem, prop.major, prop.minor,
                       prop.multiProcessorCount});
  }
  return devices;
}

void* cuda_allocate(size_t bytes, int device) {
  check_cuda(cudaSetDevice(device), "cudaSetDevice");
  void* ptr = nullptr;
  check_cuda(cudaMalloc(&ptr, bytes), "cudaMalloc");
  return ptr;
}

void cuda_free(void* ptr) { check_cuda(cudaFree(ptr), "cudaFree"); }

}  // namespace sg
