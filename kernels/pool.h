#pragma once
// Pooling over NHWC activations.
// Max pooling (ResNet's 3x3 stride 2 pad 1 after the stem): padding never wins the max.
// `argmax` is a workspace of (N,P,Q,C) 32-bit slots that forward writes and backward reads;
// what it holds is the implementation's own (the CPU's, like the reference, the input's h*W + w).
// Global average pooling: (N,HW,C) -> (N,C).
#include <cstdint>

#include "kernels/cpu/isa.h"

namespace sg {

struct Pool2dShape {
  int N = 1, H = 1, W = 1, C = 1;
  int R = 1, S = 1, stride = 1, pad = 0;  // window, stride, padding
  int P() const { return (H + 2 * pad - R) / stride + 1; }
  int Q() const { return (W + 2 * pad - S) / stride + 1; }
  long in_size() const { return static_cast<long>(N) * H * W * C; }
  long out_size() const { return static_cast<long>(N) * P() * Q() * C; }
  bool operator==(const Pool2dShape&) const = default;
};

}  // namespace sg

// Hand-written loops (kernels/cpu/pool.cpp), one copy per instruction-set variant.
namespace sg::cpu::inline SG_CPU_ISA {

void maxpool_forward(float* out,        // (N,P,Q,C) =
                     int32_t* argmax,   // (N,P,Q,C) workspace
                     const float* inp,  // (N,H,W,C)
                     const Pool2dShape& s);
void maxpool_backward(float* dinp,            // (N,H,W,C) =
                      const float* dout,      // (N,P,Q,C)
                      const int32_t* argmax,  // (N,P,Q,C) from forward
                      const Pool2dShape& s);

void maxpool_forward_reference(float* out, int32_t* argmax, const float* inp,
                               const Pool2dShape& s);
void maxpool_backward_reference(float* dinp, const float* dout, const int32_t* argmax,
                                const Pool2dShape& s);

void global_avgpool_forward(float* out,        // (N,C) =
                            const float* inp,  // (N,HW,C)
                            int N, int HW, int C);
void global_avgpool_backward(float* dinp,        // (N,HW,C) =
                             const float* dout,  // (N,C)
                             int N, int HW, int C);

// Layout change for images: out (N,HW,C) from inp (N,C,HW).
void nchw_to_nhwc(float* out, const float* inp, int N, int C, int HW);

// bf16 storage (docs/bf16.md): the max pool's input and output, the average pool's input and
// the transposed images in bf16 (the average and the images' values computed in fp32, rounded
// on the store; the max exact). Gradients and the pooled features stay fp32.
void maxpool_forward_bf16(uint16_t* out, int32_t* argmax, const uint16_t* inp,
                          const Pool2dShape& s);
void global_avgpool_forward_bf16(float* out, const uint16_t* inp, int N, int HW, int C);
void nchw_to_nhwc_bf16(uint16_t* out, const float* inp, int N, int C, int HW);

}  // namespace sg::cpu::SG_CPU_ISA
