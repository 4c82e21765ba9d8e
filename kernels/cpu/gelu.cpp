// GELU (tanh approximation) on the CPU. See kernels/gelu.h for the contract.
//
// 0.5 (1 + tanh(u)) is rewritten as the logistic sigmoid(2u) = 1 / (1 + exp(-2u)), which keeps
// full relative accuracy in the negative tail where 1 + tanh(u) would cancel, and needs only exp,
// for which fast_exp.h has a version that vectorises. -2u is computed in double and passed to exp
// as a float pair: in the tail (x < -3, |2u| > 8) rounding it to one float would alone cost
// ~|2u| ulps of relative error in gelu.
#include "kernels/gelu.h"

#include "kernels/cpu/bf16.h"
#include "kernels/cpu/fast_exp.h"

namespace sg::cpu::inline SG_CPU_ISA {
namespace {

constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kCubic = 0.044715;
constexpr float kCubicFloat = 0.044715f;

// exp(-2u(x)) to float accuracy, u(x) = sqrt(2/pi) (x + 0.044715 x^3).
inline float exp_minus_2u(float x) {
  const double xd = x;
  const double t = -2.0 * kSqrt2OverPi * (xd + kCubic * xd * xd * xd);
  const float t_hi = static_cast<float>(t);
  const float t_lo = static_cast<float>(t - static_cast<double>(t_hi));
  return detail::exp_vectorisable(t_hi, t_lo);
}

// T: float, or uint16_t for bf16 storage (loaded exactly, the fp32 result rounded).
template <class T>
void gelu_forward_as(T* out, const T* inp, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) {
    const float x = detail::load(inp + i);
    detail::store(out + i, x / (1.0f + exp_minus_2u(x)));
  }
}

template <class T>
void gelu_backward_as(T* dinp, const T* inp, const T* dout, long n) {
  // d/dx [x s(2u)] = s + x * 2 s (1 - s) du/dx, with 1 - s = e s where e = exp(-2u).
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) {
    const float x = detail::load(inp + i);
    const float e = exp_minus_2u(x);
    const float s = 1.0f / (1.0f + e);
    const float du_dx = static_cast<float>(kSqrt2OverPi) * (1.0f + 3.0f * kCubicFloat * x * x);
    const float grad = s + 2.0f * x * s * (e * s) * du_dx;
    detail::store(dinp + i, grad * detail::load(dout + i));
  }
}

}  // namespace

void gelu_forward(float* out, const float* inp, long n) { gelu_forward_as(out, inp, n); }
void gelu_backward(float* dinp, const float* inp, const float* dout, long n) {
  gelu_backward_as(dinp, inp, dout, n);
}
void gelu_forward_bf16(uint16_t* out, const uint16_t* inp, long n) {
  gelu_forward_as(out, inp, n);
}
void gelu_backward_bf16(uint16_t* dinp, const uint16_t* inp, const uint16_t* dout, long n) {
  gelu_backward_as(dinp, inp, dout, n);
}

}  // namespace sg::cpu::SG_CPU_ISA
