// The core's side of the CUDA backend (device.h, nccl_factory.h): loads the CUDA module
// (cuda_module.h) on first use and forwards to it. In a build without CUDA, or where the
// module cannot be loaded, every entry point says so and what to do; never a silent CPU
// fallback.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>

#include "backend/cuda_module.h"
#include "backend/device.h"
#include "comm/nccl_factory.h"
#include "util/error.h"

#ifndef SINGULARITY_CUDA_MODULE_PATHS
#define SINGULARITY_CUDA_MODULE_PATHS ""  // a build without the CUDA backend
#endif

namespace sg {
namespace {

[[noreturn]] void fail_no_cuda() {
  throw RunError(
      "this singularity was built without the CUDA backend: install the CUDA toolkit, put nvcc on "
      "PATH and rebuild (meson setup build -Dcuda=enabled), or set devices.backend: cpu");
}

// The folder of the running executable (/proc/self/exe), or "" where it cannot be read.
std::string executable_dir() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

// Where to look: $SINGULARITY_CUDA_MODULE; then beside the executable, as an unpacked GPU kit or
// an installed tree lays it out (<exe dir>/../lib/singularity/, <exe dir>/), so a moved tree
// finds its own module (docs/gpu.md); then the build's and the installation's paths
// (colon-separated, fixed at configure time).
std::vector<std::string> module_candidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("SINGULARITY_CUDA_MODULE"); env != nullptr && *env != 0) {
    out.emplace_back(env);
  }
  if (const std::string dir = executable_dir(); !dir.empty()) {
    for (const char* rel : {"/../lib/singularity/", "/"}) {
      std::error_code ec;
      const std::string path =
          std::filesystem::weakly_canonical(dir + rel + "libsingularity_cuda.so", ec).string();
      if (!ec && std::filesystem::exists(path, ec) &&
          std::find(out.begin(), out.end(), path) == out.end()) {
        out.push_back(path);
      }
    }
  }
  const std::string paths = SINGULARITY_CUDA_MODULE_PATHS;
  size_t start = 0;
  while (start < paths.size()) {
    const size_t end = std::min(paths.find(':', start), paths.size());
    if (end > start) out.push_back(paths.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

const CudaModuleApi& module() {
  static std::once_flag once;
  static const CudaModuleApi* api = nullptr;
  static std::string failure;
  std::call_once(once, [] {
    if (!cuda_backend_compiled()) return;
    std::string tried;
    for (const std::string& path : module_candidates()) {
      void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (handle == nullptr) {
        const char* why = dlerror();
        tried += std::string(tried.empty() ? " " : "; ") + path + " (" +
                 (why != nullptr ? why : "not loadable") + ")";
        continue;
      }
      using Entry = const CudaModuleApi* (*)();
      auto entry = reinterpret_cast<Entry>(dlsym(handle, SINGULARITY_CUDA_MODULE_ENTRY));
      const CudaModuleApi* found = entry != nullptr ? entry() : nullptr;
      if (found == nullptr || found->version != CudaModuleApi::kVersion) {
        tried += std::string(tried.empty() ? " " : "; ") + path +
                 " (not this build's CUDA module: rebuild)";
        continue;
      }
      api = found;  // the handle stays open for the life of the process
      return;
    }
    failure = "the CUDA backend module could not be loaded; set SINGULARITY_CUDA_MODULE to "
              "libsingularity_cuda.so of this build, or rebuild. Tried:" + tried;
  });
  if (!cuda_backend_compiled()) fail_no_cuda();
  if (api == nullptr) throw RunError(failure);
  return *api;
}

}  // namespace

bool cuda_backend_compiled() { return std::string(SINGULARITY_CUDA_MODULE_PATHS).size() > 0; }

std::vector<std::string> cuda_library_versions() {
  if (!cuda_backend_compiled()) return {};
  return module().library_versions();
}
std::vector<CudaDeviceInfo> cuda_devices() { return module().devices(); }
void* cuda_allocate(size_t bytes, int device) { return module().allocate(bytes, device); }
void cuda_free(void* ptr) { module().free(ptr); }
Backend& cuda_backend(int device) { return module().backend(device); }
std::unique_ptr<Communicator> make_device_communicator(Communicator& host_group, Backend& backend) {
  return module().device_communicator(host_group, backend);
}

}  // namespace sg
