#pragma once
// The CPU's practical peak: the FLOP/s OpenBLAS sgemm reaches on large square matrices.
// The denominator of MFU on the CPU backend (devices.peak_tflops = 0) and of the benchmark.

namespace sg {

// Times cblas_sgemm (C = A B, n x n, n = 1536) with OpenBLAS set to `threads` threads and
// returns the best rate seen, in FLOP/s (2 n^3 per call), within about half a second.
// Leaves OpenBLAS at `threads` threads. threads <= 0 means OpenBLAS's own default.
double measure_sgemm_peak_flops(int threads);

}  // namespace sg
