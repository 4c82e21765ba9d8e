#pragma once
// Calling sgemm from inside an OpenMP parallel region. The OpenMP build of OpenBLAS
// (libopenblas0-openmp) notices the enclosing region and runs single-threaded, which is what the
// per-(batch, head) loops of attention want. The pthread build would instead hand each call to
// its own thread pool, from every OpenMP thread at once: on 2 cores that measured ~15x slower.
// This guard makes the pthread build single-threaded for the scope of such a loop and restores
// its thread count afterwards; with the OpenMP or serial builds it does nothing.
// Private to kernels/cpu/. Not thread-safe: construct it outside the parallel region.
#include <cblas.h>

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA::detail {

class SerialBlasScope {
 public:
  SerialBlasScope() : active_(openblas_get_parallel() == 1) {  // 1: pthreads build
    if (active_) {
      saved_threads_ = openblas_get_num_threads();
      openblas_set_num_threads(1);
    }
  }
  ~SerialBlasScope() {
    if (active_) openblas_set_num_threads(saved_threads_);
  }
  SerialBlasScope(const SerialBlasScope&) = delete;
  SerialBlasScope& operator=(const SerialBlasScope&) = delete;

 private:
  bool active_;
  int saved_threads_ = 1;
};

}  // namespace sg::cpu::SG_CPU_ISA::detail
