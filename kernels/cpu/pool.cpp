// Pooling on the CPU: the max-pool reference, global average pooling and the NCHW -> NHWC
// change. See kernels/pool.h. The max pool the backend runs goes through oneDNN (pool_dnnl.cpp).
#include <limits>

#include "kernels/pool.h"

namespace sg::cpu::inline SG_CPU_ISA {

void maxpool_forward_reference(float* out, int32_t* argmax, const float* inp,
                               const Pool2dShape& s) {
  const int P = s.P(), Q = s.Q();
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < s.N; ++n) {
    for (int p = 0; p < P; ++p) {
      for (int q = 0; q < Q; ++q) {
        for (int c = 0; c < s.C; ++c) {
          float best = -std::numeric_limits<float>::infinity();
          int32_t where = -1;
          for (int r = 0; r < s.R; ++r) {
            const int h = p * s.stride - s.pad + r;
            if (h < 0 || h >= s.H) continue;
            for (int t = 0; t < s.S; ++t) {
              const int w = q * s.stride - s.pad + t;
              if (w < 0 || w >= s.W) continue;
              const float v = inp[((static_cast<long>(n) * s.H + h) * s.W + w) * s.C + c];
              if (where < 0 || v > best) best = v, where = h * s.W + w;  // first max wins
            }
          }
          const long o = ((static_cast<long>(n) * P + p) * Q + q) * s.C + c;
          out[o] = best;
          argmax[o] = where;
        }
      }
    }
  }
}

void maxpool_backward_reference(float* dinp, const float* dout, const int32_t* argmax,
                                const Pool2dShape& s) {
  const int P = s.P(), Q = s.Q();
  const long plane = static_cast<long>(s.H) * s.W * s.C;
#pragma omp parallel for schedule(static)
  for (int n = 0; n < s.N; ++n) {
    float* d = dinp + n * plane;
    for (long i = 0; i < plane; ++i) d[i] = 0.0f;
    for (long pq = 0; pq < static_cast<long>(P) * Q; ++pq) {
      for (int c = 0; c < s.C; ++c) {
        const long o = (n * static_cast<long>(P) * Q + pq) * s.C + c;
        d[static_cast<long>(argmax[o]) * s.C + c] += dout[o];
      }
    }
  }
}

void global_avgpool_forward(float* out, const float* inp, int N, int HW, int C) {
  const float scale = 1.0f / static_cast<float>(HW);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    float* o = out + static_cast<long>(n) * C;
    for (int c = 0; c < C; ++c) o[c] = 0.0f;
    for (int i = 0; i < HW; ++i) {
      const float* x = inp + (static_cast<long>(n) * HW + i) * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) o[c] += x[c];
    }
#pragma omp simd
    for (int c = 0; c < C; ++c) o[c] *= scale;
  }
}

void global_avgpool_backward(float* dinp, const float* dout, int N, int HW, int C) {
  const float scale = 1.0f / static_cast<float>(HW);
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < N; ++n) {
    for (int i = 0; i < HW; ++i) {
      const float* g = dout + static_cast<long>(n) * C;
      float* d = dinp + (static_cast<long>(n) * HW + i) * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) d[c] = g[c] * scale;
    }
  }
}

void nchw_to_nhwc(float* out, const float* inp, int N, int C, int HW) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < N; ++n) {
    for (int i = 0; i < HW; ++i) {
      for (int c = 0; c < C; ++c) {
        out[(static_cast<long>(n) * HW + i) * C + c] = inp[(static_cast<long>(n) * C + c) * HW + i];
      }
    }
  }
}

}  // namespace sg::cpu::SG_CPU_ISA
