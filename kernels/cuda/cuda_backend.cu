// The CUDA backend: every member of backend.h on one GPU. See cuda_backend.h for the streams;
// the ops forward to our kernels (kernels/cuda/*.cuh), cuBLASLt and cuDNN.
#include "kernels/cuda/cuda_backend.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <type_traits>
#include <vector>

#include "backend/device.h"
#include "kernels/cuda/attention_op.h"
#include "kernels/cuda/backend_kernels.cuh"
#include "kernels/cuda/batchnorm.cuh"
#include "kernels/cuda/convnet.cuh"
#include "kernels/cuda/crossentropy.cuh"
#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cudnn_conv.h"
#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/llama_ops.cuh"
#include "kernels/cuda/encoder.cuh"
#include "kernels/cuda/layernorm.cuh"
#include "kernels/cuda/op_timer.h"
#include "kernels/cuda/optimizer.cuh"
#include "kernels/cuda/pool.cuh"
#include "tensor/dtype.h"
#include "util/error.h"

namespace sg {
namespace {

using cuda::ScratchLayout;

// data[0:n] = value: one cudaMemsetAsync when the element is one repeated byte (zeros, -1),
// else our pattern fill of the element's width.
template <class T>
void fill_elements(void* data, size_t n, T value, cudaStream_t stream) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  bool one_byte = true;
  for (size_t i = 1; i < sizeof(T); ++i) one_byte = one_byte && bytes[i] == bytes[0];
  if (one_byte) {
    SG_CUDA_CHECK(cudaMemsetAsync(data, bytes[0], n * sizeof(T), stream));
    return;
  }
  const long count = static_cast<long>(n);
  if constexpr (sizeof(T) == 1) {
    // one byte is always "one repeated byte": handled above
  } else if constexpr (sizeof(T) == 2) {
    uint16_t bits;
    std::memcpy(&bits, bytes, 2);
    cuda::fill_pattern(static_cast<uint16_t*>(data), bits, count, stream);
  } else if constexpr (sizeof(T) == 4) {
    uint32_t bits;
    std::memcpy(&bits, bytes, 4);
    cuda::fill_pattern(static_cast<uint32_t*>(data), bits, count, stream);
  } else {
    static_assert(sizeof(T) == 8, "elements of 1, 2, 4 or 8 bytes");
    uint64_t bits;
    std::memcpy(&bits, bytes, 8);
    cuda::fill_pattern(static_cast<uint64_t*>(data), bits, count, stream);
  }
}

// A bf16-stored activation as CUDA's type (docs/bf16.md).
__nv_bfloat16* bf16_of(Act a) { return reinterpret_cast<__nv_bfloat16*>(a.b16()); }
const __nv_bfloat16* bf16_of(ConstAct a) {
  return reinterpret_cast<const __nv_bfloat16*>(a.b16());
}

// An activation as T* (float or __nv_bfloat16): the convolutional ops dispatch on their first
// activation's type, and Act::f32 / b16 refuse the others when they do not share it
// (src/backend/backend.h: one call's activations share one type).
template <class T>
T* act_as(Act a) {
  if constexpr (std::is_same_v<T, float>) {
    return a.f32();
  } else {
    return bf16_of(a);
  }
}
template <class T>
const T* act_as(ConstAct a) {
  if constexpr (std::is_same_v<T, float>) {
    return a.f32();
  } else {
    return bf16_of(a);
  }
}
// f(float{}) or f(__nv_bfloat16{}) as `first` is stored.
template <class F>
void with_act_type(ConstAct first, F&& f) {
  if (first.bf16()) {
    f(__nv_bfloat16{});
  } else {
    f(float{});
  }
}

bool ranges_overlap(const void* a, const void* b, size_t bytes) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return x < y + bytes && y < x + bytes;
}

}  // namespace

CudaBackend::CudaBackend(int device) : device_(device) {
  SG_CUDA_CHECK(cudaSetDevice(device_));
  try {
    // Non-blocking streams: no implicit ordering with the legacy default stream other libraries
    // may use. The comm stream has the highest priority, so a collective that overlaps with
    // compute starts as soon as its inputs are ready.
    int lowest = 0, highest = 0;
    SG_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&lowest, &highest));
    SG_CUDA_CHECK(cudaStreamCreateWithPriority(&compute_, cudaStreamNonBlocking, lowest));
    SG_CUDA_CHECK(cudaStreamCreateWithPriority(&comm_, cudaStreamNonBlocking, highest));
    SG_CUDA_CHECK(cudaMallocHost(&host_result_, sizeof(double)));
    SG_CUDA_CHECK(cudaEventCreateWithFlags(&comm_collective_, cudaEventDisableTiming));
    gemm_ = std::make_unique<cuda::CublasLtGemm>(compute_, scratch_);
    attention_ = std::make_unique<cuda::AttentionOp>(compute_, scratch_, device_);
    timer_ = std::make_unique<cuda::OpTimer>(compute_);
    staging_ = std::make_unique<cuda::PinnedStaging>(compute_);
  } catch (...) {
    release();
    throw;
  }
}

CudaBackend::~CudaBackend() { release(); }

void CudaBackend::release() noexcept {
  // Errors are ignored: this runs at exit too, when the CUDA runtime may be unloading.
  cudaSetDevice(device_);
  if (compute_ != nullptr) cudaStreamSynchronize(compute_);
  if (comm_ != nullptr) cudaStreamSynchronize(comm_);
  staging_.reset();
  timer_.reset();
  attention_.reset();
  conv_.reset();
  gemm_.reset();
  if (host_result_ != nullptr) cudaFreeHost(host_result_);
  if (comm_collective_ != nullptr) cudaEventDestroy(comm_collective_);
  comm_collective_ = nullptr;
  if (comm_ != nullptr) cudaStreamDestroy(comm_);
  if (compute_ != nullptr) cudaStreamDestroy(compute_);
  host_result_ = nullptr;
  compute_ = comm_ = nullptr;
}

