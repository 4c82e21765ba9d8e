// ReLU on the CPU. See kernels/relu.h for the contract.
#include "kernels/relu.h"

#include "kernels/cpu/bf16.h"

namespace sg::cpu::inline SG_CPU_ISA {
namespace {

// T: float, or uint16_t for bf16 activations (loaded exactly, results rounded on the store).
template <class T>
void relu_forward_as(T* out, const T* inp, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) {
    const float x = detail::load(inp + i);
    detail::store(out + i, x > 0.0f ? x : 0.0f);
  }
}

template <class T>
void relu_backward_as(float* dinp, const T* out, const float* dout, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) dinp[i] = detail::load(out + i) > 0.0f ? dout[i] : 0.0f;
}

template <class T>
void add_relu_inplace_as(T* out, const T* in, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) {
    const float sum = detail::load(out + i) + detail::load(in + i);
    detail::store(out + i, sum > 0.0f ? sum : 0.0f);
  }
}

template <class T>
void add_relu_backward_as(float* acc, const float* g, const T* out, long n) {
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < n; ++i) acc[i] = detail::load(out + i) > 0.0f ? acc[i] + g[i] : 0.0f;
}

}  // namespace

void relu_forward(float* out, const float* inp, long n) { relu_forward_as(out, inp, n); }
void relu_forward_bf16(uint16_t* out, const uint16_t* inp, long n) { relu_forward_as(out, inp, n); }

void relu_backward(float* dinp, const float* out, const float* dout, long n) {
  relu_backward_as(dinp, out, dout, n);
}
void relu_backward_bf16(float* dinp, const uint16_t* out, const float* dout, long n) {
  relu_backward_as(dinp, out, dout, n);
}

void add_relu_inplace(float* out, const float* in, long n) { add_relu_inplace_as(out, in, n); }
void add_relu_inplace_bf16(uint16_t* out, const uint16_t* in, long n) {
  add_relu_inplace_as(out, in, n);
}

void add_relu_backward(float* acc, const float* g, const float* out, long n) {
  add_relu_backward_as(acc, g, out, n);
}
void add_relu_backward_bf16(float* acc, const float* g, const uint16_t* out, long n) {
  add_relu_backward_as(acc, g, out, n);
}

}  // namespace sg::cpu::SG_CPU_ISA
