// The CUDA module's one export (src/backend/cuda_module.h): the table of its entry points. The
// rest of the module is hidden (-fvisibility=hidden), so nothing here interposes the core.
#include "backend/cuda_module.h"
#include "comm/nccl_factory.h"

extern "C" __attribute__((visibility("default"))) const sg::CudaModuleApi* singularity_cuda_module() {
  static const sg::CudaModuleApi api = [] {
    sg::CudaModuleApi a;
    a.library_versions = &sg::cuda_library_versions;
    a.devices = &sg::cuda_devices;
    a.allocate = &sg::cuda_allocate;
    a.free = &sg::cuda_free;
    a.backend = &sg::cuda_backend;
    a.device_communicator = &sg::make_device_communicator;
    return a;
  }();
  return &api;
}
