// The CUDA backend's attention: cuDNN's fused SDPA or our flash kernels; see attention_op.h.
#include "kernels/cuda/attention_op.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdio>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

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

CudnnAttention::Shape cudnn_shape(int B, int T, int C, int NH, Precision precision) {
  return {B, T, NH, C / NH,
          precision == Precision::BF16 ? CudnnAttention::Io::Bf16 : CudnnAttention::Io::Fp16};
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
                 device_, fallback_passes_, std::string(to_string(precision_)).c_str());
  }
}

void AttentionOp::say_once(const std::string& message) {
  if (said_.insert(message).second) std::fprintf(stderr, "cuda:%d: %s\n", device_, message.c_str());
}

bool AttentionOp::use_cudnn(int B, int T, int C, int NH, bool backward) {
  if (precision_ == Precision::FP32) {
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
    say_once(pass + " through cuDNN's fused SDPA (" + std::string(to_string(precision_)) + ", cudnn-frontend " +
             CudnnAttention::frontend_version() + ")");
    return true;
  }
  // Loud: in reduced precision the fused path is the fast one, and a benchmark must not pass
  // silently without it (gpu-check fails on this line's absence of the SDPA one).
  ++fallback_passes_;
  say_once("warning: " + pass + " on our flash kernels, not cuDNN's fused SDPA, which does not "
           "take " + shape_text(B, T, C, NH) + " in " + std::string(to_string(precision_)) + " (" + why_not + ")");
  return false;
#else
  (void)B, (void)T, (void)C, (void)NH, (void)backward;
  say_once("attention on our flash kernels (the CUDA module was built without cudnn-frontend, "
           "which scripts/setup installs; then reconfigure and rebuild)");
  return false;
#endif
}

