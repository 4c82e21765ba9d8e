#pragma once
// The backend interface (docs/architecture.md, "Backends and kernels"): what a device must do for
// the models, the optimizers and the trainer. Memory (allocation, copies, fill), streams, and the
// ops the model families call, each with the contract of its kernel header (kernels/<op>.h: shapes,
// = or +=). Pointers given to an op are this backend's device memory. The CPU backend
// (cpu_backend.cpp) implements every member with the kernels of kernels/cpu/ and oneDNN; the
// CUDA backend (kernels/cuda/cuda_backend.h) implements the same members, or leaves one to its
// composite default here (tests/cuda/backend_ops.txt says which). Nothing here names a model.
//
// Every member is required. Ops are synchronous on the CPU; on a GPU they are enqueued on the
// backend's compute stream and synchronize() waits for them.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "config/spec_enums.h"
#include "kernels/conv2d.h"
#include "kernels/pool.h"
#include "kernels/update_range.h"
#include "tensor/act.h"
#include "tensor/tensor.h"

namespace sg {

// Floats an attention layer keeps from forward to backward (state) and uses as backward scratch.
struct AttentionStorage {
  size_t state = 0, scratch = 0;
};
// What a backend of this kind needs, for `plan` (no backend is built there).
AttentionStorage attention_storage_for(BackendKind backend, int B, int T, int NH);
// activation_dtype() of that backend under train.precision `precision`, for `plan`.
DType activation_dtype_for(BackendKind backend, Precision precision);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;  // "cpu", "cuda"

  // --- memory ---------------------------------------------------------------------------
  virtual void* allocate(size_t bytes) = 0;  // 64-byte aligned; RunError when it cannot
  virtual void deallocate(void* ptr) noexcept = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;  // both on this device
  virtual void copy_from_host(void* dst, const void* host_src, size_t bytes) = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  // copy_from_host for a step's batch (MicroBatch::upload): a GPU stages it through page-locked
  // memory and returns before the copy has run (host_src may be reused at once).
  virtual void upload_batch(void* dst, const void* host_src, size_t bytes) {
    copy_from_host(dst, host_src, bytes);
  }
  virtual void fill(const TensorView& t, double value) = 0;  // every element = value (as dtype)
  void zero(float* data, size_t n) { fill({data, 0, DType::F32, device(), {static_cast<int64_t>(n)}}, 0.0); }

  // The most device memory in use so far, in bytes (a GPU's, as cudaMemGetInfo sees it, CUDA
  // context included); 0 on the host, where the process's resident peak is the figure.
  virtual size_t device_memory_peak() = 0;

  // --- streams --------------------------------------------------------------------------
  virtual void synchronize() = 0;  // waits until every op issued so far is done

  // --- precision ------------------------------------------------------------------------
  // train.precision: fp32 (every product in fp32), or bf16 / fp16: matrix products and
  // convolutions multiply in that type on tensor cores, accumulating in fp32. RunError where the
  // backend cannot.
  virtual void set_precision(Precision precision) = 0;
  // The type a model stores its activations in under the precision set (docs/bf16.md): BF16
  // where this backend's ops take 16-bit activations for it, else F32 (weights, gradients and
  // optimizer state are fp32 either way).
  virtual DType activation_dtype() const { return DType::F32; }
  // out = inp in out's type, n elements (narrowing rounds to nearest, ties to even; widening is
  // exact): the products' bf16 working copy of the weights, cast once per step (docs/bf16.md).
  virtual void convert(Act out, ConstAct inp, long n) = 0;

