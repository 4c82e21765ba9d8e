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
// close to the CPU's). Descriptors, algorithms and workspace sizes are cached per shape and type.
//
// bf16 activations (train.precision bf16, docs/bf16.md): inp, out and dout stored in bf16. The
// descriptors x, y and w are then bf16 with fp32 compute (cuDNN's PSEUDO_BFLOAT16_CONFIG,
// tensor-op math), and what is rounded where:
//   - the weight: a bf16 one is the filter as `filter` wrote it (cuDNN's layout, made once a
//     step: docs/bf16.md) and is read as it is; an fp32 one (the master) is rounded to bf16 into
//     scratch per call, transposed in the same kernel where the layouts differ;
//   - out is the fp32 sum rounded to bf16 by cuDNN;
//   - cuDNN's legacy backward takes dx and dw in the type of the other operands (its supported
//     configurations have no fp32 output for bf16 inputs), so the input gradient is written in
//     bf16 into scratch and widened into the fp32 dinp (=) by a kernel of ours
//     (cast_from_16bit): dinp is the fp32 sum rounded once to bf16;
//   - the weight gradient of the call (one micro-batch) is written in bf16 into scratch and
//     added widened to the fp32 dweight (+=, filter_krsc_add_to_kcrs, 1x1 filters included):
//     rounded to bf16 before the fp32 accumulation over micro-batches, as PyTorch's autocast
//     gives a bf16 convolution's weight gradient.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <array>
#include <cstddef>
#include <map>

#include "kernels/conv2d.h"
#include "kernels/cuda/device_memory.h"
#include "tensor/act.h"

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

  // The filter in the layout and type the bf16 convolutions read (KRSC where the layouts
  // differ, else ours), rounded to bf16 from the fp32 weight (KCRS): the working copy the
  // model makes once a step and passes as a bf16 weight.
  void filter(Act out, const float* weight, const Conv2dShape& s);
  // inp and out (dout and inp) of one type, fp32 or bf16 (a mix is a RunError); the weight fp32
  // (KCRS), or with bf16 activations the bf16 copy `filter` made.
  void forward(Act out,         // (N,P,Q,K) =
               ConstAct inp,     // (N,H,W,C)
               ConstAct weight,  // (K,C/groups,R,S)
               const Conv2dShape& s);
  void backward(float* dinp,      // (N,H,W,C) = or null
                float* dweight,   // (K,C/groups,R,S) +=
                ConstAct dout,    // (N,P,Q,K)
                ConstAct inp,     // (N,H,W,C)
                ConstAct weight,  // (K,C/groups,R,S)
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
  // How a plan computes: fp32 with FMA math, fp32 with tensor cores allowed (reduced precision),
  // or bf16 tensors.
  enum class Mode : int { kFp32 = 0, kReduced = 1, kBf16 = 2 };
  using PlanKey = std::array<int, 11>;  // the shape's fields and the mode
  Plan& plan_for(const Conv2dShape& s, Mode mode);
  void make_plan(Plan& plan, const Conv2dShape& s, Mode mode);
  Mode mode_for(bool bf16) const {
    return bf16 ? Mode::kBf16 : reduced_ ? Mode::kReduced : Mode::kFp32;
  }
  void backward_bf16(float* dinp, float* dweight, ConstAct dout, ConstAct inp, ConstAct weight,
                     const Conv2dShape& s);
  // cuDNN's two backward passes of a plan, in its types: dx = conv^T(dy, filter) (=), and
  // dw = beta * dw + conv_w(x, dy).
  void backward_data(const Plan& plan, const void* filter, const void* dy, void* dx,
                     void* workspace);
  void backward_filter(const Plan& plan, const void* x, const void* dy, float beta, void* dw,
                       void* workspace);

  cudaStream_t stream_;
  DeviceScratch& scratch_;
  cudnnHandle_t handle_ = nullptr;
  bool reduced_ = false;
  std::map<PlanKey, Plan> plans_;
};

}  // namespace sg::cuda
