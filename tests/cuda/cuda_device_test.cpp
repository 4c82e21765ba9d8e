// The CUDA backend's step-1 surface: device discovery and device memory. Exits 77 (skipped)
// where the binary has no CUDA backend or the machine has no GPU, as Meson expects.
#include <cstdio>
#include <exception>

#include "backend/device.h"

int main() {
  if (!sg::cuda_backend_compiled()) {
    std::puts("skipped: built without the CUDA backend");
    return 77;
  }
  for (const auto& v : sg::cuda_library_versions()) std::printf("%s\n", v.c_str());
  const auto devices = sg::cuda_devices();
  if (devices.empty()) {
    std::puts("skipped: no CUDA device visible");
    return 77;
  }
  int failures = 0;
  for (const auto& d : devices) {
    std::printf("device %d: %s, %zu bytes, sm_%d%d, %d SMs\n", d.index, d.name.c_str(),
                d.total_memory_bytes, d.compute_major, d.compute_minor, d.multiprocessors);
    if (d.name.empty() || d.total_memory_bytes == 0 || d.multiprocessors <= 0) ++failures;
    try {
      void* p = sg::cuda_allocate(64 << 20, d.index);
      if (p == nullptr) ++failures;
      sg::cuda_free(p);
    } catch (const std::exception& e) {
      std::printf("FAIL: %s\n", e.what());
      ++failures;
    }
  }
  // An impossible allocation must be a clear error, not a crash.
  try {
    sg::cuda_allocate(static_cast<size_t>(1) << 60, devices[0].index);
    std::puts("FAIL: a 1 EiB allocation succeeded");
    ++failures;
  } catch (const std::exception& e) {
    std::printf("refused as expected: %s\n", e.what());
  }
  std::printf("%d passed, %d failed\n", failures == 0 ? 1 : 0, failures);
  return failures == 0 ? 0 : 1;
}
