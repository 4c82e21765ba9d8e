#pragma once
// OpenBLAS picks its kernels by CPU model when the library loads. Debian's 0.3.21 does not know
// recent Xeons (e.g. Emerald Rapids, model 0xCF) and falls back to its generic "Prescott" SSE3
// kernels: SGEMM runs 5-6x slower than with its AVX-512 kernels (measured 23 vs 135 GFLOP/s on
// 2 cores). The choice can only be made through OPENBLAS_CORETYPE before the library loads, so
// when the detected core is a fallback but the CPU has AVX-512 (or AVX2 + FMA), the process
// re-executes itself once with OPENBLAS_CORETYPE set. A user's own OPENBLAS_CORETYPE always wins.
//
// The same re-execution sets OMP_WAIT_POLICY=passive unless the user set it or GOMP_SPINCOUNT:
// OpenMP's worker threads otherwise spin after every parallel region while OpenBLAS's own
// pthread pool, other ranks or other jobs need the same cores, and on a busy 2-core machine a
// training step ran 2-20x slower (measured: quickstart shape 980 vs 65 ms, benchmark shape 5.1
// vs 2.5 s at load average 4-6). Even a short spin (GOMP_SPINCOUNT=10000), which made a
// ResNet-50 step alone ~6 % faster, made a ResNet test 3x slower beside one other job
// (docs/performance.md, ResNet, ninth session), so passive stays the default.
//
// And OPENBLAS_THREAD_TIMEOUT=16 (2^16 cycles, ~25 us): after each call OpenBLAS's own workers
// otherwise spin for 2^28 cycles (~0.1 s), through the OpenMP kernels that follow, which then
// share their cores with a spinning thread. On the GPT benchmark shape (2 cores) every OpenMP op
// ran 30-50 % faster with it (attention backward 0.78 -> 0.50 s, cross-entropy 0.55 -> 0.40 s,
// GELU 0.17 -> 0.11 s over 10 steps) and the products no slower.

namespace sg {

// The OPENBLAS_CORETYPE this CPU should use, or nullptr when OpenBLAS's own choice is right.
const char* preferred_openblas_core();

// Call first thing in main(): re-executes the program (at most once) with OPENBLAS_CORETYPE,
// OMP_WAIT_POLICY and OPENBLAS_THREAD_TIMEOUT set where they are unset and should be, or when
// `reexec_anyway` (the caller needs a fresh image for a reason of its own: stop_signal.h);
// otherwise returns.
void reexec_with_best_blas_core(char** argv, bool reexec_anyway = false);

}  // namespace sg
