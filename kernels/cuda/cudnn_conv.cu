// 2-D convolutions through cuDNN; see cudnn_conv.h for the layouts and the algorithm choice.
#include "kernels/cuda/cudnn_conv.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/filter_layout.cuh"
#include "util/error.h"

namespace sg::cuda {
namespace {

std::string shape_text(const Conv2dShape& s) {
  return "convolution N=" + std::to_string(s.N) + " H=" + std::to_string(s.H) +
         " W=" + std::to_string(s.W) + " C=" + std::to_string(s.C) + " K=" + std::to_string(s.K) +
         " " + std::to_string(s.R) + "x" + std::to_string(s.S) + " stride " +
         std::to_string(s.stride) + " pad " + std::to_string(s.pad) + " groups " +
         std::to_string(s.groups);
}

// The first usable algorithm of cuDNN's heuristic ranking: it ran the heuristic successfully,
// is deterministic, uses FMA math in fp32 mode (tensor-core math would round inputs to TF32),
// and cuDNN reports a workspace size for it with the descriptor's math type set. First among
// those needing at most the preferred workspace, else the first at all.
// query(algo, &bytes) asks cuDNN for an algorithm's workspace; it returns cuDNN's status.
template <class Perf, class Algo, class Query>
bool choose_algorithm(const std::vector<Perf>& ranked, bool reduced,
                      cudnnConvolutionDescriptor_t desc, Query query, Algo* algo,
                      size_t* workspace) {
  for (const bool within_preferred : {true, false}) {
    for (const Perf& perf : ranked) {
      if (perf.status != CUDNN_STATUS_SUCCESS || perf.determinism != CUDNN_DETERMINISTIC) continue;
      if (within_preferred && perf.memory > CudnnConv::kPreferredWorkspaceBytes) continue;
      const bool tensor_ops = perf.mathType == CUDNN_TENSOR_OP_MATH ||
                              perf.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
      if (!reduced && tensor_ops) continue;
      SG_CUDNN_CHECK(cudnnSetConvolutionMathType(desc, reduced ? perf.mathType : CUDNN_FMA_MATH));
      size_t bytes = 0;
      if (query(perf.algo, &bytes) != CUDNN_STATUS_SUCCESS) continue;  // not with this math
      *algo = perf.algo;
      *workspace = bytes;
      return true;
    }
  }
  return false;
}

// Frees what a plan holds (null descriptors are skipped); errors are ignored, as at exit.
void release(cudnnTensorDescriptor_t x, cudnnTensorDescriptor_t y, cudnnFilterDescriptor_t w,
             std::initializer_list<cudnnConvolutionDescriptor_t> convolutions) noexcept {
  if (x != nullptr) cudnnDestroyTensorDescriptor(x);
  if (y != nullptr) cudnnDestroyTensorDescriptor(y);
  if (w != nullptr) cudnnDestroyFilterDescriptor(w);
  for (cudnnConvolutionDescriptor_t c : convolutions) {
    if (c != nullptr) cudnnDestroyConvolutionDescriptor(c);
  }
}

[[noreturn]] void fail_no_algorithm(const char* direction, const Conv2dShape& s, bool reduced) {
  throw RunError(std::string("cuDNN offers no deterministic ") + direction + " algorithm" +
                 (reduced ? "" : " with FMA (fp32) math") + " for the " + shape_text(s) +
                 " (NHWC, fp32); this convolution cannot run on the cuda backend: use "
                 "devices.backend: cpu, or change the layer's shape");
}

}  // namespace

CudnnConv::CudnnConv(cudaStream_t stream, DeviceScratch& scratch)
    : stream_(stream), scratch_(scratch) {
  SG_CUDNN_CHECK(cudnnCreate(&handle_));
  const cudnnStatus_t status = cudnnSetStream(handle_, stream_);
  if (status != CUDNN_STATUS_SUCCESS) {
    cudnnDestroy(handle_);
    SG_CUDNN_CHECK(status);
  }
}

CudnnConv::~CudnnConv() {
  for (auto& [key, plan] : plans_) {
    release(plan.x, plan.y, plan.w, {plan.forward, plan.backward_data, plan.backward_filter});
  }
  if (handle_ != nullptr) cudnnDestroy(handle_);
}

CudnnConv::Plan& CudnnConv::plan_for(const Conv2dShape& s) {
  const PlanKey key{s.N, s.H,      s.W,   s.C,      s.K,          s.R,
                    s.S, s.stride, s.pad, s.groups, reduced_ ? 1 : 0};
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  // Registered first so that the destructor frees whatever a failing make_plan created; a plan
  // that failed is removed, so a later call does not find it half made.
  Plan& plan = plans_.emplace(key, Plan{}).first->second;
  try {
    make_plan(plan, s, reduced_);
  } catch (...) {
    release(plan.x, plan.y, plan.w, {plan.forward, plan.backward_data, plan.backward_filter});
    plans_.erase(key);
    throw;
  }
  return plan;
}

void CudnnConv::make_plan(Plan& plan, const Conv2dShape& s, bool reduced) {
  if (s.groups <= 0 || s.C % s.groups != 0 || s.K % s.groups != 0 || s.stride <= 0 ||
      s.pad < 0 || s.P() <= 0 || s.Q() <= 0) {
    throw RunError("invalid " + shape_text(s) +
                   ": groups must divide C and K, and the output must not be empty");
  }
  const int Cg = s.C / s.groups;
  plan.transpose = s.R * s.S > 1 && Cg > 1;
  SG_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan.x));
  SG_CUDNN_CHECK(cudnnCreateTensorDescriptor(&plan.y));
  SG_CUDNN_CHECK(cudnnCreateFilterDescriptor(&plan.w));
  SG_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan.x, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, s.N, s.C,
                                            s.H, s.W));
  SG_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan.y, CUDNN_TENSOR_NHWC, CUDNN_DATA_FLOAT, s.N, s.K,
                                            s.P(), s.Q()));
  SG_CUDNN_CHECK(
      cudnnSetFilter4dDescriptor(plan.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, s.K, Cg, s.R, s.S));
  for (cudnnConvolutionDescriptor_t* desc :
       {&plan.forward, &plan.backward_data, &plan.backward_filter}) {
    SG_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(desc));
    SG_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(*desc, s.pad, s.pad, s.stride, s.stride, 1, 1,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    SG_CUDNN_CHECK(cudnnSetConvolutionGroupCount(*desc, s.groups));
    SG_CUDNN_CHECK(cudnnSetConvolutionMathType(*desc, reduced ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION
                                                              : CUDNN_FMA_MATH));
  }
  int n = 0, k = 0, p = 0, q = 0;
  SG_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan.forward, plan.x, plan.w, &n, &k, &p, &q));
  if (n != s.N || k != s.K || p != s.P() || q != s.Q()) {
    throw RunError("cuDNN computes a " + std::to_string(p) + "x" + std::to_string(q) +
                   " output for the " + shape_text(s) + ", not the " + std::to_string(s.P()) +
                   "x" + std::to_string(s.Q()) + " of kernels/conv2d.h");
  }

  int max_count = 0, returned = 0;
  SG_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle_, &max_count));
  std::vector<cudnnConvolutionFwdAlgoPerf_t> forward(static_cast<size_t>(max_count));
  SG_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle_, plan.x, plan.w, plan.forward,
                                                        plan.y, max_count, &returned,
                                                        forward.data()));
  forward.resize(static_cast<size_t>(returned));
  const auto forward_query = [&](cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
    return cudnnGetConvolutionForwardWorkspaceSize(handle_, plan.x, plan.w, plan.forward, plan.y,
                                                   algo, bytes);
  };
  if (!choose_algorithm(forward, reduced, plan.forward, forward_query, &plan.forward_algo,
                        &plan.forward_workspace)) {
    fail_no_algorithm("forward", s, reduced);
  }

  SG_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle_, &max_count));
  std::vector<cudnnConvolutionBwdDataAlgoPerf_t> data(static_cast<size_t>(max_count));
  SG_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(
      handle_, plan.w, plan.y, plan.backward_data, plan.x, max_count, &returned, data.data()));
  data.resize(static_cast<size_t>(returned));
  const auto data_query = [&](cudnnConvolutionBwdDataAlgo_t algo, size_t* bytes) {
    return cudnnGetConvolutionBackwardDataWorkspaceSize(handle_, plan.w, plan.y,
                                                        plan.backward_data, plan.x, algo, bytes);
  };
  if (!choose_algorithm(data, reduced, plan.backward_data, data_query, &plan.data_algo,
                        &plan.data_workspace)) {
    fail_no_algorithm("backward-data", s, reduced);
  }

  SG_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle_, &max_count));
  std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> filter(static_cast<size_t>(max_count));
  SG_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
      handle_, plan.x, plan.y, plan.backward_filter, plan.w, max_count, &returned, filter.data()));
  filter.resize(static_cast<size_t>(returned));
  const auto filter_query = [&](cudnnConvolutionBwdFilterAlgo_t algo, size_t* bytes) {
    return cudnnGetConvolutionBackwardFilterWorkspaceSize(handle_, plan.x, plan.y,
                                                          plan.backward_filter, plan.w, algo, bytes);
  };
  if (!choose_algorithm(filter, reduced, plan.backward_filter, filter_query, &plan.filter_algo,
                        &plan.filter_workspace)) {
    fail_no_algorithm("backward-filter", s, reduced);
  }
}

