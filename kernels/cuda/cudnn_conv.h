#pragma once
// 2-D convolutions through cuDNN's convolution API (contract: kernels/conv2d.h): activations NHWC,
// our weights (K, C/groups, R, S) as PyTorch stores them. cuDNN's NHWC convolutions take NHWC
// filters (K, R, S, C/groups), so a filter is transposed into scratch for each call and its
// gradient transposed back with += (filter_layout.cuh); 1x1 and depthwise filters are the same
// bytes in both layouts and go straight through.
//   forward:  out = conv(inp, weight)                     (=)
//   backward: dinp = conv^T(dout, weight) when not null   (=, as the CPU's)
//             dweight += conv_w(inp, dout)                (+=)
// Algorithms come from cuDNN's heuristics, restricted to deterministic ones (the backward's
// ALGO_0/ALGO_3 add with atomics) and, in fp32 mode, to FMA math (no TF32 tensor cores: results
// close to the CPU's). Descriptors, algorithms and workspace sizes are cached per shape.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <array>
#include <cstddef>
#include <map>

#include "kernels/conv2d.h"
#include "kernels/cuda/device_memory.h"

namespace sg::cuda {

class CudnnConv {
 public:
  // Work is enqueued on `stream`; `scratch` (shared with the other ops on that stream) holds the
  // transposed filters and cuDNN's workspace.
  CudnnConv(cudaStream_t stream, DeviceScratch& scratch);
  ~CudnnConv();
  CudnnConv(const CudnnConv&) = delete;
  CudnnConv& operator=(const CudnnConv&) = delete;

  // Reduced precision (train.precision bf16): cuDNN may use tensor cores on down-converted inputs.
  void set_reduced_precision(bool on) { reduced_ = on; }

  void forward(float* out,           // (N,P,Q,K) =
               const float* inp,     // (N,H,W,C)
               const float* weight,  // (K,C/groups,R,S)
               const Conv2dShape& s);
  void backward(float* dinp,          // (N,H,W,C) = or null
                float* dweight,       // (K,C/groups,R,S) +=
                const float* dout,    // (N,P,Q,K)
                const float* inp,     // (N,H,W,C)
                const float* weight,  // (K,C/groups,R,S)
                const Conv2dShape& s);

  // Workspaces above this are avoided when a deterministic algorithm needs less.
  static constexpr size_t kPreferredWorkspaceBytes = size_t{256} << 20;

 private:
  struct Plan {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    // One convolution descriptor per direction: each carries its algorithm's math type.
    cudnnConvolutionDescriptor_t forward = nullptr, backward_data = nullptr,
                                 backward_filter = nullptr;
    cudnnConvolutionFwdAlgo_t forward_algo{};
    cudnnConvolutionBwdDataAlgo_t data_algo{};
    cudnnConvolutionBwdFilterAlgo_t filter_algo{};
    size_t forward_workspace = 0, data_workspace = 0, filter_workspace = 0;
    bool transpose = false;  // the filter layouts differ (R*S > 1 and C/groups > 1)
  };
  using PlanKey = std::array<int, 11>;  // the shape's fields and the precision mode
  Plan& plan_for(const Conv2dShape& s);
  void make_plan(Plan& plan, const Conv2dShape& s, bool reduced);

  cudaStream_t stream_;
  DeviceScratch& scratch_;
  cudnnHandle_t handle_ = nullptr;
  bool reduced_ = false;
  std::map<PlanKey, Plan> plans_;
};

}  // namespace sg::cuda