void CudaBackend::activate() const {
  int current = -1;
  SG_CUDA_CHECK(cudaGetDevice(&current));
  if (current != device_) SG_CUDA_CHECK(cudaSetDevice(device_));
}

void CudaBackend::note_comm_stream_collective() {
  SG_CUDA_CHECK(cudaEventRecord(comm_collective_, comm_));
  comm_collective_pending_ = true;
}

void CudaBackend::order_after_comm_stream_collective() {
  if (!comm_collective_pending_) return;
  SG_CUDA_CHECK(cudaStreamWaitEvent(compute_, comm_collective_, 0));
  comm_collective_pending_ = false;
}

void CudaBackend::set_precision(Precision precision) {
  using Math = cuda::CublasLtGemm::Math;
  const Math math = precision == Precision::BF16   ? Math::Bf16
                    : precision == Precision::FP16 ? Math::Fp16
                                                   : Math::Fp32;
  precision_ = precision;
  gemm_->set_math(math);
  attention_->set_precision(precision);
  if (conv_ != nullptr) conv_->set_reduced_precision(math != Math::Fp32);
}

cuda::CudnnConv& CudaBackend::conv() {
  if (conv_ == nullptr) {
    conv_ = std::make_unique<cuda::CudnnConv>(compute_, scratch_);
    conv_->set_reduced_precision(precision_ != Precision::FP32);
  }
  return *conv_;
}

// --- memory -----------------------------------------------------------------------------------

void* CudaBackend::allocate(size_t bytes) {
  activate();
  // At least one 256-byte granule, so that every allocation is a distinct non-null pointer.
  void* p = cuda::allocate_device(bytes > 0 ? bytes : 256);
  sample_memory();
  return p;
}

void CudaBackend::sample_memory() {
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) == cudaSuccess) {
    memory_peak_ = std::max(memory_peak_, total - free_bytes);
  } else {
    cudaGetLastError();
  }
}

size_t CudaBackend::device_memory_peak() {
  activate();
  sample_memory();  // the scratch areas and library workspaces grow outside allocate()
  return memory_peak_;
}

void CudaBackend::deallocate(void* ptr) noexcept {
  if (ptr == nullptr) return;
  const cudaError_t status = cudaFree(ptr);
  if (status != cudaSuccess && status != cudaErrorCudartUnloading) {
    cudaGetLastError();
    std::fprintf(stderr, "warning: cudaFree on cuda:%d failed: %s\n", device_,
                 cudaGetErrorString(status));
  }
}

void CudaBackend::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  activate();
  if (ranges_overlap(dst, src, bytes)) {  // memmove semantics, as the CPU's: through scratch
    unsigned char* staging = scratch(bytes);
    SG_CUDA_CHECK(cudaMemcpyAsync(staging, src, bytes, cudaMemcpyDeviceToDevice, compute_));
    src = staging;
  }
  SG_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, compute_));
}

void CudaBackend::upload(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  activate();
  SG_CUDA_CHECK(cudaMemcpyAsync(dst, host_src, bytes, cudaMemcpyHostToDevice, compute_));
  // From pageable memory, cudaMemcpyAsync returns once the bytes are staged (CUDA's documented
  // behaviour), so the caller may free or reuse its buffer right away and the host need not wait
  // for the ops queued before. From page-locked memory the copy reads the buffer later: wait.
  cudaPointerAttributes attributes{};
  SG_CUDA_CHECK(cudaPointerGetAttributes(&attributes, host_src));
  if (attributes.type != cudaMemoryTypeUnregistered) SG_CUDA_CHECK(cudaStreamSynchronize(compute_));
}

void CudaBackend::copy_from_host(void* dst, const void* host_src, size_t bytes) {
  upload(dst, host_src, bytes);
}

void CudaBackend::upload_batch(void* dst, const void* host_src, size_t bytes) {
  if (bytes == 0) return;
  activate();
  if (!staging_->copy(dst, host_src, bytes)) upload(dst, host_src, bytes);
}

void CudaBackend::copy_to_host(void* host_dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  activate();
  SG_CUDA_CHECK(cudaMemcpyAsync(host_dst, src, bytes, cudaMemcpyDeviceToHost, compute_));
  SG_CUDA_CHECK(cudaStreamSynchronize(compute_));  // the ops before it, then the copy itself
  timer_->collect();  // the host has waited anyway (nothing when profiling is off)
}

void CudaBackend::fill(const TensorView& t, double value) {
  const size_t n = t.numel();
  if (n == 0) return;
  activate();
  void* p = t.data();
  switch (t.dtype) {
    case DType::F64: fill_elements(p, n, value, compute_); break;
    case DType::F32: fill_elements(p, n, static_cast<float>(value), compute_); break;
    case DType::F16: fill_elements(p, n, float_to_half(static_cast<float>(value)), compute_); break;
    case DType::BF16: fill_elements(p, n, float_to_bf16(static_cast<float>(value)), compute_); break;
    case DType::I64: fill_elements(p, n, static_cast<int64_t>(value), compute_); break;
    case DType::I32: fill_elements(p, n, static_cast<int32_t>(value), compute_); break;
    case DType::I16: fill_elements(p, n, static_cast<int16_t>(value), compute_); break;
    case DType::I8: fill_elements(p, n, static_cast<int8_t>(value), compute_); break;
    case DType::U64: fill_elements(p, n, static_cast<uint64_t>(value), compute_); break;
    case DType::U32: fill_elements(p, n, static_cast<uint32_t>(value), compute_); break;
    case DType::U16: fill_elements(p, n, static_cast<uint16_t>(value), compute_); break;
    case DType::U8: fill_elements(p, n, static_cast<uint8_t>(value), compute_); break;
    case DType::BOOL: fill_elements(p, n, static_cast<uint8_t>(value != 0.0), compute_); break;
    default: throw RunError(std::string("fill of an unknown dtype ") + dtype_name(t.dtype));
  }
}

