#pragma once
// Causal scaled-dot-product attention through cuDNN's fused flash attention (SDPA), described with
// the header-only cudnn-frontend graph API. Only cudnn_attention.cpp includes the frontend (a
// large template library), so this interface names none of its types; the module compiles that
// file only where meson found the headers (SINGULARITY_CUDNN_SDPA, docs/gpu.md).
//
// Our layout (llm.c's), in 16-bit floats (cuDNN's SDPA takes no fp32):
//   qkv  (B, T, 3C): q, k, v side by side, head h in channels [h*HS, (h+1)*HS) of each, C = NH*HS
//   out  (B, T, C)
//   stats (B, NH, T) fp32: each query's log-sum-exp of its scaled scores, max + ln(sum exp), the
//        same quantity our flash kernels keep (attention.cuh), so either path's backward can
//        follow either path's forward.
// Scale 1/sqrt(HS), causal (top-left diagonal), no dropout. The backward is cuDNN's deterministic
// algorithm (the backend promises bitwise repeatable results); a frontend without that option
// reports the backward unsupported, and the caller keeps its own kernels there.
//
// One graph per (shape, pass), built the first time it is asked for and cached, also when the
// build fails (the answer does not change for the process). Work runs on the stream given at
// construction; failures of CUDA, cuDNN or the frontend throw RunError naming the call and where.
#include <cuda_runtime.h>

#include <compare>
#include <cstddef>
#include <memory>
#include <string>

namespace sg::cuda {

class CudnnAttention {
 public:
  enum class Io { Bf16, Fp16 };  // the type of q, k, v, out and their gradients
  enum class Pass { Forward, Backward };
  struct Shape {
    int B = 0, T = 0, NH = 0, HS = 0;
    Io io = Io::Bf16;
    auto operator<=>(const Shape&) const = default;
  };

  explicit CudnnAttention(cudaStream_t stream);
  ~CudnnAttention();
  CudnnAttention(const CudnnAttention&) = delete;
  CudnnAttention& operator=(const CudnnAttention&) = delete;

  // Whether cuDNN runs this pass for this shape, building its graph the first time; when not,
  // *why_not says why (head size, the GPU, the cuDNN version: the frontend's own message).
  bool prepare(const Shape& s, Pass pass, std::string* why_not);
  // The device workspace the pass needs, in bytes (after prepare returned true).
  size_t workspace_bytes(const Shape& s, Pass pass) const;

  // out (=) and stats (=) from qkv. Pointers are device memory; 16-bit ones of the shape's io
  // type; `workspace` holds workspace_bytes(s, Forward) (may be null when that is 0).
  void forward(void* out, float* stats, const void* qkv, void* workspace, const Shape& s);
  // dqkv (=, every element written) from dout, with the forward's qkv, out and stats.
  void backward(void* dqkv, const void* dout, const void* qkv, const void* out,
                const float* stats, void* workspace, const Shape& s);

  // "1.32.0": the cudnn-frontend these graphs were compiled against.
  static std::string frontend_version();
  // Whether that frontend has the deterministic SDPA backward (without it, no backward here).
  static bool has_deterministic_backward();

 private:
  struct Graphs;  // the frontend's graphs per shape (cudnn_attention.cpp)
  cudaStream_t stream_;
  std::unique_ptr<Graphs> graphs_;
};

}  // namespace sg::cuda
