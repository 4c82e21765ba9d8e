// The Llama family's own CPU kernels: RMSNorm (kernels/rmsnorm.h), SwiGLU (kernels/swiglu.h) and
// the rotary embedding with grouped-query key/value sharing (kernels/rope.h). Rows are
// independent, so each parallelises over rows; RMSNorm's weight gradient sums over rows column
// by column in row order, so its bits do not depend on the thread count.
#include <cmath>
#include <cstddef>

#include "kernels/cpu/fast_exp.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"

namespace sg::cpu::inline SG_CPU_ISA {

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C,
                     float eps) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; ++n) {
    const float* x = inp + static_cast<size_t>(n) * C;
    float* y = out + static_cast<size_t>(n) * C;
    float sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < C; ++c) sum += x[c] * x[c];
    const float s = 1.0f / std::sqrt(sum / static_cast<float>(C) + eps);
#pragma omp simd
    for (int c = 0; c < C; ++c) y[c] = weight[c] * (x[c] * s);
    rstd[n] = s;
  }
}

void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                      const float* weight, const float* rstd, int N, int C) {
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int n = 0; n < N; ++n) {
      const size_t row = static_cast<size_t>(n) * C;
      const float* x = inp + row;
      const float* g = dout + row;
      float* dx = dinp + row;
      const float s = rstd[n];
      float dot = 0;  // sum of (dout * weight) * xhat
#pragma omp simd reduction(+ : dot)
      for (int c = 0; c < C; ++c) dot += g[c] * weight[c] * (x[c] * s);
      const float mean_dot = dot / static_cast<float>(C);
#pragma omp simd
      for (int c = 0; c < C; ++c) {
        const float xhat = x[c] * s;
        dx[c] += s * (g[c] * weight[c] - xhat * mean_dot);
      }
    }
    // The weight gradient by blocks of kColumns columns, reading rows contiguously; each column
    // is summed over the rows in row order by one thread, so its bits do not depend on the
    // thread count.
    constexpr int kColumns = 16;
#pragma omp for schedule(static)
    for (int c0 = 0; c0 < C; c0 += kColumns) {
      const int width = C - c0 < kColumns ? C - c0 : kColumns;
      float sum[kColumns] = {};
      for (int n = 0; n < N; ++n) {
        const size_t row = static_cast<size_t>(n) * C + c0;
        const float s = rstd[n];
#pragma omp simd
        for (int j = 0; j < width; ++j) sum[j] += dout[row + j] * (inp[row + j] * s);
      }
      for (int j = 0; j < width; ++j) dweight[c0 + j] += sum[j];
    }
  }
}

namespace {

// sigmoid(g) = 1 / (1 + exp(-g)); exp's argument clamped where the float result saturates.
inline float sigmoid(float g) {
  const float t = -g > 88.0f ? 88.0f : -g;
  return 1.0f / (1.0f + detail::exp_vectorisable(t));
}

}  // namespace

void swiglu_forward(float* out, const float* inp, long N, int I) {
#pragma omp parallel for schedule(static)
  for (long n = 0; n < N; ++n) {
    const float* gate = inp + static_cast<size_t>(n) * 2 * I;
    const float* up = gate + I;
    float* y = out + static_cast<size_t>(n) * I;
#pragma omp simd
    for (int i = 0; i < I; ++i) y[i] = gate[i] * sigmoid(gate[i]) * up[i];
  }
}

void swiglu_backward(float* dinp, const float* inp, const float* dout, long N, int I) {
#pragma omp parallel for schedule(static)
  for (long n = 0; n < N; ++n) {
    const size_t row = static_cast<size_t>(n) * 2 * I;
    const float* gate = inp + row;
    const float* up = gate + I;
    const float* dy = dout + static_cast<size_t>(n) * I;
    float* dgate = dinp + row;
    float* dup = dgate + I;
#pragma omp simd
    for (int i = 0; i < I; ++i) {
      const float g = gate[i];
      const float s = sigmoid(g);
      dgate[i] = dy[i] * up[i] * s * (1.0f + g * (1.0f - s));
      dup[i] = dy[i] * g * s;
    }
  }
}

