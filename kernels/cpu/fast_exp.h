#pragma once
// exp(x) written so that GCC vectorises loops that call it: libm's expf does not vectorise
// without -ffast-math, which we do not use. The clamps below are comparisons: on AVX2 GCC
// if-converts them only under -fno-trapping-math (meson.build), else the calling loop stays
// scalar (4x slower; AVX-512's masked operations hide this). Cephes-style range reduction and degree-6
// polynomial, accurate to ~2 ulp; the kernel tests check the callers against float64.
// Private to kernels/cpu/.
#include <bit>
#include <cstdint>

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA::detail {

// Inputs are clamped to [-87, 88], where exp stays a normal float; callers only go there for
// values whose contribution is ~0 (softmax tails, the far negative side of GELU).
inline float exp_vectorisable(float x) {
  // Comparisons, not std::fmin/fmax: those are libm calls (NaN rules) and stop vectorisation.
  x = x < -87.0f ? -87.0f : x;
  x = x > 88.0f ? 88.0f : x;
  // round(x / ln 2) by the 1.5 * 2^23 trick (std::floor would need -fno-trapping-math to
  // vectorise); the integer also sits in the low mantissa bits of the shifted value.
  constexpr float kRound = 12582912.0f;
  const float shifted = x * 1.44269504088896341f + kRound;
  const float n = shifted - kRound;
  const int32_t n_int = std::bit_cast<int32_t>(shifted) - std::bit_cast<int32_t>(kRound);
  // ln 2 split in two so that n * ln2_hi is exact.
  const float r = (x - n * 0.693359375f) - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * std::bit_cast<float>((n_int + 127) << 23);  // p * 2^n
}

// exp(t_hi + t_lo) for an argument carried as a float pair (|t_lo| <= ulp(t_hi) / 2): keeps
// float accuracy where rounding t to one float would already cost |t| ulps of relative error.
// (GCC 12 does not vectorise a clamp on double values mixed with floats, so the range reduction
// stays in float and the low part enters as the first-order factor 1 + t_lo.)
inline float exp_vectorisable(float t_hi, float t_lo) {
  return exp_vectorisable(t_hi) * (1.0f + t_lo);
}

}  // namespace sg::cpu::SG_CPU_ISA::detail