void CudaBackend::synchronize() {
  activate();
  SG_CUDA_CHECK(cudaStreamSynchronize(compute_));
  SG_CUDA_CHECK(cudaStreamSynchronize(comm_));  // collectives overlapping with compute
  timer_->collect();
}

cuda::OpTimer::Scope CudaBackend::begin_op(const char* name) {
  activate();
  return cuda::OpTimer::Scope(*timer_, name);
}

// --- linear algebra and elementwise -----------------------------------------------------------

void CudaBackend::convert(Act out, ConstAct inp, long n) {
  const auto timed = begin_op("convert");
  if (n <= 0) return;
  if (out.dtype == inp.dtype) {
    SG_CUDA_CHECK(cudaMemcpyAsync(out.data, inp.data, static_cast<size_t>(n) * dtype_size(out.dtype),
                                  cudaMemcpyDeviceToDevice, compute_));
  } else if (out.bf16()) {
    cuda::cast_to_16bit(bf16_of(out), inp.f32(), n, compute_);
  } else {
    cuda::cast_from_16bit(out.f32(), bf16_of(inp), n, compute_);
  }
}
void CudaBackend::matmul_forward(Act out, ConstAct inp, ConstAct weight, const float* bias,
                                 int N, int C, int OC) {
  const auto timed = begin_op("matmul_forward");
  gemm_->forward(out, inp, weight, bias, N, C, OC);
}
void CudaBackend::matmul_backward(Act dinp, float* dweight, float* dbias, ConstAct dout,
                                  ConstAct inp, ConstAct weight, int N, int C, int OC) {
  const auto timed = begin_op("matmul_backward");
  gemm_->backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
}
void CudaBackend::gelu_forward(Act out, ConstAct inp, long n) {
  const auto timed = begin_op("gelu_forward");
  if (out.bf16()) return cuda::gelu_forward(bf16_of(out), bf16_of(inp), n, compute_);
  cuda::gelu_forward(out.f32(), inp.f32(), n, compute_);
}
void CudaBackend::gelu_backward(Act dinp, ConstAct inp, ConstAct dout, long n) {
  const auto timed = begin_op("gelu_backward");
  if (dinp.bf16()) {
    return cuda::gelu_backward(bf16_of(dinp), bf16_of(inp), bf16_of(dout), n, compute_);
  }
  cuda::gelu_backward(dinp.f32(), inp.f32(), dout.f32(), n, compute_);
}
void CudaBackend::relu_forward(Act out, ConstAct inp, long n) {
  const auto timed = begin_op("relu_forward");
  if (out.bf16()) return cuda::relu_forward(bf16_of(out), bf16_of(inp), n, compute_);
  cuda::relu_forward(out.f32(), inp.f32(), n, compute_);
}
void CudaBackend::relu_backward(float* dinp, ConstAct out, const float* dout, long n) {
  const auto timed = begin_op("relu_backward");
  if (out.bf16()) return cuda::relu_backward(dinp, bf16_of(out), dout, n, compute_);
  cuda::relu_backward(dinp, out.f32(), dout, n, compute_);
}
void CudaBackend::residual_forward(float* out, const float* a, const float* b, long n) {
  const auto timed = begin_op("residual_forward");
  cuda::residual_forward(out, a, b, n, compute_);
}
void CudaBackend::add_inplace(float* out, const float* in, long n) {
  const auto timed = begin_op("add_inplace");
  cuda::add_inplace(out, in, n, compute_);
}
void CudaBackend::add_relu_inplace(Act out, ConstAct in, long n) {
  const auto timed = begin_op("add_relu_inplace");
  if (out.bf16()) return cuda::add_relu_inplace(bf16_of(out), bf16_of(in), n, compute_);
  cuda::add_relu_inplace(out.f32(), in.f32(), n, compute_);
}
// One pass: bit for bit add_inplace then relu_backward (backend.h).
void CudaBackend::add_relu_backward(float* acc, const float* g, ConstAct out, long n) {
  if (n <= 0) return;
  const auto timed = begin_op("add_relu_backward");
  if (out.bf16()) return cuda::add_relu_backward(acc, g, bf16_of(out), n, compute_);
  cuda::add_relu_backward(acc, g, out.f32(), n, compute_);
}
void CudaBackend::scale(float* x, float factor, long n) {
  if (n <= 0) return;
  const auto timed = begin_op("scale");
  cuda::scale(x, factor, n, compute_);
}

void CudaBackend::add_bias(float* out, const float* bias, long N, long C) {
  if (C <= 0) return;
  const auto timed = begin_op("add_bias");
  cuda::add_bias(out, bias, N, C, compute_);
}

// --- transformer ------------------------------------------------------------------------------

