#pragma once
// Linear layer with bf16 products: the contract of kernels/matmul.h (out = inp @ weight^T + bias;
// dinp written, dweight and dbias accumulated), with inp, weight and dout rounded to bf16 (to
// nearest, ties to even) before each product and the products summed in fp32 by oneDNN's bf16
// matmul (AMX tiles or AVX512-BF16 where the CPU has them; kernels/cpu/matmul_bf16.cpp).
// Outputs, bias and gradients stay fp32, as a GPU's tensor cores do with bf16 operands
// (train.precision: bf16 on the CPU backend, docs/performance.md). The bits are the same for
// any thread count. Where oneDNN has no bf16 matmul (a CPU without AVX-512) the same products
// are emulated: the operands rounded to bf16 values held in fp32 and summed by the fp32 sgemm.
// A product of two bf16 values is exact in fp32, so only the order of the fp32 sums differs.
//
// Activations (inp, out, dout, dinp) may also be stored in bf16 (docs/bf16.md): a bf16 operand
// is used as it is, and a bf16 output is the fp32 result rounded, so an operand's storage never
// changes the bits beyond that rounding. dbias is summed from dout as stored. The weight may be
// given in bf16 too (the model's working copy, cast once per step): the same bits as its fp32
// master rounded here.
#include <cstdint>
#include <string>

#include "tensor/act.h"

namespace sg::cpu {

void matmul_forward_bf16(Act out, ConstAct inp, ConstAct weight, const float* bias, int N, int C,
                         int OC);
void matmul_backward_bf16(Act dinp, float* dweight, float* dbias, ConstAct dout, ConstAct inp,
                          ConstAct weight, int N, int C, int OC);

// out[i] = in[i] rounded to bf16 (sg::float_to_bf16's rounding), n elements, threaded.
void round_to_bf16(uint16_t* out, const float* in, long n);

// The emulation alone (what the functions above run where oneDNN has no bf16 matmul), for tests.
void matmul_forward_bf16_emulated(Act out, ConstAct inp, ConstAct weight, const float* bias,
                                  int N, int C, int OC);
void matmul_backward_bf16_emulated(Act dinp, float* dweight, float* dbias, ConstAct dout,
                                   ConstAct inp, ConstAct weight, int N, int C, int OC);

// n bf16 values to fp32 (exact), threaded.
void widen_from_bf16(float* out, const uint16_t* in, long n);

// The oneDNN implementation that runs the products on this CPU ("brg:avx512_core_amx_bf16",
// ...), or "" where oneDNN has none (a CPU without AVX-512) and the products are emulated.
std::string bf16_matmul_implementation();

}  // namespace sg::cpu
