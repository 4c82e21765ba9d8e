#pragma once
// A backend that computes nothing and counts what each op would cost on the CUDA backend: its
// arithmetic (on the matrix units, in attention, or none worth counting) and the bytes it moves
// through device memory, per kernel as kernels/cuda/ runs it today (each activation in the type
// it is stored in, docs/bf16.md; everything else fp32; attention under bf16/fp16 through
// cuDNN's SDPA, on 16-bit copies of what is stored in fp32). `plan --gpu` runs
// one training step of the job on it and prices the counts with a GPU's data sheet
// (gpu_estimate.h); docs/gpu.md "Estimates" says how, and how the estimate compared with the
// H200 when one was lent.
//
// Memory is address space only: allocate hands out distinct, aligned addresses that nothing may
// dereference (the stages never touch device memory from the host: the guarded_training test
// proves it), copies to the host write zeros, sum_of_squares returns 1. The counts follow the
// ops the model families issue, so a family's change shows in the estimate without a second
// description of its step.
#include <cstddef>
#include <initializer_list>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace sg {

// Where an op's arithmetic runs: what rate prices its flops (Matrix: cuBLASLt's GEMMs,
// Convolution: cuDNN's).
enum class CostKind { Memory, Matrix, Convolution, Attention };

struct OpCost {
  std::string name;            // the Backend op ("matmul_backward"), or "op: part" for our
                               // memory-bound kernels inside a library op (gpu-check adds
                               // them to the op, whose GPU time includes them)
  CostKind kind = CostKind::Memory;
  double flops = 0;            // on the matrix units or in attention; 0 for memory-bound ops
  double bytes = 0;            // read + written in device memory
  double launches = 0;         // kernels (and library calls) launched
  bool reduced = false;        // matrix/attention arithmetic in bf16/fp16 (else fp32)
  bool fp32_operands = false;  // reduced arithmetic read from fp32 tensors (cuBLASLt _FAST_16BF)
  long calls = 0;
};

class CostBackend final : public Backend {
 public:
  CostBackend() = default;

  // Counts since the last reset, one entry per op name, in the order the ops first ran.
  const std::vector<OpCost>& ops() const { return ops_; }
  void reset_counts();
  size_t allocated_bytes() const { return allocated_; }

  Device device() const override { return Device::cuda(0); }
  std::string name() const override { return "cuda"; }
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr) noexcept override;
  void copy(void* dst, const void* src, size_t bytes) override;
  void copy_from_host(void* dst, const void* host_src, size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  void fill(const TensorView& t, double value) override;
  size_t device_memory_peak() override { return peak_; }
  void synchronize() override {}
  void set_precision(Precision precision) override;
  DType activation_dtype() const override { return activation_dtype_for(BackendKind::Cuda, precision_); }
  void convert(Act out, ConstAct inp, long n) override;

  void matmul_forward(Act out, ConstAct inp, ConstAct weight, const float* bias, int N,
                      int C, int OC) override;
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
  void batchnorm_relu_forward_train(Act out, float* mean, float* var, ConstAct inp,
                                    const float* gamma, const float* beta, long M, int C,
                                    float eps) override;
  void batchnorm_relu_backward(Act dinp, float* dgamma, float* dbeta, const float* dout,
                               ConstAct inp, ConstAct out, const float* mean,
                               const float* var, const float* gamma, const float* beta, long M,
                               int C, float eps) override;
  void batchnorm_add_relu_forward_train(Act out, float* mean, float* var, ConstAct inp,
                                        const float* gamma, const float* beta, ConstAct residual,
                                        long M, int C, float eps) override;
  void batchnorm_add_relu_backward(Act dinp, float* dgamma, float* dbeta, float* dout,
                                   const float* g, ConstAct out, ConstAct inp, const float* mean,
                                   const float* var, const float* gamma, long M, int C,
                                   float eps) override;
  void batchnorm_sums(double* sums, ConstAct inp, long M, int C) override;
  void batchnorm_stats(float* mean, float* var, const double* sums, double count,
                       int C) override;
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
  // Adds one call of `name`: memory-bound unless flops are given.
  // operands16: the products' operands are 16-bit tensors (else fp32 ones, rounded by the GEMM
  // under reduced precision); an op's first call decides.
  void count(const std::string& name, double bytes, double launches = 1,
             CostKind kind = CostKind::Memory, double flops = 0, bool operands16 = false);
  // The casts a 16-bit GEMM makes of its (operand, elements) not stored in bf16.
  void count_casts(const char* name, std::initializer_list<std::pair<ConstAct, double>> operands);
  bool reduced() const { return precision_ != Precision::FP32; }
  // Whether attention of head size HS runs through cuDNN's SDPA (kernels/cuda/attention_op.cu).
  bool sdpa(int head_size) const;

  Precision precision_ = Precision::FP32;
  std::vector<OpCost> ops_;
  std::map<std::string, size_t> index_;
  std::map<const void*, size_t> sizes_;
  size_t next_address_ = size_t{1} << 44;  // never mapped: a stray dereference faults
  size_t allocated_ = 0, peak_ = 0;
};

}  // namespace sg
