// Token + position embedding on the CPU. See kernels/encoder.h for the contract.
#include "kernels/encoder.h"

#include <algorithm>
#include <climits>

#include <omp.h>

namespace sg::cpu::inline SG_CPU_ISA {

void encoder_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B,
                     int T, int C) {
#pragma omp parallel for schedule(static)
  for (long bt = 0; bt < static_cast<long>(B) * T; ++bt) {
    const int t = static_cast<int>(bt % T);
    float* out_bt = out + bt * C;                                  // (C)
    const float* wte_ix = wte + static_cast<long>(inp[bt]) * C;    // (C)
    const float* wpe_t = wpe + static_cast<long>(t) * C;           // (C)
    for (int c = 0; c < C; ++c) out_bt[c] = wte_ix[c] + wpe_t[c];
  }
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B,
                      int T, int C) {
  encoder_backward_vocab_range(dwte, dwpe, dout, inp, B, T, C, 0, INT_MAX);
}

void embedding_forward_vocab_range(float* out, const int32_t* inp, const float* wte_local, int N,
                                   int C, int v0, int Vl) {
#pragma omp parallel for schedule(static)
  for (long n = 0; n < N; ++n) {
    float* out_n = out + n * C;  // (C)
    const long row = static_cast<long>(inp[n]) - v0;
    if (row >= 0 && row < Vl) {
      const float* wte_row = wte_local + row * C;  // (C)
      for (int c = 0; c < C; ++c) out_n[c] = wte_row[c];
    } else {
      for (int c = 0; c < C; ++c) out_n[c] = 0.0f;
    }
  }
}

void position_add(float* out, const float* wpe, int B, int T, int C) {
#pragma omp parallel for schedule(static)
  for (long bt = 0; bt < static_cast<long>(B) * T; ++bt) {
    float* out_bt = out + bt * C;                              // (C)
    const float* wpe_t = wpe + static_cast<long>(bt % T) * C;  // (C)
    for (int c = 0; c < C; ++c) out_bt[c] += wpe_t[c];
  }
}

void encoder_backward_vocab_range(float* dwte_local, float* dwpe, const float* dout,
                                  const int32_t* inp, int B, int T, int C, int v0, int Vl) {
  // Several positions may hit the same token row, so rows cannot be split between threads.
  // Instead each thread owns a slice of the channels and walks every (b,t) in order: no races,
  // and each element is summed in the same order whatever the thread count.
#pragma omp parallel
  {
    const int nthreads = omp_get_num_threads();
    const int tid = omp_get_thread_num();
    // Slices a multiple of 16 floats wide so that threads never share a cache line of a row.
    const int chunk = ((C + nthreads - 1) / nthreads + 15) / 16 * 16;
    const int c0 = std::min(C, tid * chunk);
    const int c1 = std::min(C, c0 + chunk);
    for (int b = 0; b < B; ++b) {
      for (int t = 0; t < T; ++t) {
        const long bt = static_cast<long>(b) * T + t;
        const float* dout_bt = dout + bt * C;                       // (C)
        const long row = static_cast<long>(inp[bt]) - v0;
        if (dwpe == nullptr) {  // no position table (Llama)
          if (row < 0 || row >= Vl) continue;
          float* dwte_row = dwte_local + row * C;                   // (C)
          for (int c = c0; c < c1; ++c) dwte_row[c] += dout_bt[c];
          continue;
        }
        float* dwpe_t = dwpe + static_cast<long>(t) * C;            // (C)
        if (row >= 0 && row < Vl) {
          float* dwte_row = dwte_local + row * C;                   // (C)
          for (int c = c0; c < c1; ++c) {
            dwte_row[c] += dout_bt[c];
            dwpe_t[c] += dout_bt[c];
          }
        } else {
          for (int c = c0; c < c1; ++c) dwpe_t[c] += dout_bt[c];
        }
      }
    }
  }
}

}  // namespace sg::cpu::SG_CPU_ISA
