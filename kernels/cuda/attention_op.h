#pragma once
// The CUDA backend's attention (contract: backend.h, kernels/attention.h; state = the per-query
// log-sum-exp, B*NH*T floats; backward dqkv +=). Two paths:
//   - cuDNN's fused SDPA (cudnn_attention.h) where the module was built with cudnn-frontend
//     (SINGULARITY_CUDNN_SDPA), train.precision is bf16 or fp16, and cuDNN takes the shape (head
//     size a multiple of 8 up to 128, its graph builds on this GPU and cuDNN): qkv, out and dout
//     stored in fp32 are cast into 16-bit copies in the backend's scratch (stored in bf16, the
//     activations themselves: docs/bf16.md), cuDNN runs on them, out is written in its own
//     type (=) and dqkv (fp32) gains the 16-bit gradients (+=). The backward is cuDNN's
//     deterministic one; without it the backward stays on our kernels.
//   - otherwise our flash kernels (attention.cuh), fp32 throughout, head size <= 64 (bf16-stored
//     tensors widened into fp32 copies, out rounded back).
// Both keep the same log-sum-exp, so either backward follows either forward (precision changed
// between them, or cuDNN taking only one pass). Which path runs is said once per process on
// stderr, and `info` says whether the module has the fused path (fused_attention_summary).
#include <cuda_runtime.h>

#include <memory>
#include <set>
#include <string>

#include "config/spec_enums.h"
#include "kernels/cuda/device_memory.h"
#include "tensor/act.h"

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
  void set_precision(Precision precision) { precision_ = precision; }

  void forward(Act out,        // (B, T, C) =
               float* lse,     // (B, NH, T) =
               ConstAct qkv,   // (B, T, 3C)
               int B, int T, int C, int NH);
  void backward(float* dqkv,        // (B, T, 3C) +=
                float* delta,       // (B, NH, T) scratch of our kernels
                ConstAct dout,      // (B, T, C)
                ConstAct qkv,       // (B, T, 3C)
                ConstAct out,       // (B, T, C), the forward's
                const float* lse,   // (B, NH, T), the forward's
                int B, int T, int C, int NH);

 private:
  // Whether cuDNN runs this pass (backward: true) for this shape now; says the path once.
  bool use_cudnn(int B, int T, int C, int NH, bool backward);
  template <class T16>
  void cudnn_forward(Act out, float* lse, ConstAct qkv, int B, int T, int C, int NH);
  template <class T16>
  void cudnn_backward(float* dqkv, ConstAct dout, ConstAct qkv, ConstAct out, const float* lse,
                      int B, int T, int C, int NH);
  void flash_forward(Act out, float* lse, ConstAct qkv, int B, int T, int C, int NH);
  void flash_backward(float* dqkv, float* delta, ConstAct dout, ConstAct qkv, ConstAct out,
                      const float* lse, int B, int T, int C, int NH);
  void say_once(const std::string& message);

  cudaStream_t stream_;
  DeviceScratch& scratch_;
  int device_;
  Precision precision_ = Precision::FP32;
  // Made on the first reduced-precision call. A shared_ptr, whose deleter is bound where it is
  // made: a module built without cudnn-frontend never makes one and needs no CudnnAttention.
  std::shared_ptr<CudnnAttention> cudnn_;
  std::set<std::string> said_;
  long fallback_passes_ = 0;  // reduced-precision passes cuDNN refused; said at destruction
};

// One line for `singularity info`: the cudnn-frontend compiled in and what attention runs on.
std::string fused_attention_summary();

}  // namespace sg::cuda
