// The linear layer's GEMMs through cuBLASLt; see cublaslt_gemm.h for the row-major mapping.
#include "kernels/cuda/cublaslt_gemm.h"

#include <cuda_bf16.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/casts.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/matmul.cuh"
#include "util/error.h"

namespace sg::cuda {
namespace {

// The largest power of two (at most 256, cuBLASLt's default assumption) dividing the address:
// cuBLASLt picks vectorised algorithms only for pointers it is told are aligned enough.
int alignment_of(const void* ptr) {
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  int align = 256;
  while (align > 1 && address % static_cast<uintptr_t>(align) != 0) align /= 2;
  return align;
}

// cuBLASLt's bias epilogue needs a 16-byte aligned bias (it reads it vectorised); a bias view at
// an odd offset of the parameter buffer is broadcast into the output instead.
constexpr int kBiasEpilogueAlignment = 16;

template <class T>
void set_attribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
                   const T& value) {
  SG_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
}
template <class T>
void set_preference(cublasLtMatmulPreference_t preference,
                    cublasLtMatmulPreferenceAttributes_t attribute, const T& value) {
  SG_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value)));
}

}  // namespace

CublasLtGemm::CublasLtGemm(cudaStream_t stream, DeviceScratch& scratch)
    : stream_(stream), scratch_(scratch) {
  SG_CUBLAS_CHECK(cublasLtCreate(&handle_));
  try {
    workspace_ = allocate_device(kWorkspaceBytes, "cuBLASLt workspace");
  } catch (...) {
    cublasLtDestroy(handle_);
    throw;
  }
}

CublasLtGemm::~CublasLtGemm() {
  // Destructors do not throw: failures here (the runtime unloading at exit) are ignored.
  for (auto& [key, plan] : plans_) {
    cublasLtMatrixLayoutDestroy(plan.a);
    cublasLtMatrixLayoutDestroy(plan.b);
    cublasLtMatrixLayoutDestroy(plan.d);
    cublasLtMatmulDescDestroy(plan.desc);
  }
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

const CublasLtGemm::Plan& CublasLtGemm::plan_for(const GemmKey& key) {
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  Plan& plan = plans_.emplace(key, Plan{}).first->second;
  try {
    // bf16 operands are multiplied as they are; fp32 ones rounded by cuBLASLt under reduced math.
    const cublasComputeType_t compute =
        key.operands16               ? CUBLAS_COMPUTE_32F
        : key.math == Math::Bf16     ? CUBLAS_COMPUTE_32F_FAST_16BF
        : key.math == Math::Fp16     ? CUBLAS_COMPUTE_32F_FAST_16F
                                     : CUBLAS_COMPUTE_32F;
    const cudaDataType_t ab_type = key.operands16 ? CUDA_R_16BF : CUDA_R_32F;
    const cudaDataType_t d_type = key.d16 ? CUDA_R_16BF : CUDA_R_32F;
    SG_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, compute, CUDA_R_32F));
    set_attribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N);
    set_attribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N);
    set_attribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                  key.bias_epilogue ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT);
    if (key.bias_epilogue) set_attribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, CUDA_R_32F);
    // Stored shapes (column-major): A is (k,m) when transposed, else (m,k); B is (n,k) when
    // transposed, else (k,n); D is (m,n). Leading dimensions are the stored row counts.
    const int a_rows = key.trans_a ? key.k : key.m, a_cols = key.trans_a ? key.m : key.k;
    const int b_rows = key.trans_b ? key.n : key.k, b_cols = key.trans_b ? key.k : key.n;
    SG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.a, ab_type, a_rows, a_cols, a_rows));
    SG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.b, ab_type, b_rows, b_cols, b_rows));
    SG_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.d, d_type, key.m, key.n, key.m));

    cublasLtMatmulPreference_t preference = nullptr;
    SG_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
    cublasLtMatmulHeuristicResult_t heuristic{};
    int found = 0;
    try {
      set_preference(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                     static_cast<uint64_t>(kWorkspaceBytes));
      // Every reduction scheme but the in-place one (split-K partials added with atomics).
      set_preference(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                     static_cast<uint32_t>(CUBLASLT_REDUCTION_SCHEME_MASK &
                                           ~CUBLASLT_REDUCTION_SCHEME_INPLACE));
      set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                     static_cast<uint32_t>(key.align_a));
      set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                     static_cast<uint32_t>(key.align_b));
      set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                     static_cast<uint32_t>(key.align_d));
      set_preference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
                     static_cast<uint32_t>(key.align_d));
      SG_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle_, plan.desc, plan.a, plan.b, plan.d,
                                                     plan.d, preference, 1, &heuristic, &found));
    } catch (...) {
      cublasLtMatmulPreferenceDestroy(preference);
      throw;
    }
    SG_CUBLAS_CHECK(cublasLtMatmulPreferenceDestroy(preference));
    if (found == 0) {
      throw RunError("cuBLASLt has no algorithm for the GEMM m=" + std::to_string(key.m) +
                     " n=" + std::to_string(key.n) + " k=" + std::to_string(key.k) +
                     (key.trans_a ? " A^T" : "") + (key.trans_b ? " B^T" : "") +
                     (key.bias_epilogue ? " with bias" : "") +
                     (key.operands16 ? " on bf16 operands" : "") +
                     (key.d16 ? " into bf16" : "") + " (pointer alignments " +
                     std::to_string(key.align_a) + "/" + std::to_string(key.align_b) + "/" +
                     std::to_string(key.align_d) + " bytes) within a " +
                     std::to_string(kWorkspaceBytes >> 20) + " MiB workspace");
    }
    plan.algo = heuristic.algo;
  } catch (...) {
    // Leave no half-made plan behind: a later call would find and use it.
    if (plan.a != nullptr) cublasLtMatrixLayoutDestroy(plan.a);
    if (plan.b != nullptr) cublasLtMatrixLayoutDestroy(plan.b);
    if (plan.d != nullptr) cublasLtMatrixLayoutDestroy(plan.d);
    if (plan.desc != nullptr) cublasLtMatmulDescDestroy(plan.desc);
    plans_.erase(key);
    throw;
  }
  return plan;
}