  // --- linear algebra and elementwise (kernels/matmul.h, gelu.h, residual.h) --------------
  // The backward ops write the activation's gradient (matmul_backward's dinp, gelu_backward's
  // dinp) and add to the parameters' (dweight, dbias), as the kernels' headers say.
  // Activations (Act, ConstAct) may be stored in 16 bits where activation_dtype() says so, and
  // so may the products' weights (their bf16 working copy); bias and gradients are fp32.
  virtual void matmul_forward(Act out, ConstAct inp, ConstAct weight, const float* bias, int N,
                              int C, int OC) = 0;
  virtual void matmul_backward(Act dinp, float* dweight, float* dbias, ConstAct dout,
                               ConstAct inp, ConstAct weight, int N, int C, int OC) = 0;
  virtual void gelu_forward(Act out, ConstAct inp, long n) = 0;
  virtual void gelu_backward(Act dinp, ConstAct inp, ConstAct dout, long n) = 0;
  virtual void relu_forward(Act out, ConstAct inp, long n) = 0;
  virtual void relu_backward(float* dinp, ConstAct out, const float* dout, long n) = 0;
  virtual void residual_forward(float* out, const float* a, const float* b, long n) = 0;
  virtual void add_inplace(float* out, const float* in, long n) = 0;       // out += in
  virtual void add_relu_inplace(Act out, ConstAct in, long n) = 0;  // out = max(out + in, 0)
  // acc = acc + g where out > 0, else 0: two gradients of a ReLU's output (out) summed and taken
  // through the ReLU in one pass; bit for bit the two ops here, which a backend without the
  // fused kernel runs.
  virtual void add_relu_backward(float* acc, const float* g, ConstAct out, long n) {
    add_inplace(acc, g, n);
    relu_backward(acc, out, acc, n);
  }
  virtual void add_bias(float* out, const float* bias, long N, long C) = 0;  // out[n,:] += bias
  virtual void scale(float* x, float factor, long n) = 0;                     // x *= factor

