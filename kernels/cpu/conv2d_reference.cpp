// The convolution reference: plain loops, sums in double. Slow, and only for tests (and
// checking oneDNN). See kernels/conv2d.h.
#include "kernels/conv2d.h"

namespace sg::cpu {
namespace {

struct Index {
  const Conv2dShape& s;
  long in(int n, int h, int w, int c) const {
    return ((static_cast<long>(n) * s.H + h) * s.W + w) * s.C + c;
  }
  long out(int n, int p, int q, int k) const {
    return ((static_cast<long>(n) * s.P() + p) * s.Q() + q) * s.K + k;
  }
  long weight(int k, int c, int r, int t) const {
    return ((static_cast<long>(k) * (s.C / s.groups) + c) * s.R + r) * s.S + t;
  }
};

}  // namespace

void conv2d_forward_reference(float* out, const float* inp, const float* weight,
                              const Conv2dShape& s) {
  const Index at{s};
  const int Cg = s.C / s.groups, Kg = s.K / s.groups;
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < s.N; ++n) {
    for (int p = 0; p < s.P(); ++p) {
      for (int q = 0; q < s.Q(); ++q) {
        for (int k = 0; k < s.K; ++k) {
          const int c0 = (k / Kg) * Cg;
          double sum = 0;
          for (int r = 0; r < s.R; ++r) {
            const int h = p * s.stride - s.pad + r;
            if (h < 0 || h >= s.H) continue;
            for (int t = 0; t < s.S; ++t) {
              const int w = q * s.stride - s.pad + t;
              if (w < 0 || w >= s.W) continue;
              for (int c = 0; c < Cg; ++c) {
                sum += double{inp[at.in(n, h, w, c0 + c)]} * weight[at.weight(k, c, r, t)];
              }
            }
          }
          out[at.out(n, p, q, k)] = static_cast<float>(sum);
        }
      }
    }
  }
}

void conv2d_backward_data_reference(float* dinp, const float* dout, const float* weight,
                                    const Conv2dShape& s) {
  const Index at{s};
  const int Cg = s.C / s.groups, Kg = s.K / s.groups;
#pragma omp parallel for collapse(2) schedule(static)
  for (int n = 0; n < s.N; ++n) {
    for (int h = 0; h < s.H; ++h) {
      for (int w = 0; w < s.W; ++w) {
        for (int c = 0; c < s.C; ++c) {
          const int g = c / Cg;
          double sum = 0;
          for (int r = 0; r < s.R; ++r) {
            const int ph = h + s.pad - r;  // p * stride
            if (ph < 0 || ph % s.stride != 0 || ph / s.stride >= s.P()) continue;
            for (int t = 0; t < s.S; ++t) {
              const int qw = w + s.pad - t;
              if (qw < 0 || qw % s.stride != 0 || qw / s.stride >= s.Q()) continue;
              for (int k = g * Kg; k < (g + 1) * Kg; ++k) {
                sum += double{dout[at.out(n, ph / s.stride, qw / s.stride, k)]} *
                       weight[at.weight(k, c - g * Cg, r, t)];
              }
            }
          }
          dinp[at.in(n, h, w, c)] = static_cast<float>(sum);
        }
      }
    }
  }
}

void conv2d_backward_weights_reference(float* dweight, const float* dout, const float* inp,
                                       const Conv2dShape& s) {
  const Index at{s};
  const int Cg = s.C / s.groups, Kg = s.K / s.groups;
#pragma omp parallel for collapse(2) schedule(static)
  for (int k = 0; k < s.K; ++k) {
    for (int c = 0; c < Cg; ++c) {
      const int c_in = (k / Kg) * Cg + c;
      for (int r = 0; r < s.R; ++r) {
        for (int t = 0; t < s.S; ++t) {
          double sum = 0;
          for (int n = 0; n < s.N; ++n) {
            for (int p = 0; p < s.P(); ++p) {
              const int h = p * s.stride - s.pad + r;
              if (h < 0 || h >= s.H) continue;
              for (int q = 0; q < s.Q(); ++q) {
                const int w = q * s.stride - s.pad + t;
                if (w < 0 || w >= s.W) continue;
                sum += double{dout[at.out(n, p, q, k)]} * inp[at.in(n, h, w, c_in)];
              }
            }
          }
          dweight[at.weight(k, c, r, t)] += static_cast<float>(sum);
        }
      }
    }
  }
}

}  // namespace sg::cpu
