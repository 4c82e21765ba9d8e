// The CUDA backend's attention: cuDNN's fused SDPA or our flash kernels; see attention_op.h.
#include "kernels/cuda/attention_op.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdio>
#include <string>

#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/casts.cuh"
#include "kernels/cuda/cuda_check.h"
#if SINGULARITY_CUDNN_SDPA
#include "kernels/cuda/cudnn_attention.h"
#endif
#include "util/error.h"

namespace sg::cuda {
namespace {

#if SINGULARITY_CUDNN_SDPA
constexpr bool kHaveCudnnSdpa = true;

std::string shape_text(int B, int T, int C, int NH) {
  return "B=" + std::to_string(B) + " T=" + std::to_string(T) + " NH=" + std::to_string(NH) +
         " HS=" + std::to_string(C / NH);
}

CudnnAttention::Shape cudnn_shape(int B, int T, int C, int NH, const std::string& precision) {
  return {B, T, NH, C / NH,
          precision == "bf16" ? CudnnAttention::Io::Bf16 : CudnnAttention::Io::Fp16};
}
#else
constexpr bool kHaveCudnnSdpa = false;
#endif

void require_heads_divide(int C, int NH) {
  if (NH <= 0 || C % NH != 0) {
    throw RunError("attention: C = " + std::to_string(C) + " is not a multiple of the " +
                   std::to_string(NH) + " heads");
  }
}

void require_flash_kernels_take(int C, int NH) {
  if (attention_supported(C, NH)) return;
  throw RunError(
      "attention head size " + std::to_string(C / NH) + " (C = " + std::to_string(C) + ", " +
      std::to_string(NH) + " heads) is above " + std::to_string(kMaxHeadSize) +
      ", the largest the CUDA flash-attention kernels take: raise model.n_head so that "
      "model.n_embd / model.n_head <= " + std::to_string(kMaxHeadSize) +
      (kHaveCudnnSdpa ? ", or use train.precision bf16 (cuDNN's fused attention takes head sizes "
                        "up to 128 in multiples of 8)"
                      : "") +
      ", or use devices.backend: cpu");
}

}  // namespace

AttentionOp::AttentionOp(cudaStream_t stream, DeviceScratch& scratch, int device)
    : stream_(stream), scratch_(scratch), device_(device) {}

AttentionOp::~AttentionOp() {
  if (fallback_passes_ > 0) {
    std::fprintf(stderr,
                 "cuda:%d: warning: %ld attention passes in %s ran on our flash kernels instead "
                 "of cuDNN's fused SDPA (the reason was printed at the first)\n",
                 device_, fallback_passes_, precision_.c_str());
  }
}

void AttentionOp::say_once(const std::string& message) {
  if (said_.insert(message).second) std::fprintf(stderr, "cuda:%d: %s\n", device_, message.c_str());
}

bool AttentionOp::use_cudnn(int B, int T, int C, int NH, bool backward) {
  if (precision_ == "fp32") {
    say_once("attention on our flash kernels (train.precision fp32; cuDNN's fused attention "
             "takes bf16 or fp16)");
    return false;
  }
#if SINGULARITY_CUDNN_SDPA
  const std::string pass = backward ? "attention backward" : "attention forward";
  if (cudnn_ == nullptr) cudnn_ = std::make_shared<CudnnAttention>(stream_);
  const auto which = backward ? CudnnAttention::Pass::Backward : CudnnAttention::Pass::Forward;
  std::string why_not;
  if (cudnn_->prepare(cudnn_shape(B, T, C, NH, precision_), which, &why_not)) {
    say_once(pass + " through cuDNN's fused SDPA (" + precision_ + ", cudnn-frontend " +
             CudnnAttention::frontend_version() + ")");
    return true;
  }
  // Loud: in reduced precision the fused path is the fast one, and a benchmark must not pass
  // silently without it (gpu-check fails on this line's absence of the SDPA one).
  ++fallback_passes_;
  say_once("warning: " + pass + " on our flash kernels, not cuDNN's fused SDPA, which does not "
           "take " + shape_text(B, T, C, NH) + " in " + precision_ + " (" + why_not + ")");
  return false;
#else
  (void)B, (void)T, (void)C, (void)NH, (void)backward;
  say_once("attention on our flash kernels (the CUDA module was built without cudnn-frontend, "
           "which scripts/setup installs; then reconfigure and rebuild)");
  return false;
#endif
}

void AttentionOp::forward(float* out, float* lse, const float* qkv, int B, int T, int C,
                          int NH) {
  require_heads_divide(C, NH);
  if (B <= 0 || T <= 0) return;
#if SINGULARITY_CUDNN_SDPA
  if (use_cudnn(B, T, C, NH, false)) {
    if (precision_ == "bf16") {
      cudnn_forward<__nv_bfloat16>(out, lse, qkv, B, T, C, NH);
    } else {
      cudnn_forward<__half>(out, lse, qkv, B, T, C, NH);
    }
    return;
  }
#else
  use_cudnn(B, T, C, NH, false);  // says which path, once
#endif
  require_flash_kernels_take(C, NH);
  attention_forward(out, lse, qkv, B, T, C, NH, stream_);
}

void AttentionOp::backward(float* dqkv, float* delta, const float* dout, const float* qkv,
                           const float* out, const float* lse, int B, int T, int C, int NH) {
  require_heads_divide(C, NH);
  if (B <= 0 || T <= 0) return;
#if SINGULARITY_CUDNN_SDPA
  if (use_cudnn(B, T, C, NH, true)) {
    if (precision_ == "bf16") {
      cudnn_backward<__nv_bfloat16>(dqkv, dout, qkv, out, lse, B, T, C, NH);
    } else {
      cudnn_backward<__half>(dqkv, dout, qkv, out, lse, B, T, C, NH);
    }
    return;
  }
#else
  use_cudnn(B, T, C, NH, true);
#endif
  require_flash_kernels_take(C, NH);
  attention_backward(dqkv, delta, dout, out, qkv, lse, B, T, C, NH, stream_);
}

#if SINGULARITY_CUDNN_SDPA

template <class T16>
void AttentionOp::cudnn_forward(float* out, float* lse, const float* qkv, int B, int T, int C,
                                int NH) {
  const CudnnAttention::Shape shape = cudnn_shape(B, T, C, NH, precision_);
  const long n_qkv = 3L * B * T * C, n_out = static_cast<long>(B) * T * C;
  const size_t workspace = cudnn_->workspace_bytes(shape, CudnnAttention::Pass::Forward);
  // One scratch request for the 16-bit copies and cuDNN's workspace (256-byte aligned each).
  ScratchLayout layout;
  const size_t qkv_at = layout.add(sizeof(T16) * static_cast<size_t>(n_qkv));
  const size_t out_at = layout.add(sizeof(T16) * static_cast<size_t>(n_out));
  const size_t workspace_at = layout.add(workspace);
  unsigned char* base = scratch_.get(layout.bytes(), stream_);
  auto* qkv16 = reinterpret_cast<T16*>(base + qkv_at);
  auto* out16 = reinterpret_cast<T16*>(base + out_at);
  cast_to_16bit(qkv16, qkv, n_qkv, stream_);
  cudnn_->forward(out16, lse, qkv16, workspace > 0 ? base + workspace_at : nullptr, shape);
  cast_from_16bit(out, out16, n_out, stream_);
}

template <class T16>
void AttentionOp::cudnn_backward(float* dqkv, const float* dout, const float* qkv,
                                 const float* out, const float* lse, int B, int T, int C,
                                 int NH) {
  const CudnnAttention::Shape shape = cudnn_shape(B, T, C, NH, precision_);
  const long n_qkv = 3L * B * T * C, n_out = static_cast<long>(B) * T * C;
  const size_t workspace = cudnn_->workspace_bytes(shape, CudnnAttention::Pass::Backward);
  ScratchLayout layout;
  const size_t qkv_at = layout.add(sizeof(T16) * static_cast<size_t>(n_qkv));
  const size_t out_at = layout.add(sizeof(T16) * static_cast<size_t>(n_out));
  const size_t dout_at = layout.add(sizeof(T16) * static_cast<size_t>(n_out));
  const size_t dqkv_at = layout.add(sizeof(T16) * static_cast<size_t>(n_qkv));
  const size_t workspace_at = layout.add(workspace);
  unsigned char* base = scratch_.get(layout.bytes(), stream_);
  auto* qkv16 = reinterpret_cast<T16*>(base + qkv_at);
  auto* out16 = reinterpret_cast<T16*>(base + out_at);
  auto* dout16 = reinterpret_cast<T16*>(base + dout_at);
  auto* dqkv16 = reinterpret_cast<T16*>(base + dqkv_at);
  // The forward's 16-bit out is recovered exactly: fp32 holds every 16-bit value.
  cast_to_16bit(qkv16, qkv, n_qkv, stream_);
  cast_to_16bit(out16, out, n_out, stream_);
  cast_to_16bit(dout16, dout, n_out, stream_);
  cudnn_->backward(dqkv16, dout16, qkv16, out16, lse,
                   workspace > 0 ? base + workspace_at : nullptr, shape);
  accumulate_16bit(dqkv, dqkv16, n_qkv, stream_);  // the contract's +=
}

#endif  // SINGULARITY_CUDNN_SDPA

std::string fused_attention_summary() {
#if SINGULARITY_CUDNN_SDPA
  return "cudnn-frontend " + CudnnAttention::frontend_version() +
         " (attention through cuDNN's fused SDPA in bf16/fp16" +
         (CudnnAttention::has_deterministic_backward()
              ? ", deterministic backward)"
              : "; backward on our flash kernels: no deterministic SDPA backward in this version)");
#else
  return "cudnn-frontend none (attention on our flash kernels; scripts/setup installs it)";
#endif
}

}  // namespace sg::cuda