  // --- transformer (kernels/layernorm.h, attention.h, encoder.h, crossentropy.h) ---------
  virtual void layernorm_forward(Act out, float* mean, float* rstd, const float* inp,
                                 const float* weight, const float* bias, int N, int C) = 0;
  // residual = a + b, then out = layernorm(residual) (with mean and rstd): bit for bit the two
  // ops here, which a backend without the fused kernel runs.
  virtual void residual_layernorm_forward(float* residual, Act out, float* mean, float* rstd,
                                          const float* a, const float* b, const float* weight,
                                          const float* bias, int N, int C) {
    residual_forward(residual, a, b, static_cast<long>(N) * C);
    layernorm_forward(out, mean, rstd, residual, weight, bias, N, C);
  }
  virtual void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                                  const float* inp, const float* weight, const float* mean,
                                  const float* rstd, int N, int C) = 0;
  // att: the state the backward needs (attention_storage(B,T,NH).state floats: both backends
  // keep each row's log-sum-exp and never store the T x T probabilities); scratch:
  // attention_storage().scratch floats (none on the CPU); out: the forward's output (the CUDA
  // kernels take the backward's row deltas from it).
  virtual AttentionStorage attention_storage(int B, int T, int NH) const = 0;
  virtual void attention_forward(Act out, float* att, ConstAct qkv, int B, int T, int C,
                                 int NH) = 0;
  virtual void attention_backward(float* dqkv, float* scratch, ConstAct dout, ConstAct qkv,
                                  ConstAct out, const float* att, int B, int T, int C,
                                  int NH) = 0;
  virtual void encoder_forward(float* out, const int32_t* inp, const float* wte,
                               const float* wpe, int B, int T, int C) = 0;
  virtual void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp,
                                int B, int T, int C) = 0;
  virtual void embedding_forward_vocab_range(float* out, const int32_t* inp,
                                             const float* wte_local, int N, int C, int v0,
                                             int Vl) = 0;
  virtual void position_add(float* out, const float* wpe, int B, int T, int C) = 0;
  // dwpe may be null (no position table).
  virtual void encoder_backward_vocab_range(float* dwte_local, float* dwpe, const float* dout,
                                            const int32_t* inp, int B, int T, int C, int v0,
                                            int Vl) = 0;
  // --- Llama (kernels/rmsnorm.h, swiglu.h, rope.h): fp32 tensors --------------------------
  virtual void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps) = 0;
  virtual void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight, const float* rstd, int N, int C) = 0;
  virtual void swiglu_forward(float* out, const float* inp, long N, int I) = 0;
  virtual void swiglu_backward(float* dinp, const float* inp, const float* dout, long N, int I) = 0;
  virtual void rope_qkv_forward(float* out, const float* qkv, const float* cos_table, const float* sin_table, int B, int T, int NH, int NKV, int HS) = 0;
  virtual void rope_qkv_backward(float* dqkv, const float* dout, const float* cos_table, const float* sin_table, int B, int T, int NH, int NKV, int HS) = 0;
  virtual void crossentropy_forward(float* losses, Act probs, ConstAct logits,
                                    const int32_t* targets, int N, int V, int Vp) = 0;
  virtual void crossentropy_backward(Act dlogits, ConstAct probs, const int32_t* targets,
                                     float dloss, int N, int V, int Vp) = 0;
  virtual void crossentropy_forward_backward(float* losses, Act dlogits, ConstAct logits,
                                             const int32_t* targets, float dloss, int N, int V,
                                             int Vp) = 0;
  virtual void crossentropy_vp_max(float* row_max, const float* logits, int N, int Vl, int v0,
                                   int V) = 0;
  virtual void crossentropy_vp_sums(float* sum_exp, float* target_logit, const float* logits,
                                    const float* row_max, const int32_t* targets, int N, int Vl,
                                    int v0, int V) = 0;
  virtual void crossentropy_vp_losses(float* losses, const float* row_max, const float* sum_exp,
                                      const float* target_logit, int N) = 0;
  virtual void crossentropy_vp_backward(float* dlogits, const float* logits,
                                        const float* row_max, const float* sum_exp,
                                        const int32_t* targets, float dloss, int N, int Vl,
                                        int v0, int V) = 0;

  // --- convolutional networks (kernels/conv2d.h, batchnorm.h, pool.h, relu.h,
  // classifier_loss.h) --
  // Activations are NHWC; convolution weights (K, C/groups, R, S) as PyTorch stores them.
  virtual void conv2d_forward(Act out, ConstAct inp, ConstAct weight,
                              const Conv2dShape& s) = 0;
  // The convolutions' bf16 working copy of a filter (docs/bf16.md): out = weight (fp32,
  // (K, C/groups, R, S)) rounded to bf16, in the layout this backend's convolutions read a bf16
  // weight in (the CPU: the same; CUDA: cuDNN's (K, R, S, C/groups) where the two differ). A
  // model makes it once a step (StageModel::prepare_weights) and passes it to conv2d_* as their
  // weight, with bf16 activations; an fp32 weight is cast (and transposed) per call instead.
  virtual void conv2d_filter(Act out, const float* weight, const Conv2dShape& s) = 0;
  virtual void conv2d_backward(float* dinp, float* dweight, ConstAct dout, ConstAct inp,
                               ConstAct weight, const Conv2dShape& s) = 0;
  virtual void batchnorm_forward_train(Act out, float* mean, float* var, ConstAct inp,
                                       const float* gamma, const float* beta, long M, int C,
                                       float eps) = 0;
  virtual void batchnorm_backward(Act dinp, float* dgamma, float* dbeta, const float* dout,
                                  ConstAct inp, const float* mean, const float* var,
                                  const float* gamma, long M, int C, float eps) = 0;
  // dout = dout + g where out > 0, else 0 (add_relu_backward: a residual block's two input
  // gradients summed and taken through the ReLU before it), then batchnorm_backward of that: the
  // next batch norm back reads the sum as it is made. Bit for bit the two ops here, which a
  // backend without the fused kernel runs.
  virtual void batchnorm_add_relu_backward(Act dinp, float* dgamma, float* dbeta, float* dout,
                                           const float* g, ConstAct out, ConstAct inp,
                                           const float* mean, const float* var,
                                           const float* gamma, long M, int C, float eps) {
    add_relu_backward(dout, g, out, M * C);
    batchnorm_backward(dinp, dgamma, dbeta, dout, inp, mean, var, gamma, M, C, eps);
  }
  // The pair again with the ReLU that follows it fused in: out = max(0, batch norm of inp), and
  // the backward takes dout as the gradient of that output. The backward gets the forward's
  // `out` and `beta`; a backend masks with either (CUDA: out > 0; CPU: the batch norm of inp
  // recomputed from gamma and beta, which saves reading `out`).
  virtual void batchnorm_relu_forward_train(Act out, float* mean, float* var,
                                            ConstAct inp, const float* gamma,
                                            const float* beta, long M, int C, float eps) = 0;
  virtual void batchnorm_relu_backward(Act dinp, float* dgamma, float* dbeta,
                                       const float* dout, ConstAct inp, ConstAct out,
                                       const float* mean, const float* var, const float* gamma,
                                       const float* beta, long M, int C, float eps) = 0;
  // out = max(0, batch norm of inp + residual): a residual block's last batch norm, the sum and
  // its ReLU in one op; bit for bit the two ops here, which a backend without the fused kernel
  // runs. Its backward is batchnorm_backward (after add_relu_backward has applied the ReLU).
  virtual void batchnorm_add_relu_forward_train(Act out, float* mean, float* var,
                                                ConstAct inp, const float* gamma,
                                                const float* beta, ConstAct residual, long M,
                                                int C, float eps) {
    batchnorm_forward_train(out, mean, var, inp, gamma, beta, M, C, eps);
    add_relu_inplace(out, residual, M * C);
  }
  // The split batch norm that synchronised statistics go through (sums reduced over the
  // replicas between the calls), also evaluation (normalize with the running statistics).
  virtual void batchnorm_sums(double* sums, ConstAct inp, long M, int C) = 0;
  virtual void batchnorm_stats(float* mean, float* var, const double* sums, double count,
                               int C) = 0;
  virtual void batchnorm_normalize(Act out, ConstAct inp, const float* mean,
                                   const float* var, const float* gamma, const float* beta,
                                   long M, int C, float eps) = 0;
  virtual void batchnorm_backward_sums(double* sums, float* dgamma, float* dbeta,
                                       const float* dout, ConstAct inp, const float* mean,
                                       const float* var, long M, int C, float eps) = 0;
  virtual void batchnorm_backward_input(Act dinp, const double* sums, const float* dout,
                                        ConstAct inp, const float* mean, const float* var,
                                        const float* gamma, double count, long M, int C,
                                        float eps) = 0;
  virtual void batchnorm_update_running(float* running_mean, float* running_var,
                                        const float* mean, const float* var, double count, int C,
                                        float momentum) = 0;
  virtual void maxpool_forward(Act out, int32_t* argmax, ConstAct inp,
                               const Pool2dShape& s) = 0;
  virtual void maxpool_backward(float* dinp, const float* dout, const int32_t* argmax,
                                const Pool2dShape& s) = 0;
  virtual void nchw_to_nhwc(Act out, const float* inp, int N, int C, int HW) = 0;
  virtual void global_avgpool_forward(float* out, ConstAct inp, int N, int HW, int C) = 0;
  virtual void global_avgpool_backward(float* dinp, const float* dout, int N, int HW,
                                       int C) = 0;
  virtual void classifier_loss_forward_backward(float* losses, float* dlogits,
                                                const float* logits, const int32_t* labels,
                                                float smoothing, float dloss, int N, int K) = 0;
  // top1, top5: one device int64 each (=).
  virtual void classifier_correct(int64_t* top1, int64_t* top5, const float* logits,
                                  const int32_t* labels, int N, int K) = 0;

  // --- optimizers (kernels/adamw.h, sgd.h, grad_norm.h) ---------------------------------
  // grad_scale multiplies each gradient as it is read (global-norm clipping's factor; 1: none).
  virtual void adamw_update(float* params, float* m, float* v, const float* grads, long n,
                            float lr, float beta1, float beta2, float eps, float weight_decay,
                            int step, float grad_scale) = 0;
  virtual void sgd_update(float* params, float* momentum_buffer, const float* grads, long n,
                          float lr, float momentum, float weight_decay, bool nesterov,
                          float grad_scale) = 0;
  // Several ranges of the same arrays in one call, each with its own weight decay: the bits of
  // one call per range. The CPU backend runs them in one parallel region (a wake-up of the
  // OpenMP workers instead of one a range); elsewhere, one launch a range.
  virtual void adamw_update_ranges(float* params, float* m, float* v, const float* grads,
                                   std::span<const UpdateRange> ranges, float lr, float beta1,
                                   float beta2, float eps, int step, float grad_scale) {
    for (const UpdateRange& r : ranges) {
      adamw_update(params + r.begin, m + r.begin, v + r.begin, grads + r.begin, r.end - r.begin,
                   lr, beta1, beta2, eps, r.weight_decay, step, grad_scale);
    }
  }
  virtual void sgd_update_ranges(float* params, float* momentum_buffer, const float* grads,
                                 std::span<const UpdateRange> ranges, float lr, float momentum,
                                 bool nesterov, float grad_scale) {
    for (const UpdateRange& r : ranges) {
      sgd_update(params + r.begin, momentum_buffer + r.begin, grads + r.begin, r.end - r.begin,
                 lr, momentum, r.weight_decay, nesterov, grad_scale);
    }
  }
  // Returns a host value (on a GPU: after waiting for the ops before).
  virtual double sum_of_squares(const float* x, long n) = 0;
};

// The host backend, one per process. One thread issues its ops (the training loop's): the
// oneDNN convolutions share scratch areas and per-shape weight buffers between calls.
Backend& cpu_backend();

// The backend for devices.backend; for cuda, GPU `device` (this process's
// local rank, or the device every process shares). RunError when it is not available in this
// build or on this machine, with what to do.
Backend& backend_for(BackendKind kind, int device = 0);

}  // namespace sg
