// Linear layer on the CPU through OpenBLAS sgemm. See kernels/matmul.h for the contract.
#include "kernels/matmul.h"

#include <algorithm>

#include <cblas.h>
#include <omp.h>

namespace sg::cpu::inline SG_CPU_ISA {

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias, int N,
                    int C, int OC) {
  // With a bias, out starts as the broadcast bias and sgemm accumulates onto it (beta = 1),
  // which saves a second pass over out.
  float beta = 0.0f;
  if (bias != nullptr) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; ++n) std::copy(bias, bias + OC, out + static_cast<long>(n) * OC);
    beta = 1.0f;
  }
  // out (N,OC) = inp (N,C) @ weight^T (C,OC)
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C, beta,
              out, OC);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int N, int C, int OC) {
  if (dinp != nullptr) {
    // dinp (N,C) += dout (N,OC) @ weight (OC,C)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C,
                1.0f, dinp, C);
  }
  // dweight (OC,C) += dout^T (OC,N) @ inp (N,C)
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f,
              dweight, C);
  if (dbias != nullptr) {
    // Column sums of dout: each thread owns a band of columns and walks all rows in order, so
    // the inner loop is a contiguous vector add and the order is independent of the threads.
#pragma omp parallel
    {
      const int nthreads = omp_get_num_threads();
      const int tid = omp_get_thread_num();
      const int band = ((OC + nthreads - 1) / nthreads + 15) / 16 * 16;  // whole cache lines
      const int o0 = std::min(OC, tid * band);
      const int o1 = std::min(OC, o0 + band);
      for (int n = 0; n < N; ++n) {
        const float* dout_n = dout + static_cast<long>(n) * OC;  // (OC)
#pragma omp simd
        for (int o = o0; o < o1; ++o) dbias[o] += dout_n[o];
      }
    }
  }
}

}  // namespace sg::cpu::SG_CPU_ISA
