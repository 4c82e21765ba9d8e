#include <cblas.h>
#include <mpi.h>
#include <omp.h>

#include <cstdlib>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "backend/cpu_peak.h"
#include "backend/device.h"
#include "cli/commands.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/matmul_bf16.h"
#include "util/error.h"

namespace sg {

int run_info_command(bool measure_peak) {
  fmt::print("singularity {}\n", SINGULARITY_VERSION);
  fmt::print("backends: cpu{}\n", cuda_backend_compiled() ? ", cuda" : "");
  fmt::print("cpu: {} hardware threads, OpenMP {}, {} (kernels: {})\n",
             std::thread::hardware_concurrency(), _OPENMP, openblas_get_config(),
             openblas_get_corename());
  // How idle threads wait (blas_core.h: set by the re-execution where the user has not).
  const auto env_or = [](const char* name) {
    const char* value = std::getenv(name);
    return std::string(value != nullptr ? value : "unset");
  };
  fmt::print("cpu threads: OMP_WAIT_POLICY={}, GOMP_SPINCOUNT={}, OPENBLAS_THREAD_TIMEOUT={}\n",
             env_or("OMP_WAIT_POLICY"), env_or("GOMP_SPINCOUNT"),
             env_or("OPENBLAS_THREAD_TIMEOUT"));
  // The hand-written kernels' variant (kernels/cpu/kernel_table.h) and what else the build holds.
  int status = 0;
  try {
    fmt::print("cpu kernels: {} (built: {}; SINGULARITY_CPU_KERNELS chooses)\n",
               cpu::kernels().isa, cpu::kernel_variants_text());
  } catch (const RunError& e) {
    fmt::print("cpu kernels: error: {}\n", e.what());
    status = 1;
  }
  const std::string bf16 = cpu::bf16_matmul_implementation();
  fmt::print("cpu bf16 products: {}\n",
             bf16.empty() ? "emulated (no bf16 units: bf16-rounded operands, fp32 sgemm)"
                          : "oneDNN " + bf16);
  char mpi_version[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  MPI_Get_library_version(mpi_version, &length);
  std::string mpi(mpi_version, static_cast<size_t>(length));
  if (auto nl = mpi.find_first_of("\n,"); nl != std::string::npos) mpi.resize(nl);
  fmt::print("mpi: {}\n", mpi);
  if (cuda_backend_compiled()) {
    // A machine without the CUDA libraries (or without this build's module) is a normal CPU
    // machine: info says why CUDA is unavailable and succeeds; only a job asking for it fails.
    try {
      for (const auto& v : cuda_library_versions()) fmt::print("cuda: {}\n", v);
      const auto devices = cuda_devices();
      if (devices.empty()) fmt::print("cuda devices: none visible\n");
      for (const auto& d : devices) {
        fmt::print("cuda device {}: {}, {:.1f} GiB, compute capability {}.{}, {} SMs\n", d.index,
                   d.name, d.total_memory_bytes / 1073741824.0, d.compute_major, d.compute_minor,
                   d.multiprocessors);
      }
    } catch (const RunError& e) {
      fmt::print("cuda: unavailable: {}\n", e.what());
    }
  } else {
    fmt::print("cuda: not compiled in (rebuild with nvcc on PATH for the CUDA backend)\n");
  }
  if (measure_peak) {
    const int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    fmt::print("sgemm_peak_gflops: {:.1f}\n", measure_sgemm_peak_flops(threads) / 1e9);
    constexpr double kSustainedSeconds = 3.0;
    fmt::print("sgemm_sustained_gflops: {:.1f}\n",
               measure_sgemm_sustained_flops(threads, kSustainedSeconds) / 1e9);
    if (!bf16.empty()) {
      fmt::print("bf16_peak_gflops: {:.1f}\n", measure_bf16_peak_flops(threads) / 1e9);
    }
  }
  return status;
}

}  // namespace sg
