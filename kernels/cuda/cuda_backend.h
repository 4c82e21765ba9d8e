#pragma once
// The CUDA backend (docs/architecture.md, "Backends and kernels"): device memory, copies and fills
// on one GPU, and every op of backend.h enqueued on the backend's compute stream: our kernels
// (kernels/cuda/*.cuh), GEMMs through cuBLASLt (cublaslt_gemm.h), convolutions through cuDNN
// (cudnn_conv.h), attention through cuDNN's fused SDPA or our flash kernels (attention_op.h). Each
// op is checked against the CPU backend in tests/cuda/cuda_backend_test.cpp. With
// SINGULARITY_PROFILE_OPS=1 every op is timed on the GPU by CUDA events (op_timer.h).
//
// Streams: `compute` carries every op, copy and fill in issue order; `comm` carries the NCCL
// collectives that overlap with compute (nccl_communicator.h), ordered against compute with
// events. Results are deterministic: no float atomics anywhere, cuBLASLt and cuDNN restricted to
// deterministic algorithms. One thread issues the backend's calls (the training loop's).
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <utility>

#include "backend/backend.h"
#include "kernels/cuda/device_memory.h"
#include "kernels/cuda/op_timer.h"
#include "kernels/cuda/pinned_staging.h"

namespace sg::cuda {
class AttentionOp;
class CublasLtGemm;
class CudnnConv;
}  // namespace sg::cuda

namespace sg {

class CudaBackend final : public Backend {
 public:
  // The backend of GPU `device` (made current on this thread); RunError when it is not there.
  explicit CudaBackend(int device);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  cudaStream_t compute_stream() const { return compute_; }
  cudaStream_t comm_stream() const { return comm_; }
  // NCCL's order across this device's communicators (nccl_communicator.h): the collective just
  // queued on the comm stream is noted, and the compute stream's next collective waits for it,
  // so this process's NCCL kernels run one communicator's after another's in program order.
  void note_comm_stream_collective();
  void order_after_comm_stream_collective();
  int device_index() const { return device_; }
  // Makes this backend's GPU the current device of the calling thread (every op does).
  void activate() const;
  // train.precision: fp32 (default) is fp32 math throughout, no TF32; bf16 / fp16 multiply on
  // tensor cores: cuBLASLt CUBLAS_COMPUTE_32F_FAST_16BF / _16F, cuDNN's tensor-op math
  // (TF32, or fp16 by down-conversion, as cuDNN picks per convolution), and attention through
  // cuDNN's fused SDPA on 16-bit copies where the module has it (attention_op.h).
  void set_precision(Precision precision) override;
  Precision precision() const { return precision_; }
  DType activation_dtype() const override { return activation_dtype_for(BackendKind::Cuda, precision_); }
  void convert(Act out, ConstAct inp, long n) override;

