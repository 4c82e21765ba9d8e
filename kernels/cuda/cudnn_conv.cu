// 2-D convolutions through cuDNN; see cudnn_conv.h for the layouts and the algorithm choice.
#include "kernels/cuda/cudnn_conv.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <vector>

#include "kernels/cuda/casts.cuh"
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

[[noreturn]] void fail_no_algorithm(const char* direction, const Conv2dShape& s, bool reduced,
                                    bool bf16) {
  throw RunError(std::string("cuDNN offers no deterministic ") + direction + " algorithm" +
                 (reduced ? "" : " with FMA (fp32) math") + " for the " + shape_text(s) +
                 (bf16 ? " (NHWC, bf16)" : " (NHWC, fp32)") +
                 "; this convolution cannot run on the cuda backend: use "
                 "devices.backend: cpu, or change the layer's shape");
}

// The activations of one call share one type (src/backend/backend.h): Act::b16 / f32 refuse a
// mix with RunError's message.
const __nv_bfloat16* bf16_data(ConstAct a) {
  return reinterpret_cast<const __nv_bfloat16*>(a.b16());
}
__nv_bfloat16* bf16_data(Act a) { return reinterpret_cast<__nv_bfloat16*>(a.b16()); }

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

CudnnConv::Plan& CudnnConv::plan_for(const Conv2dShape& s, Mode mode) {
  const PlanKey key{s.N, s.H,      s.W,   s.C,      s.K,          s.R,
                    s.S, s.stride, s.pad, s.groups, static_cast<int>(mode)};
  if (auto it = plans_.find(key); it != plans_.end()) return it->second;
  // Registered first so that the destructor frees whatever a failing make_plan created; a plan
  // that failed is removed, so a later call does not find it half made.
  Plan& plan = plans_.emplace(key, Plan{}).first->second;
  try {
    make_plan(plan, s, mode);
  } catch (...) {
    release(plan.x, plan.y, plan.w, {plan.forward, plan.backward_data, plan.backward_filter});
    plans_.erase(key);
    throw;
  }
  return plan;
}

void CudnnConv::make_plan(Plan& plan, const Conv2dShape& s, Mode mode) {
  // bf16 tensors take tensor-op math (fp32 sums); the heuristics' math type is used as in the
  // reduced mode.
  const bool bf16 = mode == Mode::kBf16, reduced = mode != Mode::kFp32;
  const cudnnDataType_t type = bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
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
  SG_CUDNN_CHECK(cudnnSetTensor4dDescriptor(plan.x, CUDNN_TENSOR_NHWC, type, s.N, s.C, s.H, s.W));
  SG_CUDNN_CHECK(
      cudnnSetTensor4dDescriptor(plan.y, CUDNN_TENSOR_NHWC, type, s.N, s.K, s.P(), s.Q()));
  SG_CUDNN_CHECK(cudnnSetFilter4dDescriptor(plan.w, type, CUDNN_TENSOR_NHWC, s.K, Cg, s.R, s.S));
  for (cudnnConvolutionDescriptor_t* desc :
       {&plan.forward, &plan.backward_data, &plan.backward_filter}) {
    SG_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(desc));
    SG_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(*desc, s.pad, s.pad, s.stride, s.stride, 1, 1,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    SG_CUDNN_CHECK(cudnnSetConvolutionGroupCount(*desc, s.groups));
    SG_CUDNN_CHECK(cudnnSetConvolutionMathType(
        *desc, bf16 ? CUDNN_TENSOR_OP_MATH
                    : reduced ? CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION : CUDNN_FMA_MATH));
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
    fail_no_algorithm("forward", s, reduced, bf16);
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
    fail_no_algorithm("backward-data", s, reduced, bf16);
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
    fail_no_algorithm("backward-filter", s, reduced, bf16);
  }
}

void CudnnConv::filter(Act out, const float* weight, const Conv2dShape& s) {
  // KCRS -> KRSC is the identity where R*S or C/groups is 1: one kernel for every filter.
  filter_kcrs_to_krsc(bf16_data(out), weight, s.K, s.C / s.groups, s.R * s.S, stream_);
}

void CudnnConv::forward(Act out, ConstAct inp, ConstAct weight, const Conv2dShape& s) {
  if (s.N <= 0) return;
  const bool bf16 = inp.bf16();
  // Refused before any work when out's type is not inp's.
  const void* x = bf16 ? static_cast<const void*>(bf16_data(inp)) : inp.f32();
  void* y = bf16 ? static_cast<void*>(bf16_data(out)) : out.f32();
  const Plan& plan = plan_for(s, mode_for(bf16));
  const int Cg = s.C / s.groups, RS = s.R * s.S;
  // The filter in cuDNN's layout and the plan's type: a bf16 weight (filter's copy) and an fp32
  // one in the same bytes as it is, else one kernel into scratch (transposed, rounded, or both).
  const bool filter_copy = bf16 ? !weight.bf16() : plan.transpose;
  const size_t element = bf16 ? sizeof(__nv_bfloat16) : sizeof(float);
  ScratchLayout layout;
  const size_t filter_at = filter_copy ? layout.add(element * s.weight_size()) : 0;
  const size_t workspace_at = layout.add(plan.forward_workspace);
  unsigned char* scratch = scratch_.get(layout.bytes(), stream_);
  const void* filter = weight.data;
  if (filter_copy) {
    void* copy = scratch + filter_at;
    if (!bf16) {
      filter_kcrs_to_krsc(static_cast<float*>(copy), weight.f32(), s.K, Cg, RS, stream_);
    } else {
      filter_kcrs_to_krsc(static_cast<__nv_bfloat16*>(copy), weight.f32(), s.K, Cg, RS, stream_);
    }
    filter = copy;
  } else if (!bf16) {
    weight.f32();  // fp32 activations take an fp32 weight (refuses a bf16 one)
  }
  const float alpha = 1.0f, beta = 0.0f;  // fp32 scaling factors for bf16 data too
  SG_CUDNN_CHECK(cudnnConvolutionForward(handle_, &alpha, plan.x, x, plan.w, filter, plan.forward,
                                         plan.forward_algo, scratch + workspace_at,
                                         plan.forward_workspace, &beta, plan.y, y));
}

