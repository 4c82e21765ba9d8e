#pragma once
// The CUDA backend's attention (contract: backend.h, kernels/attention.h; state = the per-query
// log-sum-exp, B*NH*T floats; backward dqkv +=). Two paths:
//   - cuDNN's fused SDPA (cudnn_attention.h) where the module was built with cudnn-frontend
//     (SINGULARITY_CUDNN_SDPA), train.precision is bf16 or fp16, and cuDNN takes the shape (head
//     size a multiple of 8 up to 128, its graph builds on this GPU and cuDNN): qkv, out and dout
//     are cast into 16-bit copies in the backend's scratch, cuDNN runs on them, out comes back
//     as fp32 (=) and dqkv gains the 16-bit gradients (+=). The backward is cuDNN's deterministic
//     one; without it the backward stays on our kernels.
//   - otherwise our flash kernels (attention.cuh), fp32 throughout, head size <= 64.
// Both keep the same log-sum-exp, so either backward follows either forward (precision changed
// between them, or cuDNN taking only one pass). Which path runs is said once per process on
// stderr, and `info` says whether the module has the fused path (fused_attention_summary).
#include <cuda_runtime.h>

#include <memory>
#include <set>
#include <string>

#include "kernels/cuda/device_memory.h"

namespace sg::cuda {

class CudnnAttention;

class AttentionOp {
 public:
  // Work on `stream`, 16-bit copies and cuDNN's workspace in `scratch`; `device` for messages.
  AttentionOp(cudaStream_t stream, DeviceScratch& scratch, int device);
  ~AttentionOp();
  AttentionOp(const AttentionOp&) = delete;
  AttentionOp& operator=(const AttentionOp&) = delete;

  // train.precision ("fp32", "bf16" or "fp16", checked by the backend).
  void set_precision(const std::string& precision) { precision_ = precision; }

  void forward(float* out,        // (B, T, C) =
               float* lse,        // (B, NH, T) =
               const float* qkv,  // (B, T, 3C)
               int B, int T, int C, int NH);
  void backward(float* dqkv,        // (B, T, 3C) +=
                float* delta,       // (B, NH, T) scratch of our kernels
                const float* dout,  // (B, T, C)
                const float* qkv,   // (B, T, 3C)
                const float* out,   // (B, T, C), the forward's
                const float* lse,   // (B, NH, T), the forward's
                int B, int T, int C, int NH);

 private:
  // Whether cuDNN runs this pass (backward: true) for this shape now; says the path once.
  bool use_cudnn(int B, int T, int C, int NH, bool backward);
  template <class T16>
  void cudnn_forward(float* out, float* lse, const float* qkv, int B, int T, int C, int NH);
  template <class T16>
  void cudnn_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                      const float* lse, int B, int T, int C, int NH);
  void say_once(const std::string& message);

  cudaStream_t stream_;
  DeviceScratch& scratch_;
  int device_;
  std::string precision_ = "fp32";
  // Made on the first reduced-precision call. A shared_ptr, whose deleter is bound where it is
  // made: a module built without cudnn-frontend never makes one and needs no CudnnAttention.
  std::shared_ptr<CudnnAttention> cudnn_;
  std::set<std::string> said_;
  long fallback_passes_ = 0;  // reduced-precision passes cuDNN refused; said at destruction
};

// One line for `singularity info`: the cudnn-frontend compiled in and what attention runs on.
std::string fused_attention_summary();

}  // namespace sg::cuda
