#pragma once
// Linear layer: out = inp @ weight^T + bias, weight stored (OC, C) as in llm.c / nn.Linear.
// Implemented with sgemm (oneDNN in fixed bands for a language-model head's vocabulary-sized
// products and for the gradients of products of 512 rows or more, OpenBLAS for the rest:
// kernels/cpu/matmul.cpp); bias may be null. The results are the same bits for any thread count.

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA {

void matmul_forward(float* out,           // (N,OC)
                    const float* inp,     // (N,C)
                    const float* weight,  // (OC,C)
                    const float* bias,    // (OC) or nullptr
                    int N, int C, int OC);

// dinp = dout @ weight, dweight += dout^T @ inp, dbias += sum_n dout.
// dinp (an activation's gradient, which only this product makes) is written, so its buffer
// needs no zeroing first; the parameter gradients accumulate over micro-batches. dinp may be
// null (e.g. the first layer's input needs no gradient); dbias null when bias is.
void matmul_backward(float* dinp,          // (N,C)   = or nullptr
                     float* dweight,       // (OC,C)  +=
                     float* dbias,         // (OC)    += or nullptr
                     const float* dout,    // (N,OC)
                     const float* inp,     // (N,C)
                     const float* weight,  // (OC,C)
                     int N, int C, int OC);

// dbias += sum_n dout (N,OC): the bias gradient alone (matmul_backward's, and that of the bf16
// products of kernels/matmul_bf16.h, whose bias stays fp32).
void matmul_bias_backward(float* dbias, const float* dout, int N, int OC);

}  // namespace sg::cpu::SG_CPU_ISA