void CudaBackend::layernorm_forward(Act out, float* mean, float* rstd, const float* inp,
                                    const float* weight, const float* bias, int N, int C) {
  if (N <= 0) return;
  const auto timed = begin_op("layernorm_forward");
  if (out.bf16()) {
    return cuda::layernorm_forward(bf16_of(out), mean, rstd, inp, weight, bias, N, C, compute_);
  }
  cuda::layernorm_forward(out.f32(), mean, rstd, inp, weight, bias, N, C, compute_);
}
void CudaBackend::layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                     const float* inp, const float* weight, const float* mean,
                                     const float* rstd, int N, int C) {
  if (N <= 0) return;
  const auto timed = begin_op("layernorm_backward");
  float* partial = reinterpret_cast<float*>(
      scratch(sizeof(float) * static_cast<size_t>(cuda::layernorm_backward_scratch(N, C))));
  cuda::layernorm_backward(dinp, dweight, dbias, partial, dout, inp, weight, mean, rstd, N, C,
                           compute_);
}
AttentionStorage CudaBackend::attention_storage(int B, int T, int NH) const {
  return attention_storage_for(BackendKind::Cuda, B, T, NH);
}
void CudaBackend::attention_forward(Act out, float* att, ConstAct qkv, int B, int T, int C,
                                    int NH) {
  const auto timed = begin_op("attention_forward");
  attention_->forward(out, att, qkv, B, T, C, NH);  // att: the log-sum-exp
}
void CudaBackend::attention_backward(float* dqkv, float* scratch, ConstAct dout, ConstAct qkv,
                                     ConstAct out, const float* att, int B, int T, int C,
                                     int NH) {
  const auto timed = begin_op("attention_backward");
  // scratch: our kernels' row deltas (sum of dout * out per head), B * NH * T floats.
  attention_->backward(dqkv, scratch, dout, qkv, out, att, B, T, C, NH);
}
void CudaBackend::encoder_forward(float* out, const int32_t* inp, const float* wte,
                                  const float* wpe, int B, int T, int C) {
  const auto timed = begin_op("encoder_forward");
  cuda::encoder_forward(out, inp, wte, wpe, B, T, C, compute_);
}
void CudaBackend::encoder_backward_range(float* dwte_local, float* dwpe, const float* dout,
                                         const int32_t* inp, int B, int T, int C, int v0,
                                         int Vl) {
  const int N = B * T;
  if (N <= 0) return;
  // The token ids are device memory; the buckets (each row's positions in (b, t) order) are made
  // on the host, as llm.c does, so that every row of dwte is summed in that order by one block.
  std::vector<int32_t> ids(static_cast<size_t>(N));
  copy_to_host(ids.data(), inp, ids.size() * sizeof(int32_t));
  const cuda::TokenBuckets buckets = cuda::bucket_tokens(ids.data(), N, v0, Vl);
  ScratchLayout layout;
  const size_t tokens_at = layout.add(buckets.tokens.size() * sizeof(int32_t));
  const size_t offsets_at = layout.add(buckets.offsets.size() * sizeof(int32_t));
  const size_t positions_at = layout.add(buckets.positions.size() * sizeof(int32_t));
  unsigned char* base = scratch(layout.bytes());
  auto* tokens = reinterpret_cast<int32_t*>(base + tokens_at);
  auto* offsets = reinterpret_cast<int32_t*>(base + offsets_at);
  auto* positions = reinterpret_cast<int32_t*>(base + positions_at);
  upload(tokens, buckets.tokens.data(), buckets.tokens.size() * sizeof(int32_t));
  upload(offsets, buckets.offsets.data(), buckets.offsets.size() * sizeof(int32_t));
  upload(positions, buckets.positions.data(), buckets.positions.size() * sizeof(int32_t));
  cuda::encoder_backward(dwte_local, dwpe, dout, tokens, offsets, positions,
                         static_cast<int>(buckets.tokens.size()), B, T, C, compute_);
}
void CudaBackend::encoder_backward(float* dwte, float* dwpe, const float* dout,
                                   const int32_t* inp, int B, int T, int C) {
  const auto timed = begin_op("encoder_backward");
  encoder_backward_range(dwte, dwpe, dout, inp, B, T, C, 0, INT_MAX);
}
void CudaBackend::embedding_forward_vocab_range(float* out, const int32_t* inp,
                                                const float* wte_local, int N, int C, int v0,
                                                int Vl) {
  const auto timed = begin_op("embedding_forward_vocab_range");
  cuda::embedding_forward_vocab_range(out, inp, wte_local, N, C, v0, Vl, compute_);
}
// --- Llama ------------------------------------------------------------------------------------

void CudaBackend::rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight,
                                  int N, int C, float eps) {
  if (N <= 0) return;
  const auto timed = begin_op("rmsnorm_forward");
  cuda::rmsnorm_forward(out, rstd, inp, weight, N, C, eps, compute_);
}
void CudaBackend::rmsnorm_backward(float* dinp, float* dweight, const float* dout,
                                   const float* inp, const float* weight, const float* rstd,
                                   int N, int C) {
  if (N <= 0) return;
  const auto timed = begin_op("rmsnorm_backward");
  float* partial = reinterpret_cast<float*>(
      scratch(sizeof(float) * static_cast<size_t>(cuda::rmsnorm_backward_scratch(N, C))));
  cuda::rmsnorm_backward(dinp, dweight, partial, dout, inp, weight, rstd, N, C, compute_);
}
void CudaBackend::swiglu_forward(float* out, const float* inp, long N, int I) {
  if (N <= 0 || I <= 0) return;
  const auto timed = begin_op("swiglu_forward");
  cuda::swiglu_forward(out, inp, N, I, compute_);
}
void CudaBackend::swiglu_backward(float* dinp, const float* inp, const float* dout, long N,
                                  int I) {
  if (N <= 0 || I <= 0) return;
  const auto timed = begin_op("swiglu_backward");
  cuda::swiglu_backward(dinp, inp, dout, N, I, compute_);
}
void CudaBackend::rope_qkv_forward(float* out, const float* qkv, const float* cos_table,
                                   const float* sin_table, int B, int T, int NH, int NKV, int HS) {
  if (B <= 0 || T <= 0) return;
  const auto timed = begin_op("rope_qkv_forward");
  cuda::rope_qkv_forward(out, qkv, cos_table, sin_table, B, T, NH, NKV, HS, compute_);
}
void CudaBackend::rope_qkv_backward(float* dqkv, const float* dout, const float* cos_table,
                                    const float* sin_table, int B, int T, int NH, int NKV,
                                    int HS) {
  if (B <= 0 || T <= 0) return;
  const auto timed = begin_op("rope_qkv_backward");
  cuda::rope_qkv_backward(dqkv, dout, cos_table, sin_table, B, T, NH, NKV, HS, compute_);
}

