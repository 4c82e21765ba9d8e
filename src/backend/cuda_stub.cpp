// Linked when the build found no CUDA toolkit: every CUDA entry point fails loudly.
#include "backend/device.h"
#include "util/error.h"

namespace sg {
namespace {
[[noreturn]] void fail_no_cuda() {
  throw RunError(
      "this singularity was built without the CUDA backend: install the CUDA toolkit, put nvcc on "
      "PATH and rebuild (meson setup build -Dcuda=enabled), or set devices.backend: cpu");
}
}  // namespace

bool cuda_backend_compiled() { return false; }
std::vector<std::string> cuda_library_versions() { return {}; }
std::vector<CudaDeviceInfo> cuda_devices() { fail_no_cuda(); }
void* cuda_allocate(size_t, int) { fail_no_cuda(); }
void cuda_free(void*) { fail_no_cuda(); }

}  // namespace sg
