#pragma once
// OpenBLAS picks its kernels by CPU model when the library loads. Debian's 0.3.21 does not know
// recent Xeons (e.g. Emerald Rapids, model 0xCF) and falls back to its generic "Prescott" SSE3
// kernels: SGEMM runs 5-6x slower than with its AVX-512 kernels (measured 23 vs 135 GFLOP/s on
// 2 cores). The choice can only be made through OPENBLAS_CORETYPE before the library loads, so
// when the detected core is a fallback but the CPU has AVX-512 (or AVX2 + FMA), the process
// re-executes itself once with OPENBLAS_CORETYPE set. A user's own OPENBLAS_CORETYPE always wins.

namespace sg {

// The OPENBLAS_CORETYPE this CPU should use, or nullptr when OpenBLAS's own choice is right.
const char* preferred_openblas_core();

// Call first thing in main(): re-executes the program with OPENBLAS_CORETYPE set when
// preferred_openblas_core() says so (at most once); otherwise returns.
void reexec_with_best_blas_core(char** argv);

}  // namespace sg