void CudaBackend::position_add(float* out, const float* wpe, int B, int T, int C) {
  const auto timed = begin_op("position_add");
  cuda::position_add(out, wpe, B, T, C, compute_);
}
void CudaBackend::encoder_backward_vocab_range(float* dwte_local, float* dwpe, const float* dout,
                                               const int32_t* inp, int B, int T, int C, int v0,
                                               int Vl) {
  const auto timed = begin_op("encoder_backward_vocab_range");
  encoder_backward_range(dwte_local, dwpe, dout, inp, B, T, C, v0, Vl);
}
void CudaBackend::crossentropy_forward(float* losses, Act probs, ConstAct logits,
                                       const int32_t* targets, int N, int V, int Vp) {
  if (N <= 0) return;
  const auto timed = begin_op("crossentropy_forward");
  if (logits.bf16()) {
    return cuda::crossentropy_forward(losses, bf16_of(probs), bf16_of(logits), targets, N, V, Vp,
                                      compute_);
  }
  cuda::crossentropy_forward(losses, probs.f32(), logits.f32(), targets, N, V, Vp, compute_);
}
void CudaBackend::crossentropy_backward(Act dlogits, ConstAct probs, const int32_t* targets,
                                        float dloss, int N, int V, int Vp) {
  if (N <= 0) return;
  const auto timed = begin_op("crossentropy_backward");
  if (probs.bf16()) {
    return cuda::crossentropy_backward(bf16_of(dlogits), bf16_of(probs), targets, dloss, N, V, Vp,
                                       compute_);
  }
  cuda::crossentropy_backward(dlogits.f32(), probs.f32(), targets, dloss, N, V, Vp, compute_);
}
void CudaBackend::crossentropy_forward_backward(float* losses, Act dlogits, ConstAct logits,
                                                const int32_t* targets, float dloss, int N, int V,
                                                int Vp) {
  if (N <= 0) return;
  const auto timed = begin_op("crossentropy_forward_backward");
  if (logits.bf16()) {
    return cuda::crossentropy_forward_backward(losses, bf16_of(dlogits), bf16_of(logits), targets,
                                               dloss, N, V, Vp, compute_);
  }
  cuda::crossentropy_forward_backward(losses, dlogits.f32(), logits.f32(), targets, dloss, N, V,
                                      Vp, compute_);
}
void CudaBackend::crossentropy_vp_max(float* row_max, const float* logits, int N, int Vl, int v0,
                                      int V) {
  if (N <= 0) return;
  const auto timed = begin_op("crossentropy_vp_max");
  cuda::crossentropy_vp_max(row_max, logits, N, Vl, v0, V, compute_);
}
void CudaBackend::crossentropy_vp_sums(float* sum_exp, float* target_logit, const float* logits,
                                       const float* row_max, const int32_t* targets, int N,
                                       int Vl, int v0, int V) {
  if (N <= 0) return;
  const auto timed = begin_op("crossentropy_vp_sums");
  cuda::crossentropy_vp_sums(sum_exp, target_logit, logits, row_max, targets, N, Vl, v0, V,
                             compute_);
}
void CudaBackend::crossentropy_vp_losses(float* losses, const float* row_max,
                                         const float* sum_exp, const float* target_logit, int N) {
  if (N <= 0) return;
  const auto timed = begin_op("crossentropy_vp_losses");
  cuda::crossentropy_vp_losses(losses, row_max, sum_exp, target_logit, N, compute_);
}
void CudaBackend::crossentropy_vp_backward(float* dlogits, const float* logits,
                                           const float* row_max, const float* sum_exp,
                                           const int32_t* targets, float dloss, int N, int Vl,
                                           int v0, int V) {
  if (N <= 0) return;
  const auto timed = begin_op("crossentropy_vp_backward");
  cuda::crossentropy_vp_backward(dlogits, logits, row_max, sum_exp, targets, dloss, N, Vl, v0, V,
                                 compute_);
}

// --- convolutional networks -------------------------------------------------------------------

