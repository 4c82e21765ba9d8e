#pragma once
// The CPU's practical peak: the FLOP/s OpenBLAS sgemm reaches on large square matrices.
// The denominator of MFU on the CPU backend (devices.peak_tflops = 0) and of the benchmark.

namespace sg {

// Times cblas_sgemm (C = A B, n x n, n = 1536) with OpenBLAS set to `threads` threads and
// returns the best rate seen, in FLOP/s (2 n^3 per call), within about half a second.
// Leaves OpenBLAS at `threads` threads. threads <= 0 means OpenBLAS's own default.
// The rate is that of the kernels OpenBLAS chose when it loaded: OpenBLAS 0.3.21 does not know
// Sapphire/Emerald Rapids and falls back to SSE3 "Prescott" kernels (~30 instead of ~150
// GFLOP/s a core) unless OPENBLAS_CORETYPE=SkylakeX is set before the process starts.
double measure_sgemm_peak_flops(int threads);

// The same for the CPU backend's bf16 products (train.precision: bf16; kernels/matmul_bf16.h):
// the best rate of a 1536^3 product on `threads` OpenMP threads, rounding its operands to bf16
// included. The denominator of a bf16 run's MFU. A RunError where the CPU has no bf16 products.
double measure_bf16_peak_flops(int threads);

// The same call repeated back to back for `seconds` (after one untimed call): the median rate, in
// FLOP/s. A training run is a sustained load; on the 2-core VMs of docs/performance.md the best
// call of a short burst reads up to 1.2x this (a 20 s run: best 317, median 255 GFLOP/s, the
// fast calls all in its first seconds). Reported beside the peak; MFU keeps the peak.
double measure_sgemm_sustained_flops(int threads, double seconds);

}  // namespace sg
