#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "backend/blas_core.h"

// Tests run with the same BLAS kernels as the singularity binary (see backend/blas_core.h).
int main(int argc, char** argv) {
  sg::reexec_with_best_blas_core(argv);
  doctest::Context context(argc, argv);
  return context.run();
}