void CublasLtGemm::run(const GemmKey& key, const void* A, const void* B, void* D,
                       const float* bias) {
  const Plan& plan = plan_for(key);
  // The bias pointer is the one attribute that changes between calls of a plan.
  if (key.bias_epilogue) set_attribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  const float alpha = 1.0f, beta = key.accumulate ? 1.0f : 0.0f;
  SG_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc, &alpha, A, plan.a, B, plan.b, &beta, D,
                                 plan.d, D, plan.d, &plan.algo, workspace_, kWorkspaceBytes,
                                 stream_));
}

namespace {

__nv_bfloat16* bf16_of(Act a) { return reinterpret_cast<__nv_bfloat16*>(a.b16()); }
const __nv_bfloat16* bf16_of(ConstAct a) {
  return reinterpret_cast<const __nv_bfloat16*>(a.b16());
}

// The operands of one call's GEMMs as they are multiplied: fp32 as stored, or (a 16-bit GEMM,
// when any activation is stored in bf16) all bf16, the fp32 ones cast into one scratch request
// (which may also hold the bias gradient's partial sums, `extra` bytes at extra()).
class Operands {
 public:
  Operands(bool in16, DeviceScratch& scratch, cudaStream_t stream,
           std::initializer_list<std::pair<ConstAct, long>> tensors, size_t extra = 0)
      : in16_(in16) {
    ScratchLayout layout;
    std::vector<size_t> at;
    for (const auto& [x, n] : tensors) {
      at.push_back(in16 && !x.bf16() && x.data != nullptr ? layout.add(2 * static_cast<size_t>(n))
                                                           : SIZE_MAX);
    }
    extra_at_ = extra > 0 ? layout.add(extra) : SIZE_MAX;
    unsigned char* base = layout.bytes() > 0 ? scratch.get(layout.bytes(), stream) : nullptr;
    size_t i = 0;
    for (const auto& [x, n] : tensors) {
      if (at[i] != SIZE_MAX) {
        auto* copy = reinterpret_cast<__nv_bfloat16*>(base + at[i]);
        cast_to_16bit(copy, x.f32(), n, stream);
        ptrs_.push_back(copy);
      } else {
        ptrs_.push_back(x.data);
      }
      ++i;
    }
    extra_ = extra_at_ != SIZE_MAX ? base + extra_at_ : nullptr;
  }
  const void* operator[](size_t i) const { return ptrs_[i]; }
  bool in16() const { return in16_; }
  void* extra() const { return extra_; }

 private:
  bool in16_;
  std::vector<const void*> ptrs_;
  size_t extra_at_ = SIZE_MAX;
  void* extra_ = nullptr;
};

size_t element_bytes(bool b16) { return b16 ? 2 : 4; }

}  // namespace

