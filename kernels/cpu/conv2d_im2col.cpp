// A strided spatial convolution's weight gradient as one matrix product (im2col). See
// kernels/conv2d.h for the contract.
//
// With the M = N*P*Q output pixels as rows, the input pixels under each output pixel's window
// gathered into one row of (R, S, C) values (zero where the window hangs over the padding),
//   dW' (K, R*S*C) = dout^T (K, M) col (M, R*S*C)
// is the gradient with its inner axes in (r, s, c) order, added into the (K, C, R, S) weights'
// gradient by a transposing pass. oneDNN's direct kernels for these layers (ResNet-50's 3x3
// stride-2 ones at batch 8, NHWC on 2 AVX-512 cores) ran this pass at 83-133 GFLOP/s against
// 150-210 for the other two; the product runs at the library's rate, for a gather that writes
// the col matrix once: 0.54-0.86x the direct pass's time (docs/performance.md). The forward and
// the input gradient stay direct: as products they would also write (or read back) the col
// matrix, 2.25x the input at stride 2, for no better rate.
//
// The col matrix is made whole up to kMaxColFloats (ResNet-50's layers at batch 8 fit: 7.2 M
// floats at most); beyond, in bands of output pixels, each band's product added onto the
// previous ones' (banding measured no slower at batch 8, and it caps the scratch at large
// batches: the 56x56 layer's col matrix at batch 256 would be 0.9 GB).
#include <algorithm>
#include <vector>

#include "kernels/conv2d.h"
#include "kernels/cpu/onednn_gemm.h"
#include "kernels/cpu/scratch.h"

namespace sg::cpu {
namespace {

// The col matrix and the (r, s, c)-ordered gradient, shared by every shape: the ops run one at
// a time. They grow to the largest size seen.
float* col_scratch(size_t floats) {
  static std::vector<float> area;
  return detail::grown(area, floats);
}
float* product_scratch(size_t floats) {
  static std::vector<float> area;
  return detail::grown(area, floats);
}

// col (rows, R*S*C): row m - m0 holds, for output pixel m = (n, p, q), the input at
// (p*stride - pad + r, q*stride - pad + t) for each (r, t), C values each, or zeros outside the
// image.
void gather(float* col, const float* x, const Conv2dShape& s, long m0, long rows) {
  const long P = s.P(), Q = s.Q();
  const long row = static_cast<long>(s.R) * s.S * s.C;
#pragma omp parallel for schedule(static)
  for (long m = m0; m < m0 + rows; ++m) {
    const long n = m / (P * Q), p = m / Q % P, q = m % Q;
    float* to = col + (m - m0) * row;
    for (int r = 0; r < s.R; ++r) {
      const long h = p * s.stride - s.pad + r;
      for (int t = 0; t < s.S; ++t, to += s.C) {
        const long w = q * s.stride - s.pad + t;
        if (h < 0 || h >= s.H || w < 0 || w >= s.W) {
          std::fill(to, to + s.C, 0.0f);
        } else {
          const float* from = x + ((n * s.H + h) * s.W + w) * s.C;
          std::copy(from, from + s.C, to);
        }
      }
    }
  }
}

}  // namespace

bool conv2d_im2col_weights_applies(const Conv2dShape& s) {
  return s.groups == 1 && s.stride > 1 && (s.R > 1 || s.S > 1) && s.C >= 16;
}

void conv2d_im2col_backward_weights(float* dweight, const float* dout, const float* inp,
                                    const Conv2dShape& s, long max_col_floats) {
  const long M = s.out_size() / s.K;
  const long RS = static_cast<long>(s.R) * s.S, row = RS * s.C;
  // Bands of output pixels, fixed by the shape, each band's product accumulated onto the last.
  const long band = std::min(M, std::max(1L, max_col_floats / row));
  float* col = col_scratch(static_cast<size_t>(band * row));
  float* dw = product_scratch(static_cast<size_t>(s.K) * row);
  for (long m0 = 0; m0 < M; m0 += band) {
    const long rows = std::min(band, M - m0);
    gather(col, inp, s, m0, rows);
    const int status = onednn_sgemm('T', 'N', s.K, row, rows, 1.0f, dout + m0 * s.K, s.K, col,
                                    row, m0 == 0 ? 0.0f : 1.0f, dw, row);
    if (status != 0) throw_onednn_sgemm_error(status);
  }
  // dweight (K, C, R, S) += dw (K, R, S, C), each output channel's block transposed.
#pragma omp parallel for schedule(static)
  for (int k = 0; k < s.K; ++k) {
    const float* from = dw + k * row;
    float* to = dweight + k * row;
    for (int c = 0; c < s.C; ++c) {
      for (long rs = 0; rs < RS; ++rs) to[c * RS + rs] += from[rs * s.C + c];
    }
  }
}

}  // namespace sg::cpu
