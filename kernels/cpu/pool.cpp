// Pooling on the CPU: max pooling and its reference, global average pooling and the NCHW -> NHWC
// change. See kernels/pool.h.
#include <algorithm>
#include <limits>

#include "kernels/pool.h"

#include "kernels/cpu/bf16.h"

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

// The reference's results bit for bit, a pixel's C channels at a time: the same window order and
// first-max rule forward (argmax the input's h*W + w), and backward each input pixel's gradient
// summed from the windows that hold it in the reference's order (p, then q), so dinp is written
// once, without the reference's zeroing pass and scattered adds. ResNet-50's pool at batch 8
// (112x112x64, 2 AVX-512 cores), inside the step: forward 4.4-5.1 -> 3.8-4.4 ms, backward
// 5.3-6.1 -> 3.1-3.5 ms against oneDNN 2.6's (docs/performance.md).
namespace {

// T: float, or uint16_t for bf16 activations (the max of exact values: exact in either).
template <class T>
void maxpool_forward_as(T* out, int32_t* argmax, const T* inp, const Pool2dShape& s) {
  const int P = s.P(), Q = s.Q(), C = s.C;
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < s.N; ++n) {
    for (int p = 0; p < P; ++p) {
      const int h_first = std::max(0, p * s.stride - s.pad);
      const int h_end = std::min(s.H, p * s.stride - s.pad + s.R);
      for (int q = 0; q < Q; ++q) {
        const int w_first = std::max(0, q * s.stride - s.pad);
        const int w_end = std::min(s.W, q * s.stride - s.pad + s.S);
        const long o = ((static_cast<long>(n) * P + p) * Q + q) * C;
        T* best = out + o;
        int32_t* where = argmax + o;
        if (h_first >= h_end || w_first >= w_end) {  // a window all padding (as the reference)
          for (int c = 0; c < C; ++c) detail::store(best + c, -std::numeric_limits<float>::infinity());
          std::fill(where, where + C, -1);
          continue;
        }
        for (int h = h_first; h < h_end; ++h) {
          for (int w = w_first; w < w_end; ++w) {
            const T* x = inp + ((static_cast<long>(n) * s.H + h) * s.W + w) * C;
            const int32_t at = h * s.W + w;
            if (h == h_first && w == w_first) {
#pragma omp simd
              for (int c = 0; c < C; ++c) best[c] = x[c], where[c] = at;
              continue;
            }
#pragma omp simd
            for (int c = 0; c < C; ++c) {
              const bool more = detail::load(x + c) > detail::load(best + c);
              best[c] = more ? x[c] : best[c];
              where[c] = more ? at : where[c];
            }
          }
        }
      }
    }
  }
}

}  // namespace

void maxpool_forward(float* out, int32_t* argmax, const float* inp, const Pool2dShape& s) {
  maxpool_forward_as(out, argmax, inp, s);
}
void maxpool_forward_bf16(uint16_t* out, int32_t* argmax, const uint16_t* inp,
                          const Pool2dShape& s) {
  maxpool_forward_as(out, argmax, inp, s);
}

void maxpool_backward(float* dinp, const float* dout, const int32_t* argmax, const Pool2dShape& s) {
  const int P = s.P(), Q = s.Q(), C = s.C;
  // The windows p that hold row h: p * stride - pad <= h < p * stride - pad + R.
  const auto first_window = [](int h, int pad, int R, int stride) {
    return std::max(0, (h + pad - R + stride) / stride);  // ceil((h + pad - R + 1) / stride)
  };
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < s.N; ++n) {
    for (int h = 0; h < s.H; ++h) {
      const int p_first = first_window(h, s.pad, s.R, s.stride);
      const int p_end = std::min(P, (h + s.pad) / s.stride + 1);
      for (int w = 0; w < s.W; ++w) {
        const int q_first = first_window(w, s.pad, s.S, s.stride);
        const int q_end = std::min(Q, (w + s.pad) / s.stride + 1);
        const int32_t at = h * s.W + w;
        float* d = dinp + ((static_cast<long>(n) * s.H + h) * s.W + w) * C;
#pragma omp simd
        for (int c = 0; c < C; ++c) d[c] = 0.0f;
        for (int p = p_first; p < p_end; ++p) {
          for (int q = q_first; q < q_end; ++q) {
            const long o = ((static_cast<long>(n) * P + p) * Q + q) * C;
            const float* g = dout + o;
            const int32_t* a = argmax + o;
#pragma omp simd
            for (int c = 0; c < C; ++c) d[c] += a[c] == at ? g[c] : 0.0f;
          }
        }
      }
    }
  }
}

namespace {

template <class T>
void global_avgpool_forward_as(float* out, const T* inp, int N, int HW, int C) {
  const float scale = 1.0f / static_cast<float>(HW);
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    float* o = out + static_cast<long>(n) * C;
    for (int c = 0; c < C; ++c) o[c] = 0.0f;
    for (int i = 0; i < HW; ++i) {
      const T* x = inp + (static_cast<long>(n) * HW + i) * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) o[c] += detail::load(x + c);
    }
#pragma omp simd
    for (int c = 0; c < C; ++c) o[c] *= scale;
  }
}

template <class T>
void nchw_to_nhwc_as(T* out, const float* inp, int N, int C, int HW) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < N; ++n) {
    for (int i = 0; i < HW; ++i) {
      for (int c = 0; c < C; ++c) {
        detail::store(out + (static_cast<long>(n) * HW + i) * C + c,
                      inp[(static_cast<long>(n) * C + c) * HW + i]);
      }
    }
  }
}

}  // namespace

void global_avgpool_forward(float* out, const float* inp, int N, int HW, int C) {
  global_avgpool_forward_as(out, inp, N, HW, C);
}
void global_avgpool_forward_bf16(float* out, const uint16_t* inp, int N, int HW, int C) {
  global_avgpool_forward_as(out, inp, N, HW, C);
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
  nchw_to_nhwc_as(out, inp, N, C, HW);
}
void nchw_to_nhwc_bf16(uint16_t* out, const float* inp, int N, int C, int HW) {
  nchw_to_nhwc_as(out, inp, N, C, HW);
}

}  // namespace sg::cpu::SG_CPU_ISA
