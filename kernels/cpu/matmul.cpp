// Linear layer on the CPU through sgemm. See kernels/matmul.h for the contract.
//
// Which library runs a product is chosen by its shape, by a fixed rule (every process makes the
// same choice, so runs stay reproducible), and no product's bits depend on the thread count
// (oneDNN's are cut into bands fixed by the shape, one single-threaded call each):
// - the language-model head's vocabulary-sized products (at least kOnednnMinOutputs outputs and
//   kOnednnMinRows rows) go to oneDNN's sgemm in bands of kOnednnBand output columns (the input
//   gradient, whose inner dimension is the vocabulary, in bands of kOnednnRowBand rows).
//   Measured inside the GPT bench's training step (2 AVX2 cores, 1024 rows, 384 wide, 50257
//   outputs; docs/performance.md): all matmul forwards 5.5-5.7 s instead of 6.0-6.5 s per 10
//   steps, backwards 9.3-10.0 instead of 9.9-10.8.
// - the other products' gradients with at least 2 x kOnednnRowBand rows (a transformer layer's,
//   at a training batch) go to oneDNN's sgemm too: the input gradient in bands of
//   kOnednnRowBand rows, the weight gradient in bands of kLayerWeightBand output columns. On the
//   AMD EPYC (Zen 4, AVX-512) of 2026-12-03 the GPT bench's layer backwards took 12 % less time
//   than on threaded OpenBLAS (the forwards in the same row bands were level, so they stay);
//   on the Intel Xeon (Emerald Rapids) of 2026-12-02 such bands had been level with OpenBLAS
//   (docs/performance.md).
// - the rest (forwards; few rows: sampling, small batches) to threaded OpenBLAS, which never
//   splits the inner dimension, so its bits do not depend on the thread count either.
#include "kernels/matmul.h"

#include <algorithm>

#include <cblas.h>
#include <omp.h>

#include "kernels/cpu/onednn_gemm.h"

namespace sg::cpu::inline SG_CPU_ISA {
namespace {

constexpr int kOnednnMinOutputs = 16384;
constexpr int kOnednnMinRows = 64;

bool onednn_product(int N, int OC) { return OC >= kOnednnMinOutputs && N >= kOnednnMinRows; }

// oneDNN's own threading makes its results depend on the thread count (the head-shape test
// caught 2 and 3 threads differing from 1 in the last bits), and the project promises the same
// bits for any thread count. So the product is cut into bands of kOnednnBand output columns,
// fixed by the shape, and each band is one call on one thread (oneDNN runs single-threaded
// inside an OpenMP region). The input gradient, whose inner dimension is the vocabulary, is cut
// into bands of kOnednnRowBand rows instead (its inner dimension stays whole). Standalone at the
// GPT bench's head (1024 rows, 384 wide, 50257 outputs, 2 threads), three alternated runs: 194,
// 180, 162 ms against 251, 209, 240 for OpenBLAS's threaded call (bands of 128 rows: 238, 182,
// 163; docs/performance.md).
constexpr int kOnednnBand = 1024;
constexpr int kOnednnRowBand = 256;
// A layer's weight gradient (384-1536 outputs at the bench): bands of 64 columns leave work for
// several threads. Bands of 32, 128 and 192 were level in the step.
constexpr int kLayerWeightBand = 64;

// The head's gradients, and those of any product with rows enough for two bands, go to oneDNN
// (see the file comment).
bool onednn_gradients(int N, int OC) { return onednn_product(N, OC) || N >= 2 * kOnednnRowBand; }

// band(i0, width) -> the oneDNN status of the call for [i0, i0 + width) of total (columns or
// rows); throws after the parallel region (an exception must not leave it) if any call failed.
template <class F>
void onednn_bands(int total, int width, F band) {
  const int bands = (total + width - 1) / width;
  int failed = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(max : failed)
  for (int b = 0; b < bands; ++b) {
    const int i0 = b * width;
    const int status = band(i0, std::min(width, total - i0));
    if (status != 0) failed = std::max(failed, status);
  }
  if (failed != 0) throw_onednn_sgemm_error(failed);
}

}  // namespace

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
  if (onednn_product(N, OC)) {
    // Fixed bands of output columns, one single-threaded oneDNN call each (see onednn_bands).
    onednn_bands(OC, kOnednnBand, [&](int o0, int width) {
      return onednn_sgemm('N', 'T', N, width, C, 1.0f, inp, C,
                          weight + static_cast<long>(o0) * C, C, beta, out + o0, OC);
    });
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, weight, C, beta,
              out, OC);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int N, int C, int OC) {
  if (dinp != nullptr) {
    // dinp (N,C) = dout (N,OC) @ weight (OC,C). Its inner dimension is OC, which neither path
    // splits between threads: oneDNN's calls take whole rows, OpenBLAS splits rows and columns.
    if (onednn_gradients(N, OC)) {
      onednn_bands(N, kOnednnRowBand, [&](int i0, int rows) {
        return onednn_sgemm('N', 'N', rows, C, OC, 1.0f, dout + static_cast<long>(i0) * OC, OC,
                            weight, C, 0.0f, dinp + static_cast<long>(i0) * C, C);
      });
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, weight, C,
                  0.0f, dinp, C);
    }
  }
  // dweight (OC,C) += dout^T (OC,N) @ inp (N,C)
  if (onednn_gradients(N, OC)) {
    const int band = onednn_product(N, OC) ? kOnednnBand : kLayerWeightBand;
    onednn_bands(OC, band, [&](int o0, int width) {
      return onednn_sgemm('T', 'N', width, C, N, 1.0f, dout + o0, OC, inp, C, 1.0f,
                          dweight + static_cast<long>(o0) * C, C);
    });
  } else {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f,
                dweight, C);
  }
  if (dbias != nullptr) matmul_bias_backward(dbias, dout, N, OC);
}

void matmul_bias_backward(float* dbias, const float* dout, int N, int OC) {
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

}  // namespace sg::cpu::SG_CPU_ISA