void AttentionOp::forward(Act out, float* lse, ConstAct qkv, int B, int T, int C, int NH) {
  require_heads_divide(C, NH);
  if (B <= 0 || T <= 0) return;
#if SINGULARITY_CUDNN_SDPA
  if (use_cudnn(B, T, C, NH, false)) {
    if (precision_ == Precision::BF16) {
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
  flash_forward(out, lse, qkv, B, T, C, NH);
}

void AttentionOp::backward(float* dqkv, float* delta, ConstAct dout, ConstAct qkv, ConstAct out,
                           const float* lse, int B, int T, int C, int NH) {
  require_heads_divide(C, NH);
  if (B <= 0 || T <= 0) return;
#if SINGULARITY_CUDNN_SDPA
  if (use_cudnn(B, T, C, NH, true)) {
    if (precision_ == Precision::BF16) {
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
  flash_backward(dqkv, delta, dout, qkv, out, lse, B, T, C, NH);
}

namespace {

// The tensors of one call in the type a kernel multiplies (T: fp32 for our flash kernels, the
// 16-bit type for cuDNN): a tensor stored in that type as it is, any other cast into a copy in
// the backend's scratch (one request for all of them and an extra area, 256-byte aligned each).
// A copy of an output is written back by store().
template <class T>
class Staged {
 public:
  struct Tensor {
    const void* stored;  // the activation
    bool stored16;       // stored in bf16 (else fp32)
    long n;
  };
  Staged(DeviceScratch& scratch, cudaStream_t stream, std::initializer_list<Tensor> tensors,
         size_t extra_bytes)
      : stream_(stream), tensors_(tensors) {
    ScratchLayout layout;
    std::vector<size_t> at;
    for (const Tensor& t : tensors_) at.push_back(matches(t) ? 0 : layout.add(sizeof(T) * t.n));
    const size_t extra_at = layout.add(extra_bytes);
    unsigned char* base = scratch.get(layout.bytes(), stream);
    for (size_t i = 0; i < tensors_.size(); ++i) {
      ptrs_.push_back(matches(tensors_[i]) ? static_cast<T*>(const_cast<void*>(tensors_[i].stored))
                                           : reinterpret_cast<T*>(base + at[i]));
    }
    extra_ = extra_bytes > 0 ? base + extra_at : nullptr;
  }
  // Tensor i in T, for reading: cast into its copy first where it is not stored in T.
  const T* in(size_t i) {
    const Tensor& t = tensors_[i];
    if (!matches(t)) {
      if (t.stored16) {  // bf16 -> fp32
        require_float(t);
        cast_from_16bit(reinterpret_cast<float*>(ptrs_[i]),
                        static_cast<const __nv_bfloat16*>(t.stored), t.n, stream_);
      } else {
        cast_to_16bit(ptrs_[i], static_cast<const float*>(t.stored), t.n, stream_);
      }
    }
    return ptrs_[i];
  }
  // Tensor i in T, for writing (then store(i)).
  T* out(size_t i) { return ptrs_[i]; }
  // A written copy back into tensor i's storage.
  void store(size_t i) {
    const Tensor& t = tensors_[i];
    if (matches(t)) return;
    if (t.stored16) {  // fp32 copy -> bf16 storage
      require_float(t);
      cast_to_16bit(static_cast<__nv_bfloat16*>(const_cast<void*>(t.stored)),
                    reinterpret_cast<const float*>(ptrs_[i]), t.n, stream_);
    } else {
      cast_from_16bit(static_cast<float*>(const_cast<void*>(t.stored)), ptrs_[i], t.n, stream_);
    }
  }
  void* extra() const { return extra_; }

 private:
  // A bf16-stored tensor not in T is only ever multiplied in fp32 (bf16 storage comes with bf16
  // precision, never fp16's).
  static void require_float(const Tensor&) {
    if (!std::is_same_v<T, float>) {
      throw RunError("attention: a bf16-stored activation met fp16 arithmetic; run with "
                     "train.precision bf16");
    }
  }
  static bool matches(const Tensor& t) {
    return t.stored16 ? std::is_same_v<T, __nv_bfloat16> : std::is_same_v<T, float>;
  }
  cudaStream_t stream_;
  std::vector<Tensor> tensors_;
  std::vector<T*> ptrs_;
  void* extra_ = nullptr;
};

}  // namespace

void AttentionOp::flash_forward(Act out, float* lse, ConstAct qkv, int B, int T, int C, int NH) {
  const long n_qkv = 3L * B * T * C, n_out = static_cast<long>(B) * T * C;
  Staged<float> s(scratch_, stream_, {{qkv.data, qkv.bf16(), n_qkv}, {out.data, out.bf16(), n_out}},
                  0);
  attention_forward(s.out(1), lse, s.in(0), B, T, C, NH, stream_);
  s.store(1);
}

void AttentionOp::flash_backward(float* dqkv, float* delta, ConstAct dout, ConstAct qkv,
                                 ConstAct out, const float* lse, int B, int T, int C, int NH) {
  const long n_qkv = 3L * B * T * C, n_out = static_cast<long>(B) * T * C;
  Staged<float> s(scratch_, stream_,
                  {{dout.data, dout.bf16(), n_out}, {qkv.data, qkv.bf16(), n_qkv},
                   {out.data, out.bf16(), n_out}},
                  0);
  const float* dout32 = s.in(0);
  const float* qkv32 = s.in(1);
  attention_backward(dqkv, delta, dout32, s.in(2), qkv32, lse, B, T, C, NH, stream_);
}

#if SINGULARITY_CUDNN_SDPA

template <class T16>
void AttentionOp::cudnn_forward(Act out, float* lse, ConstAct qkv, int B, int T, int C, int NH) {
  const CudnnAttention::Shape shape = cudnn_shape(B, T, C, NH, precision_);
  const long n_qkv = 3L * B * T * C, n_out = static_cast<long>(B) * T * C;
  const size_t workspace = cudnn_->workspace_bytes(shape, CudnnAttention::Pass::Forward);
  Staged<T16> s(scratch_, stream_, {{qkv.data, qkv.bf16(), n_qkv}, {out.data, out.bf16(), n_out}},
                workspace);
  cudnn_->forward(s.out(1), lse, s.in(0), s.extra(), shape);
  s.store(1);
}

template <class T16>
void AttentionOp::cudnn_backward(float* dqkv, ConstAct dout, ConstAct qkv, ConstAct out,
                                 const float* lse, int B, int T, int C, int NH) {
  const CudnnAttention::Shape shape = cudnn_shape(B, T, C, NH, precision_);
  const long n_qkv = 3L * B * T * C, n_out = static_cast<long>(B) * T * C;
  const size_t workspace = cudnn_->workspace_bytes(shape, CudnnAttention::Pass::Backward);
  // dqkv16: cuDNN's gradients, added into the fp32 dqkv (the contract's +=).
  Staged<T16> s(scratch_, stream_,
                {{qkv.data, qkv.bf16(), n_qkv},
                 {out.data, out.bf16(), n_out},
                 {dout.data, dout.bf16(), n_out},
                 {dqkv, false, n_qkv}},
                workspace);
  // The forward's 16-bit out is recovered exactly from an fp32 one: fp32 holds every 16-bit value.
  const T16* qkv16 = s.in(0);
  const T16* out16 = s.in(1);
  const T16* dout16 = s.in(2);
  T16* dqkv16 = s.out(3);
  cudnn_->backward(dqkv16, dout16, qkv16, out16, lse, s.extra(), shape);
  accumulate_16bit(dqkv, dqkv16, n_qkv, stream_);
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