namespace {

// out = x turned by (cos, sin) pairwise (kernels/rope.h); `sign` -1 turns back (the transpose).
inline void rotate(float* out, const float* x, const float* cos_row, const float* sin_row,
                   int half, float sign) {
#pragma omp simd
  for (int i = 0; i < half; ++i) {
    const float a = x[i], b = x[i + half];
    const float c = cos_row[i], s = sign * sin_row[i];
    out[i] = a * c - b * s;
    out[i + half] = b * c + a * s;
  }
}

// The sizes both directions use: rows of the fused projection (in) and of the packed attention
// input (out), and where row r's cos and sin start in the tables.
struct RopeShape {
  RopeShape(int T, int NH, int NKV, int HS)
      : T(T), half(HS / 2), group(NH / NKV),
        C(static_cast<size_t>(NH) * HS),
        in_row(static_cast<size_t>(NH + 2 * NKV) * HS),
        out_row(3 * C) {}
  const float* angles(const float* table, long r) const {
    return table + static_cast<size_t>(r % T) * half;
  }
  int T, half, group;
  size_t C, in_row, out_row;
};

}  // namespace

void rope_qkv_forward(float* out, const float* qkv, const float* cos_table,
                      const float* sin_table, int B, int T, int NH, int NKV, int HS) {
  const RopeShape shape(T, NH, NKV, HS);
  const int half = shape.half, group = shape.group;
  const size_t C = shape.C, in_row = shape.in_row, out_row = shape.out_row;
#pragma omp parallel for schedule(static)
  for (long r = 0; r < static_cast<long>(B) * T; ++r) {
    const float* cos_row = shape.angles(cos_table, r);
    const float* sin_row = shape.angles(sin_table, r);
    const float* q = qkv + r * in_row;
    const float* k = q + C;
    const float* v = k + static_cast<size_t>(NKV) * HS;
    float* o = out + r * out_row;
    for (int h = 0; h < NH; ++h) {
      const size_t kv = static_cast<size_t>(h / group) * HS;
      rotate(o + static_cast<size_t>(h) * HS, q + static_cast<size_t>(h) * HS, cos_row, sin_row, half, 1.0f);
      rotate(o + C + static_cast<size_t>(h) * HS, k + kv, cos_row, sin_row, half, 1.0f);
      const float* vh = v + kv;
      float* ov = o + 2 * C + static_cast<size_t>(h) * HS;
#pragma omp simd
      for (int i = 0; i < HS; ++i) ov[i] = vh[i];
    }
  }
}

void rope_qkv_backward(float* dqkv, const float* dout, const float* cos_table,
                       const float* sin_table, int B, int T, int NH, int NKV, int HS) {
  const RopeShape shape(T, NH, NKV, HS);
  const int half = shape.half, group = shape.group;
  const size_t C = shape.C, in_row = shape.in_row, out_row = shape.out_row;
#pragma omp parallel for schedule(static)
  for (long r = 0; r < static_cast<long>(B) * T; ++r) {
    const float* cos_row = shape.angles(cos_table, r);
    const float* sin_row = shape.angles(sin_table, r);
    const float* d = dout + r * out_row;
    float* dq = dqkv + r * in_row;
    float* dk = dq + C;
    float* dv = dk + static_cast<size_t>(NKV) * HS;
    for (int h = 0; h < NH; ++h)
      rotate(dq + static_cast<size_t>(h) * HS, d + static_cast<size_t>(h) * HS, cos_row, sin_row, half, -1.0f);
    // A group's key and value gradients summed in head order, the key sum then turned back (the
    // rotation is linear: the sum of the turned gradients).
    for (int j = 0; j < NKV; ++j) {
      float* dkj = dk + static_cast<size_t>(j) * HS;
      float* dvj = dv + static_cast<size_t>(j) * HS;
      for (int i = 0; i < half; ++i) {
        float ka = 0, kb = 0, va = 0, vb = 0;
        for (int h = j * group; h < (j + 1) * group; ++h) {
          const float* dk_h = d + C + static_cast<size_t>(h) * HS;
          const float* dv_h = d + 2 * C + static_cast<size_t>(h) * HS;
          ka += dk_h[i];
          kb += dk_h[i + half];
          va += dv_h[i];
          vb += dv_h[i + half];
        }
        dkj[i] = ka * cos_row[i] + kb * sin_row[i];
        dkj[i + half] = kb * cos_row[i] - ka * sin_row[i];
        dvj[i] = va;
        dvj[i + half] = vb;
      }
    }
  }
}

}  // namespace sg::cpu::SG_CPU_ISA
