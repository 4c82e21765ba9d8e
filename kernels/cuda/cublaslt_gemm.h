#pragma once
// The linear layer's GEMMs through cuBLASLt (contract: kernels/matmul.h), row-major as llm.c
// maps them: a row-major (R, C) matrix is a column-major (C, R) one, so
//   out (N,OC)     = inp (N,C) @ W^T + bias  is  out^T (OC,N)    = op_T(W) inp^T, bias epilogue
//   dinp (N,C)    += dout (N,OC) @ W         is  dinp^T (C,N)   += W^T dout^T       (beta = 1)
//   dweight (OC,C)+= dout^T @ inp            is  dweight^T (C,OC)+= inp^T op_T(dout^T) (beta = 1)
// and dbias += column sums of dout through our deterministic kernel (matmul.cuh).
// fp32 by default with CUBLAS_COMPUTE_32F (no TF32: results close to the CPU's); reduced
// precision (train.precision bf16) lets cuBLASLt round inputs to bf16 (CUBLAS_COMPUTE_32F_FAST_16BF).
// Activations stored in bf16 (docs/bf16.md) make it a 16-bit GEMM: every operand bf16 (the
// model's bf16 working copy of the weights, cast once per step; an fp32 weight or an fp32
// activation beside a bf16 one cast into scratch per call), fp32
// accumulation (CUBLAS_COMPUTE_32F), the output in its own type (the weight gradient fp32).
// Algorithms may not use the in-place split-K reduction (atomics, so nondeterministic); the
// others reduce in a fixed order. Plans (descriptors, layouts, the chosen algorithm) are cached
// per shape, transposition and pointer alignment.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <compare>
#include <cstddef>
#include <map>

#include "kernels/cuda/device_memory.h"
#include "tensor/act.h"

namespace sg::cuda {

class CublasLtGemm {
 public:
  // Work is enqueued on `stream`; `scratch` (shared with the other ops on that stream) holds the
  // bias gradient's partial sums.
  CublasLtGemm(cudaStream_t stream, DeviceScratch& scratch);
  ~CublasLtGemm();
  CublasLtGemm(const CublasLtGemm&) = delete;
  CublasLtGemm& operator=(const CublasLtGemm&) = delete;

  // What the products multiply in: fp32 (no TF32), or inputs rounded to bf16 / fp16 on tensor
  // cores (CUBLAS_COMPUTE_32F_FAST_16BF / _16F), accumulating in fp32 either way.
  enum class Math : int { Fp32 = 0, Bf16 = 1, Fp16 = 2 };
  void set_math(Math math) { math_ = math; }

  void forward(Act out,            // (N,OC) =
               ConstAct inp,       // (N,C)
               ConstAct weight,    // (OC,C): fp32, or the bf16 working copy
               const float* bias,  // (OC) or null
               int N, int C, int OC);
  void backward(Act dinp,          // (N,C)  =  or null
                float* dweight,    // (OC,C) +=
                float* dbias,      // (OC)   += or null
                ConstAct dout,     // (N,OC)
                ConstAct inp,      // (N,C)
                ConstAct weight,   // (OC,C): fp32, or the bf16 working copy
                int N, int C, int OC);

  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

 private:
  // One column-major D (m,n) = op(A) op(B) [+ bias] [+ D]: what a plan is chosen for.
  struct GemmKey {
    bool trans_a = false, trans_b = false;
    int m = 0, n = 0, k = 0;
    bool bias_epilogue = false, accumulate = false;
    Math math = Math::Fp32;
    bool operands16 = false;  // A and B bf16 (else fp32)
    bool d16 = false;         // D bf16 (else fp32)
    int align_a = 0, align_b = 0, align_d = 0;  // bytes, powers of two up to 256
    auto operator<=>(const GemmKey&) const = default;
  };
  struct Plan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  const Plan& plan_for(const GemmKey& key);
  // D = op(A) op(B) (+ bias with the epilogue) (+ D when accumulating).
  void run(const GemmKey& key, const void* A, const void* B, void* D, const float* bias);

  cudaStream_t stream_;
  DeviceScratch& scratch_;
  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  Math math_ = Math::Fp32;
  std::map<GemmKey, Plan> plans_;
};

}  // namespace sg::cuda