void CudnnConv::forward(float* out, const float* inp, const float* weight, const Conv2dShape& s) {
  if (s.N <= 0) return;
  const Plan& plan = plan_for(s);
  const int Cg = s.C / s.groups;
  ScratchLayout layout;
  const size_t filter_at = plan.transpose ? layout.add(sizeof(float) * s.weight_size()) : 0;
  const size_t workspace_at = layout.add(plan.forward_workspace);
  unsigned char* scratch = scratch_.get(layout.bytes(), stream_);
  const float* filter = weight;
  if (plan.transpose) {
    float* krsc = reinterpret_cast<float*>(scratch + filter_at);
    filter_kcrs_to_krsc(krsc, weight, s.K, Cg, s.R * s.S, stream_);
    filter = krsc;
  }
  const float alpha = 1.0f, beta = 0.0f;
  SG_CUDNN_CHECK(cudnnConvolutionForward(handle_, &alpha, plan.x, inp, plan.w, filter,
                                         plan.forward, plan.forward_algo, scratch + workspace_at,
                                         plan.forward_workspace, &beta, plan.y, out));
}

void CudnnConv::backward(float* dinp, float* dweight, const float* dout, const float* inp,
                         const float* weight, const Conv2dShape& s) {
  if (s.N <= 0) return;
  const Plan& plan = plan_for(s);
  const int Cg = s.C / s.groups, RS = s.R * s.S;
  const size_t filter_bytes = sizeof(float) * s.weight_size();
  ScratchLayout layout;
  const bool transpose_weight = plan.transpose && dinp != nullptr;
  const size_t filter_at = transpose_weight ? layout.add(filter_bytes) : 0;
  const size_t gradient_at = plan.transpose ? layout.add(filter_bytes) : 0;
  const size_t workspace_bytes = std::max(dinp != nullptr ? plan.data_workspace : size_t{0},
                                          plan.filter_workspace);
  const size_t workspace_at = layout.add(workspace_bytes);
  unsigned char* scratch = scratch_.get(layout.bytes(), stream_);
  const float one = 1.0f, zero = 0.0f;
  if (dinp != nullptr) {
    const float* filter = weight;
    if (transpose_weight) {
      float* krsc = reinterpret_cast<float*>(scratch + filter_at);
      filter_kcrs_to_krsc(krsc, weight, s.K, Cg, RS, stream_);
      filter = krsc;
    }
    SG_CUDNN_CHECK(cudnnConvolutionBackwardData(handle_, &one, plan.w, filter, plan.y, dout,
                                                plan.backward_data, plan.data_algo,
                                                scratch + workspace_at, plan.data_workspace,
                                                &zero, plan.x, dinp));
  }
  if (plan.transpose) {
    // The gradient in cuDNN's layout (=), then added to ours transposed.
    float* gradient = reinterpret_cast<float*>(scratch + gradient_at);
    SG_CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle_, &one, plan.x, inp, plan.y, dout,
                                                  plan.backward_filter, plan.filter_algo,
                                                  scratch + workspace_at, plan.filter_workspace,
                                                  &zero, plan.w, gradient));
    filter_krsc_add_to_kcrs(dweight, gradient, s.K, Cg, RS, stream_);
  } else {
    // Same bytes in both layouts: cuDNN accumulates into ours (beta = 1).
    SG_CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle_, &one, plan.x, inp, plan.y, dout,
                                                  plan.backward_filter, plan.filter_algo,
                                                  scratch + workspace_at, plan.filter_workspace,
                                                  &one, plan.w, dweight));
  }
}

}  // namespace sg::cuda
