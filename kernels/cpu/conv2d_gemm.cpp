// 1x1 convolutions as matrix products. See kernels/conv2d.h for the contract.
//
// On NHWC activations a 1x1, pad-0 convolution is one product: with the M = N*P*Q output pixels
// as rows and the (K, C) weight as it is stored,
//   out (M, K)  = x (M, C) W^T        forward
//   dx  (M, C)  = dout (M, K) W       input gradient
//   dW  (K, C) += dout^T x            weight gradient (inner dimension M)
// With stride > 1, x is the input subsampled at the output pixels: gathered into scratch for the
// forward and the weight gradient, and the input gradient is the product scattered back (zero
// at the pixels no output reads).
//
// The products run on oneDNN's sgemm with its own OpenMP threading, or where it measured ahead on
// oneDNN's matmul primitive (see matmul_forward_fits below). Inside the ResNet-50 step
// (batch 8, 2 AVX-512 cores) they took the stride-1 1x1 layers' forward, input gradient and
// weight gradient in 95, 84 and 91 % of the time of oneDNN 2.6's jit_1x1 convolution, about 5 %
// of the step; alone, with hot caches, the two are level within the machine's noise
// (docs/performance.md).
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/conv2d.h"
#include "kernels/cpu/onednn_gemm.h"
#include "kernels/cpu/scratch.h"

namespace sg::cpu {
namespace {

void check(int status) {
  if (status != 0) throw_onednn_sgemm_error(status);
}

// Scratch for the subsampled input (or its gradient), shared by every shape: the ops run one at a
// time. It grows to the largest size seen.
float* scratch(size_t floats) {
  static std::vector<float> area;
  return detail::grown(area, floats);
}

const float* product_rows(const float* x, const Conv2dShape& s) {
  return conv2d_1x1_rows(x, s).f32();
}

// Which passes take oneDNN's matmul primitive instead of its sgemm: where it ran ahead in three of
// three alternated runs of ResNet-50's 1x1 passes at batch 8 (2 AVX-512 cores, hot caches;
// docs/performance.md), as a rule of the shape: the forward of a reducing layer (C > K: 0.75-0.97
// of sgemm's time on all seven such shapes), and the weight gradient of a widening layer with at
// most 2048 rows (the 14x14 ones: 0.76-0.88). Elsewhere it was level or behind (up to 1.2x).
bool matmul_forward_fits(const Conv2dShape& s) { return s.C > s.K; }
bool matmul_weights_fits(const Conv2dShape& s, long M) { return s.K >= 2 * s.C && M <= 2048; }

}  // namespace

ConstAct conv2d_1x1_rows(ConstAct x, const Conv2dShape& s) {
  if (s.stride == 1) return x;
  static std::vector<char> area;  // its own: the products' scratch may hold their result
  const size_t row = dtype_size(x.dtype) * static_cast<size_t>(s.C);
  const int P = s.P(), Q = s.Q();
  const size_t bytes = row * static_cast<size_t>(s.N) * P * Q;
  if (area.size() < bytes) area.resize(bytes);
  const char* from = static_cast<const char*>(x.data);
  char* to = area.data();
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < s.N; ++n) {
    for (int p = 0; p < P; ++p) {
      for (int q = 0; q < Q; ++q) {
        const long in = (static_cast<long>(n) * s.H + p * s.stride) * s.W + q * s.stride;
        const long out = (static_cast<long>(n) * P + p) * Q + q;
        std::memcpy(to + out * row, from + in * row, row);
      }
    }
  }
  return {area.data(), x.dtype};
}

void conv2d_1x1_scatter(float* dinp, const float* rows, const Conv2dShape& s) {
  // Every input pixel once: its output pixel's row of the product, or zero where none reads it.
  const int P = s.P(), Q = s.Q();
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < s.N; ++n) {
    for (int h = 0; h < s.H; ++h) {
      const int p = h / s.stride;
      for (int w = 0; w < s.W; ++w) {
        const int q = w / s.stride;
        float* to = dinp + ((static_cast<long>(n) * s.H + h) * s.W + w) * s.C;
        if (h % s.stride == 0 && w % s.stride == 0 && p < P && q < Q) {
          const float* from = rows + ((static_cast<long>(n) * P + p) * Q + q) * s.C;
          std::copy(from, from + s.C, to);
        } else {
          std::fill(to, to + s.C, 0.0f);
        }
      }
    }
  }
}

bool conv2d_1x1_fits(const Conv2dShape& s) {
  return s.R == 1 && s.S == 1 && s.pad == 0 && s.groups == 1;
}

void conv2d_1x1_forward(float* out, const float* inp, const float* weight, const Conv2dShape& s) {
  const long M = s.out_size() / s.K;
  if (matmul_forward_fits(s)) {
    onednn_matmul('N', 'T', M, s.K, s.C, product_rows(inp, s), s.C, weight, s.C, 0.0f, out, s.K);
    return;
  }
  check(onednn_sgemm('N', 'T', M, s.K, s.C, 1.0f, product_rows(inp, s), s.C, weight, s.C, 0.0f, out,
                     s.K));
}

void conv2d_1x1_backward_data(float* dinp, const float* dout, const float* weight,
                              const Conv2dShape& s) {
  const long M = s.out_size() / s.K;
  if (s.stride == 1) {
    check(onednn_sgemm('N', 'N', M, s.C, s.K, 1.0f, dout, s.K, weight, s.C, 0.0f, dinp, s.C));
    return;
  }
  float* sub = scratch(static_cast<size_t>(M) * s.C);
  check(onednn_sgemm('N', 'N', M, s.C, s.K, 1.0f, dout, s.K, weight, s.C, 0.0f, sub, s.C));
  conv2d_1x1_scatter(dinp, sub, s);
}

void conv2d_1x1_backward_weights(float* dweight, const float* dout, const float* inp,
                                 const Conv2dShape& s) {
  const long M = s.out_size() / s.K;
  if (matmul_weights_fits(s, M)) {
    onednn_matmul('T', 'N', s.K, s.C, M, dout, s.K, product_rows(inp, s), s.C, 1.0f, dweight, s.C);
    return;
  }
  check(onednn_sgemm('T', 'N', s.K, s.C, M, 1.0f, dout, s.K, product_rows(inp, s), s.C, 1.0f,
                     dweight, s.C));
}

}  // namespace sg::cpu