void CudaBackend::conv2d_forward(Act out, ConstAct inp, ConstAct weight,
                                 const Conv2dShape& s) {
  const auto timed = begin_op("conv2d_forward");
  conv().forward(out, inp, weight, s);
}
void CudaBackend::conv2d_filter(Act out, const float* weight, const Conv2dShape& s) {
  const auto timed = begin_op("conv2d_filter");
  conv().filter(out, weight, s);
}
void CudaBackend::conv2d_backward(float* dinp, float* dweight, ConstAct dout,
                                  ConstAct inp, ConstAct weight, const Conv2dShape& s) {
  const auto timed = begin_op("conv2d_backward");
  conv().backward(dinp, dweight, dout, inp, weight, s);
}
std::pair<double*, double*> CudaBackend::batchnorm_scratch(long M, int C) {
  ScratchLayout layout;
  const size_t sums_at = layout.add(sizeof(double) * 2 * static_cast<size_t>(C));
  const size_t partial_at =
      layout.add(sizeof(double) * static_cast<size_t>(cuda::batchnorm_sums_scratch(M, C)));
  unsigned char* base = scratch(layout.bytes());
  return {reinterpret_cast<double*>(base + sums_at), reinterpret_cast<double*>(base + partial_at)};
}
// Column sums, statistics over this replica's M rows, then the normalize pass with the ReLU or
// the residual add and ReLU applied on its store (no pass of their own).
void CudaBackend::batchnorm_train_kernels(Act out, float* mean, float* var, ConstAct inp,
                                          const float* gamma, const float* beta,
                                          ConstAct residual, long M, int C, float eps,
                                          BatchnormEpilogue epilogue) {
  const auto [sums, partial] = batchnorm_scratch(M, C);
  with_act_type(inp, [&](auto type) {
    using T = decltype(type);
    const T* x = act_as<T>(inp);
    T* y = act_as<T>(out);
    cuda::batchnorm_sums(sums, partial, x, M, C, compute_);
    cuda::batchnorm_stats(mean, var, sums, static_cast<double>(M), C, compute_);
    switch (epilogue) {
      case BatchnormEpilogue::kNone:
        cuda::batchnorm_normalize(y, x, mean, var, gamma, beta, M, C, eps, compute_);
        break;
      case BatchnormEpilogue::kRelu:
        cuda::batchnorm_normalize_relu(y, x, mean, var, gamma, beta, M, C, eps, compute_);
        break;
      case BatchnormEpilogue::kAddRelu:
        cuda::batchnorm_normalize_add_relu(y, x, act_as<T>(residual), mean, var, gamma, beta, M,
                                           C, eps, compute_);
        break;
    }
  });
}
// The sums over dy (as `grad` makes it from dout), then the input pass. dinp may be dout's
// memory (fp32 only): the input kernel reads each element's gradient before writing it.
void CudaBackend::batchnorm_backward_kernels(Act dinp, float* dgamma, float* dbeta,
                                             const float* dout, float* dy_store, const float* g,
                                             ConstAct out, ConstAct inp, const float* mean,
                                             const float* var, const float* gamma, long M, int C,
                                             float eps, int grad) {
  const auto [sums, partial] = batchnorm_scratch(M, C);
  const double count = static_cast<double>(M);
  with_act_type(inp, [&](auto type) {
    using T = decltype(type);
    const T* x = act_as<T>(inp);
    T* dx = act_as<T>(dinp);
    switch (grad) {
      case cuda::kGradRelu: {
        const T* mask = act_as<T>(out);
        cuda::batchnorm_relu_backward_sums(sums, partial, dgamma, dbeta, dout, mask, x, mean, var,
                                           M, C, eps, compute_);
        cuda::batchnorm_relu_backward_input(dx, sums, dout, mask, x, mean, var, gamma, count, M,
                                            C, eps, compute_);
        return;
      }
      case cuda::kGradAddRelu:
        cuda::batchnorm_add_relu_backward_sums(sums, partial, dgamma, dbeta, dy_store, g,
                                               act_as<T>(out), x, mean, var, M, C, eps,
                                               compute_);
        break;
      default:
        cuda::batchnorm_backward_sums(sums, partial, dgamma, dbeta, dout, x, mean, var, M, C, eps,
                                      compute_);
        break;
    }
    cuda::batchnorm_backward_input(dx, sums, dout, x, mean, var, gamma, count, M, C, eps,
                                   compute_);
  });
}
void CudaBackend::batchnorm_forward_train(Act out, float* mean, float* var, ConstAct inp,
                                          const float* gamma, const float* beta, long M, int C,
                                          float eps) {
  if (M <= 0 || C <= 0) return;
  const auto timed = begin_op("batchnorm_forward_train");
  batchnorm_train_kernels(out, mean, var, inp, gamma, beta, nullptr, M, C, eps,
                          BatchnormEpilogue::kNone);
}
void CudaBackend::batchnorm_backward(Act dinp, float* dgamma, float* dbeta, const float* dout,
                                     ConstAct inp, const float* mean, const float* var,
                                     const float* gamma, long M, int C, float eps) {
  if (M <= 0 || C <= 0) return;
  const auto timed = begin_op("batchnorm_backward");
  batchnorm_backward_kernels(dinp, dgamma, dbeta, dout, nullptr, nullptr, nullptr, inp, mean, var,
                             gamma, M, C, eps, cuda::kGradPlain);
}
// add_relu_backward made in the backward's first pass (written into dout, backend.h's
// contract), then the input pass reads it: bit for bit the two ops.
void CudaBackend::batchnorm_add_relu_backward(Act dinp, float* dgamma, float* dbeta, float* dout,
                                              const float* g, ConstAct out, ConstAct inp,
                                              const float* mean, const float* var,
                                              const float* gamma, long M, int C, float eps) {
  if (M <= 0 || C <= 0) return;
  const auto timed = begin_op("batchnorm_add_relu_backward");
  batchnorm_backward_kernels(dinp, dgamma, dbeta, dout, dout, g, out, inp, mean, var, gamma, M, C,
                             eps, cuda::kGradAddRelu);
}
// The residual added and the ReLU taken in the normalize pass: bit for bit the two ops.
void CudaBackend::batchnorm_add_relu_forward_train(Act out, float* mean, float* var,
                                                   ConstAct inp, const float* gamma,
                                                   const float* beta, ConstAct residual, long M,
                                                   int C, float eps) {
  if (M <= 0 || C <= 0) return;
  const auto timed = begin_op("batchnorm_add_relu_forward_train");
  batchnorm_train_kernels(out, mean, var, inp, gamma, beta, residual, M, C, eps,
                          BatchnormEpilogue::kAddRelu);
}
// ReLU fused: the normalize pass stores max(0, .); the backward masks dout where the output is
// not positive as its two passes read it (no masked copy).
void CudaBackend::batchnorm_relu_forward_train(Act out, float* mean, float* var,
                                               ConstAct inp, const float* gamma,
                                               const float* beta, long M, int C, float eps) {
  if (M <= 0 || C <= 0) return;
  const auto timed = begin_op("batchnorm_relu_forward_train");
  batchnorm_train_kernels(out, mean, var, inp, gamma, beta, nullptr, M, C, eps,
                          BatchnormEpilogue::kRelu);
}
void CudaBackend::batchnorm_relu_backward(Act dinp, float* dgamma, float* dbeta,
                                          const float* dout, ConstAct inp, ConstAct out,
                                          const float* mean, const float* var, const float* gamma,
                                          const float* /*beta*/, long M, int C, float eps) {
  if (M <= 0 || C <= 0) return;
  const auto timed = begin_op("batchnorm_relu_backward");
  batchnorm_backward_kernels(dinp, dgamma, dbeta, dout, nullptr, nullptr, out, inp, mean, var,
                             gamma, M, C, eps, cuda::kGradRelu);
}
void CudaBackend::batchnorm_sums(double* sums, ConstAct inp, long M, int C) {
  if (C <= 0) return;
  const auto timed = begin_op("batchnorm_sums");
  if (M <= 0) {  // sums over no rows
    SG_CUDA_CHECK(cudaMemsetAsync(sums, 0, sizeof(double) * 2 * static_cast<size_t>(C), compute_));
    return;
  }
  double* partial = batchnorm_scratch(M, C).second;
  if (inp.bf16()) return cuda::batchnorm_sums(sums, partial, bf16_of(inp), M, C, compute_);
  cuda::batchnorm_sums(sums, partial, inp.f32(), M, C, compute_);
}
void CudaBackend::batchnorm_stats(float* mean, float* var, const double* sums, double count,
                                  int C) {
  if (C <= 0) return;
  const auto timed = begin_op("batchnorm_stats");
  cuda::batchnorm_stats(mean, var, sums, count, C, compute_);
}
void CudaBackend::batchnorm_normalize(Act out, ConstAct inp, const float* mean,
                                      const float* var, const float* gamma, const float* beta,
                                      long M, int C, float eps) {
  if (C <= 0) return;
  const auto timed = begin_op("batchnorm_normalize");
  if (out.bf16()) {
    return cuda::batchnorm_normalize(bf16_of(out), bf16_of(inp), mean, var, gamma, beta, M, C, eps,
                                     compute_);
  }
  cuda::batchnorm_normalize(out.f32(), inp.f32(), mean, var, gamma, beta, M, C, eps, compute_);
}
void CudaBackend::batchnorm_backward_sums(double* sums, float* dgamma, float* dbeta,
                                          const float* dout, ConstAct inp, const float* mean,
                                          const float* var, long M, int C, float eps) {
  if (C <= 0) return;
  const auto timed = begin_op("batchnorm_backward_sums");
  if (M <= 0) {  // sums over no rows; the parameter gradients gain nothing
    SG_CUDA_CHECK(cudaMemsetAsync(sums, 0, sizeof(double) * 2 * static_cast<size_t>(C), compute_));
    return;
  }
  double* partial = batchnorm_scratch(M, C).second;
  if (inp.bf16()) {
    return cuda::batchnorm_backward_sums(sums, partial, dgamma, dbeta, dout, bf16_of(inp), mean,
                                         var, M, C, eps, compute_);
  }
  cuda::batchnorm_backward_sums(sums, partial, dgamma, dbeta, dout, inp.f32(), mean, var, M, C, eps,
                                compute_);
}
void CudaBackend::batchnorm_backward_input(Act dinp, const double* sums, const float* dout,
                                           ConstAct inp, const float* mean, const float* var,
                                           const float* gamma, double count, long M, int C,
                                           float eps) {
  if (C <= 0) return;
  const auto timed = begin_op("batchnorm_backward_input");
  if (dinp.bf16()) {
    return cuda::batchnorm_backward_input(bf16_of(dinp), sums, dout, bf16_of(inp), mean, var,
                                          gamma, count, M, C, eps, compute_);
  }
  cuda::batchnorm_backward_input(dinp.f32(), sums, dout, inp.f32(), mean, var, gamma, count, M, C, eps,
                                 compute_);
}
void CudaBackend::batchnorm_update_running(float* running_mean, float* running_var,
                                           const float* mean, const float* var, double count,
                                           int C, float momentum) {
  if (C <= 0) return;
  const auto timed = begin_op("batchnorm_update_running");
  cuda::batchnorm_update_running(running_mean, running_var, mean, var, count, C, momentum,
                                 compute_);
}
void CudaBackend::maxpool_forward(Act out, int32_t* argmax, ConstAct inp,
                                  const Pool2dShape& s) {
  const auto timed = begin_op("maxpool_forward");
  if (out.bf16()) return cuda::maxpool_forward(bf16_of(out), argmax, bf16_of(inp), s, compute_);
  cuda::maxpool_forward(out.f32(), argmax, inp.f32(), s, compute_);
}
void CudaBackend::maxpool_backward(float* dinp, const float* dout, const int32_t* argmax,
                                   const Pool2dShape& s) {
  const auto timed = begin_op("maxpool_backward");
  cuda::maxpool_backward(dinp, dout, argmax, s, compute_);
}
void CudaBackend::nchw_to_nhwc(Act out, const float* inp, int N, int C, int HW) {
  const auto timed = begin_op("nchw_to_nhwc");
  if (out.bf16()) return cuda::nchw_to_nhwc(bf16_of(out), inp, N, C, HW, compute_);
  cuda::nchw_to_nhwc(out.f32(), inp, N, C, HW, compute_);
}
void CudaBackend::global_avgpool_forward(float* out, ConstAct inp, int N, int HW, int C) {
  if (static_cast<long>(N) * C <= 0) return;
  const auto timed = begin_op("global_avgpool_forward");
  if (inp.bf16()) return cuda::global_avgpool_forward(out, bf16_of(inp), N, HW, C, compute_);
  cuda::global_avgpool_forward(out, inp.f32(), N, HW, C, compute_);
}
void CudaBackend::global_avgpool_backward(float* dinp, const float* dout, int N, int HW, int C) {
  const auto timed = begin_op("global_avgpool_backward");
  cuda::global_avgpool_backward(dinp, dout, N, HW, C, compute_);
}
void CudaBackend::classifier_loss_forward_backward(float* losses, float* dlogits,
                                                   const float* logits, const int32_t* labels,
                                                   float smoothing, float dloss, int N, int K) {
  if (N <= 0) return;
  const auto timed = begin_op("classifier_loss_forward_backward");
  cuda::classifier_loss_forward_backward(losses, dlogits, logits, labels, smoothing, dloss, N, K,
                                         compute_);
}
void CudaBackend::classifier_correct(int64_t* top1, int64_t* top5, const float* logits,
                                     const int32_t* labels, int N, int K) {
  const auto timed = begin_op("classifier_correct");
  if (N <= 0) {
    SG_CUDA_CHECK(cudaMemsetAsync(top1, 0, sizeof(int64_t), compute_));
    SG_CUDA_CHECK(cudaMemsetAsync(top5, 0, sizeof(int64_t), compute_));
    return;
  }
  // Per-row flags in scratch, then one small kernel adds them up into the two int64s (=).
  ScratchLayout layout;
  const size_t top1_at = layout.add(sizeof(int32_t) * static_cast<size_t>(N));
  const size_t top5_at = layout.add(sizeof(int32_t) * static_cast<size_t>(N));
  unsigned char* base = scratch(layout.bytes());
  auto* flags1 = reinterpret_cast<int32_t*>(base + top1_at);
  auto* flags5 = reinterpret_cast<int32_t*>(base + top5_at);
  cuda::classifier_correct(flags1, flags5, logits, labels, N, K, compute_);
  cuda::count_flags(top1, top5, flags1, flags5, N, compute_);
}

