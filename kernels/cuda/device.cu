// Device discovery and raw device memory for `info` and the device tests; the backend itself is
// cuda_backend.cu.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <string>

#include "backend/device.h"
#include "kernels/cuda/attention_op.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_memory.h"
#include "util/error.h"

namespace sg {
namespace {

std::string version_string(int v, int major_div, int minor_div, int minor_mod) {
  return std::to_string(v / major_div) + "." + std::to_string((v / minor_div) % minor_mod);
}

}  // namespace

bool cuda_backend_compiled() { return true; }

std::vector<std::string> cuda_library_versions() {
  std::vector<std::string> out;
  int runtime = 0, driver = 0;
  SG_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  out.push_back("cuda-runtime " + version_string(runtime, 1000, 10, 100));
  // No driver is not an error here: `info` reports it.
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
  out.push_back(cuda::fused_attention_summary());
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
    SG_CUDA_CHECK(cudaGetDeviceProperties(&prop, i));
    devices.push_back({i, prop.name, prop.totalGlobalMem, prop.major, prop.minor,
                       prop.multiProcessorCount});
  }
  return devices;
}

void* cuda_allocate(size_t bytes, int device) {
  SG_CUDA_CHECK(cudaSetDevice(device));
  return cuda::allocate_device(bytes);
}

void cuda_free(void* ptr) { SG_CUDA_CHECK(cudaFree(ptr)); }

}  // namespace sg