void CudnnConv::backward(float* dinp, float* dweight, ConstAct dout, ConstAct inp,
                         ConstAct weight, const Conv2dShape& s) {
  if (s.N <= 0) return;
  if (inp.bf16()) return backward_bf16(dinp, dweight, dout, inp, weight, s);
  const float* dy = dout.f32();
  const float* x = inp.f32();
  const Plan& plan = plan_for(s, mode_for(false));
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
  if (dinp != nullptr) {
    const float* filter = weight.f32();
    if (transpose_weight) {
      float* krsc = reinterpret_cast<float*>(scratch + filter_at);
      filter_kcrs_to_krsc(krsc, filter, s.K, Cg, RS, stream_);
      filter = krsc;
    }
    backward_data(plan, filter, dy, dinp, scratch + workspace_at);
  }
  if (plan.transpose) {
    // The gradient in cuDNN's layout (=), then added to ours transposed.
    float* gradient = reinterpret_cast<float*>(scratch + gradient_at);
    backward_filter(plan, x, dy, 0.0f, gradient, scratch + workspace_at);
    filter_krsc_add_to_kcrs(dweight, gradient, s.K, Cg, RS, stream_);
  } else {
    // Same bytes in both layouts: cuDNN accumulates into ours (beta = 1).
    backward_filter(plan, x, dy, 1.0f, dweight, scratch + workspace_at);
  }
}

void CudnnConv::backward_data(const Plan& plan, const void* filter, const void* dy, void* dx,
                              void* workspace) {
  const float one = 1.0f, zero = 0.0f;  // fp32 scaling factors for bf16 data too
  SG_CUDNN_CHECK(cudnnConvolutionBackwardData(handle_, &one, plan.w, filter, plan.y, dy,
                                              plan.backward_data, plan.data_algo, workspace,
                                              plan.data_workspace, &zero, plan.x, dx));
}

void CudnnConv::backward_filter(const Plan& plan, const void* x, const void* dy, float beta,
                                void* dw, void* workspace) {
  const float one = 1.0f;
  SG_CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle_, &one, plan.x, x, plan.y, dy,
                                                plan.backward_filter, plan.filter_algo, workspace,
                                                plan.filter_workspace, &beta, plan.w, dw));
}

// bf16 activations: cuDNN's backward writes dx and dw in bf16 (cudnn_conv.h), into scratch; our
// kernels widen them into the fp32 dinp (=) and add them into the fp32 dweight (+=).
void CudnnConv::backward_bf16(float* dinp, float* dweight, ConstAct dout, ConstAct inp,
                              ConstAct weight, const Conv2dShape& s) {
  const __nv_bfloat16* dy = bf16_data(dout);
  const __nv_bfloat16* x = bf16_data(inp);
  const Plan& plan = plan_for(s, Mode::kBf16);
  const int Cg = s.C / s.groups, RS = s.R * s.S;
  const size_t filter_bytes = sizeof(__nv_bfloat16) * s.weight_size();
  const bool filter_copy = dinp != nullptr && !weight.bf16();  // else filter's copy
  ScratchLayout layout;
  const size_t filter_at = filter_copy ? layout.add(filter_bytes) : 0;
  const size_t dx_at = dinp != nullptr ? layout.add(sizeof(__nv_bfloat16) * s.in_size()) : 0;
  const size_t dw_at = layout.add(filter_bytes);
  const size_t workspace_bytes = std::max(dinp != nullptr ? plan.data_workspace : size_t{0},
                                          plan.filter_workspace);
  const size_t workspace_at = layout.add(workspace_bytes);
  unsigned char* scratch = scratch_.get(layout.bytes(), stream_);
  if (dinp != nullptr) {
    const void* filter = weight.data;
    if (filter_copy) {
      auto* copy = reinterpret_cast<__nv_bfloat16*>(scratch + filter_at);
      filter_kcrs_to_krsc(copy, weight.f32(), s.K, Cg, RS, stream_);
      filter = copy;
    }
    auto* dx = reinterpret_cast<__nv_bfloat16*>(scratch + dx_at);
    backward_data(plan, filter, dy, dx, scratch + workspace_at);
    cast_from_16bit(dinp, dx, s.in_size(), stream_);
  }
  auto* dw = reinterpret_cast<__nv_bfloat16*>(scratch + dw_at);
  backward_filter(plan, x, dy, 0.0f, dw, scratch + workspace_at);
  // In cuDNN's layout (K, R, S, C/groups); the same bytes as ours where R*S or C/groups is 1,
  // where the kernel's transposition is the identity.
  filter_krsc_add_to_kcrs(dweight, dw, s.K, Cg, RS, stream_);
}

}  // namespace sg::cuda