void CublasLtGemm::forward(Act out, ConstAct inp, ConstAct weight, const float* bias, int N,
                           int C, int OC) {
  if (N <= 0 || OC <= 0) return;
  const bool d16 = out.bf16();
  const auto broadcast_into_out = [&] {
    if (d16) {
      broadcast_bias(bf16_of(out), bias, N, OC, stream_);
    } else {
      broadcast_bias(out.f32(), bias, N, OC, stream_);
    }
  };
  if (C <= 0) {  // an empty sum: out is the bias (cuBLASLt takes no k = 0)
    if (bias != nullptr) {
      broadcast_into_out();
    } else {
      SG_CUDA_CHECK(cudaMemsetAsync(out.data, 0, element_bytes(d16) * N * OC, stream_));
    }
    return;
  }
  const Operands ops(d16 || inp.bf16() || weight.bf16(), scratch_, stream_,
                     {{weight, static_cast<long>(OC) * C}, {inp, static_cast<long>(N) * C}});
  const bool epilogue = bias != nullptr && alignment_of(bias) >= kBiasEpilogueAlignment;
  const bool broadcast = bias != nullptr && !epilogue;
  if (broadcast) broadcast_into_out();  // then the GEMM adds onto it
  // out^T (OC,N) = op_T(W stored (C,OC)) @ inp^T (C,N)
  const GemmKey key{.trans_a = true, .trans_b = false, .m = OC, .n = N, .k = C,
                    .bias_epilogue = epilogue, .accumulate = broadcast, .math = math_,
                    .operands16 = ops.in16(), .d16 = d16, .align_a = alignment_of(ops[0]),
                    .align_b = alignment_of(ops[1]), .align_d = alignment_of(out.data)};
  run(key, ops[0], ops[1], out.data, bias);
}

void CublasLtGemm::backward(Act dinp, float* dweight, float* dbias, ConstAct dout, ConstAct inp,
                            ConstAct weight, int N, int C, int OC) {
  if (N <= 0) return;  // nothing to write or add
  const bool dinp16 = dinp && dinp.bf16();
  if (OC <= 0) {  // dinp is an empty sum
    if (dinp && C > 0) {
      SG_CUDA_CHECK(cudaMemsetAsync(dinp.data, 0, element_bytes(dinp16) * N * C, stream_));
    }
    return;
  }
  const size_t bias_bytes =
      dbias != nullptr ? sizeof(float) * static_cast<size_t>(bias_backward_scratch(N, OC)) : 0;
  const bool in16 = dinp16 || dout.bf16() || inp.bf16() || weight.bf16();
  const Operands ops(in16, scratch_, stream_,
                     {{weight, static_cast<long>(OC) * C},
                      {dout, static_cast<long>(N) * OC},
                      {C > 0 ? inp : ConstAct(), static_cast<long>(N) * C}},
                     bias_bytes);
  if (C > 0) {
    if (dinp) {
      // dinp^T (C,N) = W stored (C,OC) @ dout^T (OC,N), written (the CPU op's contract)
      const GemmKey key{.trans_a = false, .trans_b = false, .m = C, .n = N, .k = OC,
                        .bias_epilogue = false, .accumulate = false, .math = math_,
                        .operands16 = in16, .d16 = dinp16, .align_a = alignment_of(ops[0]),
                        .align_b = alignment_of(ops[1]), .align_d = alignment_of(dinp.data)};
      run(key, ops[0], ops[1], dinp.data, nullptr);
    }
    // dweight^T (C,OC) += inp^T (C,N) @ op_T(dout^T stored (OC,N)), fp32
    const GemmKey key{.trans_a = false, .trans_b = true, .m = C, .n = OC, .k = N,
                      .bias_epilogue = false, .accumulate = true, .math = math_,
                      .operands16 = in16, .d16 = false, .align_a = alignment_of(ops[2]),
                      .align_b = alignment_of(ops[1]), .align_d = alignment_of(dweight)};
    run(key, ops[2], ops[1], dweight, nullptr);
  }
  if (dbias != nullptr) {  // from dout as stored
    float* partial = static_cast<float*>(ops.extra());
    if (dout.bf16()) {
      bias_backward(dbias, partial, bf16_of(dout), N, OC, stream_);
    } else {
      bias_backward(dbias, partial, dout.f32(), N, OC, stream_);
    }
  }
}

}  // namespace sg::cuda
