#pragma once
// Rotary position embeddings and grouped-query attention's key/value sharing, in one pass from
// the fused q/k/v projection to the attention's packed input (kernels/attention.h).
//
// qkv rows (B*T of them) hold [q (NH heads) | k (NKV heads) | v (NKV heads)], HS floats a head;
// the output rows hold [q | k | v] with NH heads each: query head h rotated, key head h the
// rotated key head h / (NH / NKV), value head h value head h / (NH / NKV). The rotation is
// transformers' Llama convention (rotate_half): for i < HS/2, the pair (x[i], x[i + HS/2]) turns
// by the angle pos * inv_freq[i], pos the row's position in its sequence (row % T):
//   out[i] = x[i] cos - x[i+HS/2] sin,  out[i+HS/2] = x[i+HS/2] cos + x[i] sin
// with cos and sin from tables of (T, HS/2) (rope_tables).
#include <cmath>
#include <vector>

#include "kernels/cpu/isa.h"

namespace sg {

// Llama 3's scaling of the rotary frequencies (rope_scaling rope_type "llama3"): wavelengths
// longer than original_context / low_freq_factor are divided by factor, shorter than
// original_context / high_freq_factor kept, those between blended smoothly.
struct RopeScaling {
  double factor = 1;  // 1 = no scaling
  double low_freq_factor = 1;
  double high_freq_factor = 4;
  int original_context = 8192;
};

// inv_freq[i] = theta^(-2i/HS), i < HS/2, scaled as `scaling` says (in double, then rounded:
// transformers computes them in fp32 from an integer arange, which these match to rounding).
inline std::vector<double> rope_inverse_frequencies(int HS, double theta, const RopeScaling& s) {
  std::vector<double> inv(static_cast<size_t>(HS / 2));
  for (int i = 0; i < HS / 2; ++i) {
    double f = 1.0 / std::pow(theta, 2.0 * i / HS);
    if (s.factor != 1) {
      const double wavelength = 2 * M_PI / f;
      const double low_wavelength = s.original_context / s.low_freq_factor;
      const double high_wavelength = s.original_context / s.high_freq_factor;
      if (wavelength > low_wavelength) {
        f /= s.factor;
      } else if (wavelength >= high_wavelength) {
        const double smooth = (s.original_context / wavelength - s.low_freq_factor) /
                              (s.high_freq_factor - s.low_freq_factor);
        f = (1 - smooth) * f / s.factor + smooth * f;
      }
    }
    inv[static_cast<size_t>(i)] = f;
  }
  return inv;
}

// cos and sin (T, HS/2) of pos * inv_freq[i], pos < T, in double then rounded to float.
inline void rope_tables(float* cos_table, float* sin_table, int T, const std::vector<double>& inv) {
  const size_t half = inv.size();
  for (int t = 0; t < T; ++t) {
    for (size_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(t) * static_cast<float>(inv[i]);
      cos_table[t * half + i] = static_cast<float>(std::cos(angle));
      sin_table[t * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

}  // namespace sg

namespace sg::cpu::inline SG_CPU_ISA {

void rope_qkv_forward(float* out,              // (B*T, 3*NH*HS)
                      const float* qkv,        // (B*T, (NH+2*NKV)*HS)
                      const float* cos_table,  // (T, HS/2)
                      const float* sin_table,  // (T, HS/2)
                      int B, int T, int NH, int NKV, int HS);

// The transpose: dqkv written (=); a key or value head's gradient sums its NH/NKV query heads'
// in head order.
void rope_qkv_backward(float* dqkv,             // (B*T, (NH+2*NKV)*HS)
                       const float* dout,       // (B*T, 3*NH*HS)
                       const float* cos_table,  // (T, HS/2)
                       const float* sin_table,  // (T, HS/2)
                       int B, int T, int NH, int NKV, int HS);

}  // namespace sg::cpu::SG_CPU_ISA