// --- optimizers -------------------------------------------------------------------------------

void CudaBackend::adamw_update(float* params, float* m, float* v, const float* grads, long n,
                               float lr, float beta1, float beta2, float eps, float weight_decay,
                               int step, float grad_scale) {
  const auto timed = begin_op("adamw_update");
  cuda::adamw_update(params, m, v, grads, n, lr, beta1, beta2, eps, weight_decay, step, grad_scale,
                     compute_);
}
void CudaBackend::sgd_update(float* params, float* momentum_buffer, const float* grads, long n,
                             float lr, float momentum, float weight_decay, bool nesterov,
                             float grad_scale) {
  const auto timed = begin_op("sgd_update");
  cuda::sgd_update(params, momentum_buffer, grads, n, lr, momentum, weight_decay, nesterov,
                   grad_scale, compute_);
}
double CudaBackend::sum_of_squares(const float* x, long n) {
  const auto timed = begin_op("sum_of_squares");
  ScratchLayout layout;
  const size_t total_at = layout.add(sizeof(double));
  const size_t blocks_at =
      layout.add(sizeof(double) * static_cast<size_t>(cuda::sum_of_squares_scratch(n)));
  unsigned char* base = scratch(layout.bytes());
  auto* total = reinterpret_cast<double*>(base + total_at);
  cuda::sum_of_squares(total, reinterpret_cast<double*>(base + blocks_at), x, n, compute_);
  SG_CUDA_CHECK(
      cudaMemcpyAsync(host_result_, total, sizeof(double), cudaMemcpyDeviceToHost, compute_));
  SG_CUDA_CHECK(cudaStreamSynchronize(compute_));
  timer_->collect();
  return *host_result_;
}

// --- one backend per device -------------------------------------------------------------------

Backend& cuda_backend(int device) {
  static std::mutex mutex;
  // Never destroyed: Buffers released during static destruction still find their backend, and
  // the CUDA runtime tears itself down at exit anyway.
  static auto* backends = new std::map<int, CudaBackend*>();
  const std::lock_guard<std::mutex> lock(mutex);
  if (auto it = backends->find(device); it != backends->end()) return *it->second;
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw RunError(std::string("devices.backend cuda: no usable GPU (") +
                   cudaGetErrorString(status) +
                   "); check the driver with nvidia-smi, or set devices.backend: cpu");
  }
  if (device < 0 || device >= count) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    throw RunError("devices.backend cuda: GPU " + std::to_string(device) +
                   " was asked for, but this process sees " + std::to_string(count) +
                   " GPU(s) (CUDA_VISIBLE_DEVICES=" + (visible != nullptr ? visible : "unset") +
                   "): run at most one process per GPU on each node, or set devices.share_gpus");
  }
  auto* backend = new CudaBackend(device);
  (*backends)[device] = backend;
  return *backend;
}

}  // namespace sg
