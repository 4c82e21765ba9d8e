#include "backend/blas_core.h"

#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace sg {
namespace {

// log2 of the cycles OpenBLAS's pthread workers spin after a call before they sleep (its default
// is 28: ~0.1 s). See blas_core.h.
constexpr const char* kOpenblasThreadTimeout = "16";

bool is_vector_core(const std::string& name) {
  for (const char* good : {"SkylakeX", "Cooperlake", "SapphireRapids", "Haswell", "Zen"}) {
    if (name == good) return true;
  }
  return false;
}

}  // namespace

const char* preferred_openblas_core() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return nullptr;
  const std::string current = openblas_get_corename();
  if (is_vector_core(current)) return nullptr;
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

void reexec_with_best_blas_core(char** argv, bool reexec_anyway) {
  if (std::getenv("SINGULARITY_BLAS_REEXEC") != nullptr) {
    // This image is the re-execution: never again, and the processes it starts (a launcher's
    // ranks) decide for themselves.
    unsetenv("SINGULARITY_BLAS_REEXEC");
    return;
  }
  bool changed = reexec_anyway;
  if (const char* core = preferred_openblas_core()) {
    setenv("OPENBLAS_CORETYPE", core, 1);
    changed = true;
  }
  // A user's GOMP_SPINCOUNT alone is a choice too (the passive policy would override it).
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    changed = true;
  }
  if (std::getenv("OPENBLAS_THREAD_TIMEOUT") == nullptr) {
    setenv("OPENBLAS_THREAD_TIMEOUT", kOpenblasThreadTimeout, 1);
    changed = true;
  }
  if (!changed) return;
  setenv("SINGULARITY_BLAS_REEXEC", "1", 1);
  // The file itself rather than /proc/self/exe, so the process keeps its name (ps, pgrep and
  // top show "singularity", not "exe").
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    self[n] = 0;
    execv(self, argv);
  }
  execv("/proc/self/exe", argv);
  // exec failed (no /proc): carry on with the slower kernels rather than fail.
}

}  // namespace sg
