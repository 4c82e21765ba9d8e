#pragma once
// 2-D convolution (cross-correlation, as PyTorch's Conv2d), no bias, no dilation.
// Activations are NHWC: inp (N,H,W,C), out (N,P,Q,K). The weight is (K, C/groups, R, S), the
// layout PyTorch and torchvision store, so checkpoints hold it as they do.
//   out[n,p,q,k] = sum_{c in k's group, r, s} inp[n, p*stride - pad + r, q*stride - pad + s, c]
//                                             * weight[k, c - group_start, r, s]
// Four implementations: *_reference (plain loops in double, the check for every other one),
// the oneDNN one the CPU backend runs (kernels/cpu/conv2d_dnnl.cpp), and two it hands layers to:
// Winograd's for the 3x3 stride-1 layers (kernels/cpu/conv2d_winograd.cpp) and matrix products
// for the 1x1 ones (kernels/cpu/conv2d_gemm.cpp).

#include "tensor/act.h"

namespace sg {

struct Conv2dShape {
  int N = 1, H = 1, W = 1, C = 1;  // input
  int K = 1, R = 1, S = 1;         // output channels, kernel height and width
  int stride = 1, pad = 0, groups = 1;
  int P() const { return (H + 2 * pad - R) / stride + 1; }  // output height
  int Q() const { return (W + 2 * pad - S) / stride + 1; }  // output width
  long weight_size() const { return static_cast<long>(K) * (C / groups) * R * S; }
  long in_size() const { return static_cast<long>(N) * H * W * C; }
  long out_size() const { return static_cast<long>(N) * P() * Q() * K; }
  bool operator==(const Conv2dShape&) const = default;
};

namespace cpu {

void conv2d_forward(float* out,           // (N,P,Q,K) =
                    const float* inp,     // (N,H,W,C)
                    const float* weight,  // (K,C/groups,R,S)
                    const Conv2dShape& s);
// Written with = (not +=): a residual block adds the branches' input gradients itself.
void conv2d_backward_data(float* dinp,          // (N,H,W,C) =
                          const float* dout,    // (N,P,Q,K)
                          const float* weight,  // (K,C/groups,R,S)
                          const Conv2dShape& s);
void conv2d_backward_weights(float* dweight,     // (K,C/groups,R,S) +=
                             const float* dout,  // (N,P,Q,K)
                             const float* inp,   // (N,H,W,C)
                             const Conv2dShape& s);
// Both backward passes (dinp may be null: the first layer's input needs no gradient); the same
// results as the two calls above, with dout brought into the primitives' layout once.
void conv2d_backward(float* dinp, float* dweight, const float* dout, const float* inp,
                     const float* weight, const Conv2dShape& s);
// The same on activations stored in bf16 (train.precision: bf16, docs/bf16.md): inp, out and
// dout bf16 (all of one call's activations one type), dinp, dweight and the weight fp32 (a bf16
// weight is widened). Where conv2d_runs_bf16(s), oneDNN's bf16 primitives read them as they are
// and the output is the fp32 result rounded; elsewhere (few channels, no AVX-512, the strided
// 1x1 weight gradient) the fp32 kernels run on widened copies (exact), the output rounded.
// With fp32 activations these are the functions above.
void conv2d_forward(Act out, ConstAct inp, ConstAct weight, const Conv2dShape& s);
void conv2d_backward(float* dinp, float* dweight, ConstAct dout, ConstAct inp, ConstAct weight,
                     const Conv2dShape& s);

// 1x1 pad-0 ungrouped convolutions (conv2d_1x1_fits), any stride, as matrix products on oneDNN's
// sgemm (kernels/cpu/conv2d_gemm.cpp): the same contracts as the three passes above.
bool conv2d_1x1_fits(const Conv2dShape& s);
void conv2d_1x1_forward(float* out, const float* inp, const float* weight, const Conv2dShape& s);
void conv2d_1x1_backward_data(float* dinp, const float* dout, const float* weight,
                              const Conv2dShape& s);
void conv2d_1x1_backward_weights(float* dweight, const float* dout, const float* inp,
                                 const Conv2dShape& s);
// Their (M, C) rows: x itself at stride 1, else the input pixels under the output pixels
// gathered (in x's type, fp32 or bf16) into an area of their own; and back, dinp (=) from the
// rows' gradient, zero at the pixels no output reads.
ConstAct conv2d_1x1_rows(ConstAct x, const Conv2dShape& s);
void conv2d_1x1_scatter(float* dinp, const float* rows, const Conv2dShape& s);
// The weight gradient of a strided spatial layer (stride > 1, a kernel wider than 1x1, ungrouped,
// at least 16 input channels: conv2d_im2col_weights_applies) as one product over the gathered
// input windows (kernels/cpu/conv2d_im2col.cpp): conv2d_backward_weights' contract.
// The col matrix is gathered in bands of at most max_col_floats (tests pass a small cap).
inline constexpr long kMaxColFloats = 8L << 20;
bool conv2d_im2col_weights_applies(const Conv2dShape& s);
void conv2d_im2col_backward_weights(float* dweight, const float* dout, const float* inp,
                                    const Conv2dShape& s, long max_col_floats = kMaxColFloats);

// Which layers the CPU convolution takes off oneDNN's direct kernels: the 3x3 stride-1 ones to
// Winograd (winograd_applies), to matrix products (`gemm`) the 1x1 ones (conv2d_1x1_fits) and
// the strided spatial ones' weight gradients (conv2d_im2col_weights_applies).
// The spatial (3x3, 7x7) layers left to oneDNN's direct kernels run either on its channel-blocked
// layout, their activations reordered in and out around each call, or on the NHWC tensors as
// they are: by_isa picks per shape by a fixed rule for the instruction set oneDNN runs
// (conv2d_dnnl.cpp); tests and benchmarks may force one.
// bf16 (train.precision: bf16): the 1x1 layers as the linear layers' bf16 products
// (kernels/matmul_bf16.h; a strided layer's input pixels gathered first), every other layer on
// oneDNN's direct kernels with bf16 sources, weights and output gradients, results and weight
// gradients fp32 (Winograd and the fp32 products are not used). SINGULARITY_CONV=direct or
// winograd (no `gemm`) keeps the 1x1 layers on oneDNN too, except the strided 1x1 weight
// gradients that oneDNN 2.6 gets wrong at few channels (conv2d_dnnl.cpp), fp32 products.
enum class SpatialLayout { by_isa, blocked, nhwc };
struct ConvAlgorithms {
  bool winograd = true;
  bool gemm = true;
  SpatialLayout spatial_layout = SpatialLayout::by_isa;
  bool bf16 = false;
  bool operator==(const ConvAlgorithms&) const = default;
};
// SINGULARITY_CONV's value (null when unset): unset, empty or "auto" both; "winograd" or "gemm"
// (the products) only that one; "direct" neither (every layer by oneDNN). Any other value is a
// RunError saying which exist.
ConvAlgorithms conv_algorithms_from_env(const char* value);
// The process's choice: SINGULARITY_CONV's, read on first use, until set_conv_algorithms (tests
// and benchmarks, between calls) replaces it.
ConvAlgorithms conv_algorithms();
void set_conv_algorithms(const ConvAlgorithms& chosen);
// Whether the choice runs s on oneDNN's bf16 kernels: false where bf16 is off, and where oneDNN
// has no optimised bf16 kernel for s (few channels; a CPU without AVX-512), which stays fp32.
bool conv2d_runs_bf16(const Conv2dShape& s);

void conv2d_forward_reference(float* out, const float* inp, const float* weight,
                              const Conv2dShape& s);
void conv2d_backward_data_reference(float* dinp, const float* dout, const float* weight,
                                    const Conv2dShape& s);
void conv2d_backward_weights_reference(float* dweight, const float* dout, const float* inp,
                                       const Conv2dShape& s);

}  // namespace cpu
}  // namespace sg

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA {

// Winograd F(4x4, 3x3) (kernels/cpu/conv2d_winograd.cpp, a dispatched kernel) for the 3x3,
// stride 1, pad 1, ungrouped convolutions with both channel counts a multiple of 8
// (winograd_fits): the same contracts as the three passes above, results that differ from the
// direct convolution's by rounding (the transforms scale by up to 8 and 1/24). The CPU
// convolution uses it for the shapes where it measured faster than oneDNN's: all three passes
// from 32 output tiles of 4x4 in the batch up (winograd_applies), the weight gradient alone from
// 16 (winograd_weights_applies).
bool winograd_fits(const Conv2dShape& s);
bool winograd_applies(const Conv2dShape& s);
bool winograd_weights_applies(const Conv2dShape& s);
void conv2d_winograd_forward(float* out, const float* inp, const float* weight,
                             const Conv2dShape& s);
void conv2d_winograd_backward_data(float* dinp, const float* dout, const float* weight,
                                   const Conv2dShape& s);
void conv2d_winograd_backward_weights(float* dweight, const float* dout, const float* inp,
                                      const Conv2dShape& s);

}  // namespace sg::cpu::SG_CPU_ISA