  Device device() const override { return Device::cuda(device_); }
  std::string name() const override { return "cuda"; }

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr) noexcept override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override;
  void upload_batch(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void fill(const TensorView& t, double value) override;
  void synchronize() override;
  size_t device_memory_peak() override;

  // Activations in bf16 under train.precision bf16 (activation_dtype, docs/bf16.md): the linear
  // layers, GELU, layer norm and attention take them; other ops refuse them (Act::f32).
  void matmul_forward(Act out, ConstAct inp, ConstAct weight, const float* bias, int N, int C,
                      int OC) override;
  void matmul_backward(Act dinp, float* dweight, float* dbias, ConstAct dout, ConstAct inp,
                       ConstAct weight, int N, int C, int OC) override;
  void gelu_forward(Act out, ConstAct inp, long n) override;
  void gelu_backward(Act dinp, ConstAct inp, ConstAct dout, long n) override;
  void relu_forward(Act out, ConstAct inp, long n) override;
  void relu_backward(float* dinp, ConstAct out, const float* dout, long n) override;
  void residual_forward(float* out, const float* a, const float* b, long n) override;
  void add_inplace(float* out, const float* in, long n) override;
  void add_relu_inplace(Act out, ConstAct in, long n) override;
  void add_relu_backward(float* acc, const float* g, ConstAct out, long n) override;
  void add_bias(float* out, const float* bias, long N, long C) override;
  void scale(float* x, float factor, long n) override;

  void layernorm_forward(Act out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, int N, int C) override;
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, const float* mean,
                          const float* rstd, int N, int C) override;
  AttentionStorage attention_storage(int B, int T, int NH) const override;
  void attention_forward(Act out, float* att, ConstAct qkv, int B, int T, int C,
                         int NH) override;
  void attention_backward(float* dqkv, float* scratch, ConstAct dout, ConstAct qkv,
                          ConstAct out, const float* att, int B, int T, int C,
                          int NH) override;
  void encoder_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B,
                       int T, int C) override;
  void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B,
                        int T, int C) override;
  void embedding_forward_vocab_range(float* out, const int32_t* inp, const float* wte_local,
                                     int N, int C, int v0, int Vl) override;
  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps) override;
  void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight, const float* rstd, int N, int C) override;
  void swiglu_forward(float* out, const float* inp, long N, int I) override;
  void swiglu_backward(float* dinp, const float* inp, const float* dout, long N, int I) override;
  void rope_qkv_forward(float* out, const float* qkv, const float* cos_table, const float* sin_table, int B, int T, int NH, int NKV, int HS) override;
  void rope_qkv_backward(float* dqkv, const float* dout, const float* cos_table, const float* sin_table, int B, int T, int NH, int NKV, int HS) override;
  void position_add(float* out, const float* wpe, int B, int T, int C) override;
  void encoder_backward_vocab_range(float* dwte_local, float* dwpe, const float* dout,
                                    const int32_t* inp, int B, int T, int C, int v0,
                                    int Vl) override;
  void crossentropy_forward(float* losses, Act probs, ConstAct logits, const int32_t* targets,
                            int N, int V, int Vp) override;
  void crossentropy_backward(Act dlogits, ConstAct probs, const int32_t* targets, float dloss,
                             int N, int V, int Vp) override;
  void crossentropy_forward_backward(float* losses, Act dlogits, ConstAct logits,
                                     const int32_t* targets, float dloss, int N, int V,
                                     int Vp) override;
  void crossentropy_vp_max(float* row_max, const float* logits, int N, int Vl, int v0,
                           int V) override;
  void crossentropy_vp_sums(float* sum_exp, float* target_logit, const float* logits,
                            const float* row_max, const int32_t* targets, int N, int Vl, int v0,
                            int V) override;
  void crossentropy_vp_losses(float* losses, const float* row_max, const float* sum_exp,
                              const float* target_logit, int N) override;
  void crossentropy_vp_backward(float* dlogits, const float* logits, const float* row_max,
                                const float* sum_exp, const int32_t* targets, float dloss, int N,
                                int Vl, int v0, int V) override;

  void conv2d_forward(Act out, ConstAct inp, ConstAct weight,
                      const Conv2dShape& s) override;
  void conv2d_filter(Act out, const float* weight, const Conv2dShape& s) override;
  void conv2d_backward(float* dinp, float* dweight, ConstAct dout, ConstAct inp,
                       ConstAct weight, const Conv2dShape& s) override;
  void batchnorm_forward_train(Act out, float* mean, float* var, ConstAct inp,
                               const float* gamma, const float* beta, long M, int C,
                               float eps) override;
  void batchnorm_backward(Act dinp, float* dgamma, float* dbeta, const float* dout,
                          ConstAct inp, const float* mean, const float* var,
                          const float* gamma, long M, int C, float eps) override;
  void batchnorm_add_relu_backward(Act dinp, float* dgamma, float* dbeta, float* dout,
                                   const float* g, ConstAct out, ConstAct inp, const float* mean,
                                   const float* var, const float* gamma, long M, int C,
                                   float eps) override;
  void batchnorm_add_relu_forward_train(Act out, float* mean, float* var, ConstAct inp,
                                        const float* gamma, const float* beta,
                                        ConstAct residual, long M, int C, float eps) override;
  void batchnorm_relu_forward_train(Act out, float* mean, float* var, ConstAct inp,
                                    const float* gamma, const float* beta, long M, int C,
                                    float eps) override;
  void batchnorm_relu_backward(Act dinp, float* dgamma, float* dbeta, const float* dout,
                               ConstAct inp, ConstAct out, const float* mean,
                               const float* var, const float* gamma, const float* beta, long M,
                               int C, float eps) override;
  void batchnorm_sums(double* sums, ConstAct inp, long M, int C) override;
  void batchnorm_stats(float* mean, float* var, const double* sums, double count, int C) override;
  void batchnorm_normalize(Act out, ConstAct inp, const float* mean, const float* var,
                           const float* gamma, const float* beta, long M, int C,
                           float eps) override;
  void batchnorm_backward_sums(double* sums, float* dgamma, float* dbeta, const float* dout,
                               ConstAct inp, const float* mean, const float* var, long M,
                               int C, float eps) override;
  void batchnorm_backward_input(Act dinp, const double* sums, const float* dout,
                                ConstAct inp, const float* mean, const float* var,
                                const float* gamma, double count, long M, int C,
                                float eps) override;
  void batchnorm_update_running(float* running_mean, float* running_var, const float* mean,
                                const float* var, double count, int C, float momentum) override;
  void maxpool_forward(Act out, int32_t* argmax, ConstAct inp,
                       const Pool2dShape& s) override;
  void maxpool_backward(float* dinp, const float* dout, const int32_t* argmax,
                        const Pool2dShape& s) override;
  void nchw_to_nhwc(Act out, const float* inp, int N, int C, int HW) override;
  void global_avgpool_forward(float* out, ConstAct inp, int N, int HW, int C) override;
  void global_avgpool_backward(float* dinp, const float* dout, int N, int HW, int C) override;
  void classifier_loss_forward_backward(float* losses, float* dlogits, const float* logits,
                                        const int32_t* labels, float smoothing, float dloss,
                                        int N, int K) override;
  void classifier_correct(int64_t* top1, int64_t* top5, const float* logits,
                          const int32_t* labels, int N, int K) override;

  void adamw_update(float* params, float* m, float* v, const float* grads, long n, float lr,
                    float beta1, float beta2, float eps, float weight_decay, int step,
                    float grad_scale) override;
  void sgd_update(float* params, float* momentum_buffer, const float* grads, long n, float lr,
                  float momentum, float weight_decay, bool nesterov, float grad_scale) override;
  double sum_of_squares(const float* x, long n) override;

 private:
  // Host -> device on the compute stream; returns once the host buffer may be reused.
  void upload(void* dst, const void* host_src, size_t bytes);
  // The tokens of inp (device, N ids) in [v0, v0 + Vl), bucketed on the host, and dwte_local /
  // dwpe (+=) from them (encoder.cuh).
  void encoder_backward_range(float* dwte_local, float* dwpe, const float* dout,
                              const int32_t* inp, int B, int T, int C, int v0, int Vl);
  // The scratch area the ops share (at least `bytes`), in stream order with them.
  unsigned char* scratch(size_t bytes) { return scratch_.get(bytes, compute_); }
  // The batch norm's column sums (2C doubles) and their per-band partial sums, in the scratch.
  std::pair<double*, double*> batchnorm_scratch(long M, int C);
  // The batch norm's forward in training (sums, statistics over this replica's M rows, the
  // normalize pass with the fused ReLU / residual add of `epilogue`) and backward (sums with dy
  // as `grad` says, the input pass), on the activations' type (batchnorm.cuh).
  enum class BatchnormEpilogue { kNone, kRelu, kAddRelu };
  void batchnorm_train_kernels(Act out, float* mean, float* var, ConstAct inp,
                               const float* gamma, const float* beta, ConstAct residual, long M,
                               int C, float eps, BatchnormEpilogue epilogue);
  // grad: cuda::BatchnormGrad; with kGradAddRelu, dy_store is dout (the sum written there).
  void batchnorm_backward_kernels(Act dinp, float* dgamma, float* dbeta, const float* dout,
                                  float* dy_store, const float* g, ConstAct out, ConstAct inp,
                                  const float* mean, const float* var, const float* gamma, long M,
                                  int C, float eps, int grad);
  void release() noexcept;  // what the destructor (or a failing constructor) frees
  // Every op starts with this: the device made current, and the op timed until the returned
  // scope ends (when profiling; else nothing).
  cuda::OpTimer::Scope begin_op(const char* name);
  // cuDNN, made on the first convolution: a transformer never loads it.
  cuda::CudnnConv& conv();

  int device_;
  cudaStream_t compute_ = nullptr, comm_ = nullptr;
  Precision precision_ = Precision::FP32;
  size_t memory_peak_ = 0;  // bytes in use on the device, the most seen (cudaMemGetInfo)
  void sample_memory();
  cuda::DeviceScratch scratch_;
  std::unique_ptr<cuda::CublasLtGemm> gemm_;
  std::unique_ptr<cuda::CudnnConv> conv_;
  std::unique_ptr<cuda::AttentionOp> attention_;
  std::unique_ptr<cuda::OpTimer> timer_;
  std::unique_ptr<cuda::PinnedStaging> staging_;  // upload_batch's page-locked slots
  double* host_result_ = nullptr;  // pinned: sum_of_squares' result comes back through it
  cudaEvent_t comm_collective_ = nullptr;  // the last collective queued on comm_
  bool comm_collective_pending_ = false;   // recorded since compute last waited for it
};

}  // namespace sg
