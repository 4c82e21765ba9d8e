// The CPU backend: host memory and the kernels of kernels/cpu/ (OpenBLAS, oneDNN, OpenMP).
// Every op forwards to the kernel of the same name; see backend.h for the interface. The
// hand-written kernels go through the table of the instruction-set variant chosen for this CPU
// (kernels/cpu/kernel_table.h); oneDNN's and OpenBLAS's choose their own.
#include <cstdlib>
#include <cstring>
#include <new>

#include "backend/backend.h"
#include "backend/op_profile.h"
#include "kernels/adamw.h"
#include "backend/device.h"
#include "kernels/attention.h"
#include "kernels/batchnorm.h"
#include "kernels/classifier_loss.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/conv2d.h"
#include "kernels/crossentropy.h"
#include "kernels/encoder.h"
#include "kernels/gelu.h"
#include "kernels/grad_norm.h"
#include "kernels/layernorm.h"
#include "kernels/matmul.h"
#include "kernels/matmul_bf16.h"
#include "kernels/pool.h"
#include "kernels/relu.h"
#include "kernels/residual.h"
#include "kernels/sgd.h"
#include "util/error.h"

namespace sg {
namespace {

template <class T>
void fill_as(void* data, size_t n, T value) {
  T* p = static_cast<T*>(data);
#pragma omp parallel for simd schedule(static) if (n > (1u << 16))
  for (size_t i = 0; i < n; ++i) p[i] = value;
}

class CpuBackend final : public Backend {
 public:
  Device device() const override { return Device::cpu(); }
  std::string name() const override { return "cpu"; }

  void* allocate(size_t bytes) override {
    constexpr size_t kAlign = 64;
    void* p = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
    if (p == nullptr) {
      throw RunError("cannot allocate " + std::to_string(bytes) + " bytes of host memory; "
                     "lower train.micro_batch or the model size, or use more processes");
    }
    return p;
  }
  void deallocate(void* ptr) noexcept override { std::free(ptr); }
  void copy(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memmove(dst, src, bytes);
  }
  void copy_from_host(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void copy_to_host(void* dst, const void* src, size_t bytes) override { copy(dst, src, bytes); }
  void fill(const TensorView& t, double value) override {
    const ScopedOpTimer timer("fill");
    const size_t n = t.numel();
    void* p = t.data();
    switch (t.dtype) {
      case DType::F32: fill_as(p, n, static_cast<float>(value)); break;
      case DType::F64: fill_as(p, n, value); break;
      case DType::I32: fill_as(p, n, static_cast<int32_t>(value)); break;
      case DType::I64: fill_as(p, n, static_cast<int64_t>(value)); break;
      case DType::U16: fill_as(p, n, static_cast<uint16_t>(value)); break;
      case DType::BF16: fill_as(p, n, float_to_bf16(static_cast<float>(value))); break;
      case DType::F16: fill_as(p, n, float_to_half(static_cast<float>(value))); break;
      default:
        if (value != 0.0) throw RunError(std::string("fill of ") + dtype_name(t.dtype) + " with a non-zero value");
        std::memset(p, 0, t.bytes());
    }
  }
  void synchronize() override {}

  // Activations stored in bf16 (Act, docs/bf16.md) go to the bf16 kernels; an fp32 kernel
  // given a bf16 activation refuses it (Act::f32).
  void matmul_forward(Act out, ConstAct inp, ConstAct weight, const float* bias, int N, int C,
                      int OC) override {
    const ScopedOpTimer timer("matmul_forward");
    if (bf16_products_) return cpu::matmul_forward_bf16(out, inp, weight, bias, N, C, OC);
    kernels_.matmul_forward(out.f32(), inp.f32(), weight.f32(), bias, N, C, OC);
  }
  void matmul_backward(Act dinp, float* dweight, float* dbias, ConstAct dout, ConstAct inp,
                       ConstAct weight, int N, int C, int OC) override {
    const ScopedOpTimer timer("matmul_backward");
    if (bf16_products_) {
      return cpu::matmul_backward_bf16(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
    }
    kernels_.matmul_backward(dinp ? dinp.f32() : nullptr, dweight, dbias, dout.f32(), inp.f32(),
                             weight.f32(), N, C, OC);
  }
  void gelu_forward(Act out, ConstAct inp, long n) override {
    const ScopedOpTimer timer("gelu_forward");
    if (out.bf16()) return kernels_.gelu_forward_bf16(out.b16(), inp.b16(), n);
    kernels_.gelu_forward(out.f32(), inp.f32(), n);
  }
  void gelu_backward(Act dinp, ConstAct inp, ConstAct dout, long n) override {
    const ScopedOpTimer timer("gelu_backward");
    if (dinp.bf16()) return kernels_.gelu_backward_bf16(dinp.b16(), inp.b16(), dout.b16(), n);
    kernels_.gelu_backward(dinp.f32(), inp.f32(), dout.f32(), n);
  }
  void relu_forward(Act out, ConstAct inp, long n) override {
    const ScopedOpTimer timer("relu_forward");
    if (out.bf16()) return kernels_.relu_forward_bf16(out.b16(), inp.b16(), n);
    kernels_.relu_forward(out.f32(), inp.f32(), n);
  }
  void relu_backward(float* dinp, ConstAct out, const float* dout, long n) override {
    const ScopedOpTimer timer("relu_backward");
    if (out.bf16()) return kernels_.relu_backward_bf16(dinp, out.b16(), dout, n);
    kernels_.relu_backward(dinp, out.f32(), dout, n);
  }
  void residual_forward(float* out, const float* a, const float* b, long n) override {
    const ScopedOpTimer timer("residual_forward");
    kernels_.residual_forward(out, a, b, n);
  }
  void add_inplace(float* out, const float* in, long n) override {
    const ScopedOpTimer timer("add_inplace");
    kernels_.add_inplace(out, in, n);
  }
  void add_relu_inplace(Act out, ConstAct in, long n) override {
    const ScopedOpTimer timer("add_relu_inplace");
    if (out.bf16()) return kernels_.add_relu_inplace_bf16(out.b16(), in.b16(), n);
    kernels_.add_relu_inplace(out.f32(), in.f32(), n);
  }
  void add_relu_backward(float* acc, const float* g, ConstAct out, long n) override {
    const ScopedOpTimer timer("add_relu_backward");
    if (out.bf16()) return kernels_.add_relu_backward_bf16(acc, g, out.b16(), n);
    kernels_.add_relu_backward(acc, g, out.f32(), n);
  }
  void scale(float* x, float factor, long n) override {
    const ScopedOpTimer timer("scale");
    kernels_.scale_inplace(x, factor, n);
  }
  void add_bias(float* out, const float* bias, long N, long C) override {
    const ScopedOpTimer timer("add_bias");
    kernels_.add_bias(out, bias, N, C);
  }

  void layernorm_forward(Act out, float* mean, float* rstd, const float* inp,
                         const float* weight, const float* bias, int N, int C) override {
    const ScopedOpTimer timer("layernorm_forward");
    if (out.bf16()) {
      return kernels_.layernorm_forward_bf16(out.b16(), mean, rstd, inp, weight, bias, N, C);
    }
    kernels_.layernorm_forward(out.f32(), mean, rstd, inp, weight, bias, N, C);
  }
  void residual_layernorm_forward(float* residual, Act out, float* mean, float* rstd,
                                  const float* a, const float* b, const float* weight,
                                  const float* bias, int N, int C) override {
    const ScopedOpTimer timer("residual_layernorm_forward");
    if (out.bf16()) {
      return kernels_.residual_layernorm_forward_bf16(residual, out.b16(), mean, rstd, a, b,
                                                      weight, bias, N, C);
    }
    kernels_.residual_layernorm_forward(residual, out.f32(), mean, rstd, a, b, weight, bias, N, C);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                          const float* inp, const float* weight, const float* mean,
                          const float* rstd, int N, int C) override {
    const ScopedOpTimer timer("layernorm_backward");
    kernels_.layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }
  size_t device_memory_peak() override { return 0; }
  // bf16: the linear layers' products on bf16 operands (kernels/matmul_bf16.h), the
  // convolutions on oneDNN's bf16 kernels (kernels/conv2d.h), and the transformer's activations
  // stored in bf16 (activation_dtype; docs/bf16.md); attention's products, the convolutional
  // networks' tensors and everything else stay fp32 on the CPU (docs/performance.md).
  void set_precision(Precision precision) override {
    if (precision == Precision::FP16) {
      throw RunError("train.precision fp16: the CPU backend computes in fp32 or bf16; fp16 "
                     "needs devices.backend: cuda");
    }
    bf16_products_ = precision == Precision::BF16;
    cpu::ConvAlgorithms conv = cpu::conv_algorithms();
    conv.bf16 = bf16_products_;
    cpu::set_conv_algorithms(conv);
  }
  DType activation_dtype() const override {
    return activation_dtype_for(BackendKind::Cpu, bf16_products_ ? Precision::BF16 : Precision::FP32);
  }
  void convert(Act out, ConstAct inp, long n) override {
    const ScopedOpTimer timer("convert");
    if (out.dtype == inp.dtype) {
      std::memcpy(out.data, inp.data, static_cast<size_t>(n) * dtype_size(out.dtype));
    } else if (out.bf16()) {
      cpu::round_to_bf16(out.b16(), inp.f32(), n);
    } else {
      cpu::widen_from_bf16(out.f32(), inp.b16(), n);
    }
  }
  AttentionStorage attention_storage(int B, int T, int NH) const override {
    return attention_storage_for(BackendKind::Cpu, B, T, NH);
  }
  void attention_forward(Act out, float* att, ConstAct qkv, int B, int T, int C,
                         int NH) override {
    const ScopedOpTimer timer("attention_forward");
    if (qkv.bf16()) return kernels_.attention_forward_bf16(out.b16(), att, qkv.b16(), B, T, C, NH);
    kernels_.attention_forward(out.f32(), att, qkv.f32(), B, T, C, NH);
  }
  // The CPU's attention needs no scratch (attention_storage's is 0) and no forward output.
  void attention_backward(float* dqkv, float*, ConstAct dout, ConstAct qkv, ConstAct,
                          const float* att, int B, int T, int C, int NH) override {
    const ScopedOpTimer timer("attention_backward");
    if (qkv.bf16()) {
      return kernels_.attention_backward_bf16(dqkv, dout.b16(), qkv.b16(), att, B, T, C, NH);
    }
    kernels_.attention_backward(dqkv, dout.f32(), qkv.f32(), att, B, T, C, NH);
  }
  void encoder_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B,
                       int T, int C) override {
    const ScopedOpTimer timer("encoder_forward");
    kernels_.encoder_forward(out, inp, wte, wpe, B, T, C);
  }
  void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B,
                        int T, int C) override {
    const ScopedOpTimer timer("encoder_backward");
    kernels_.encoder_backward(dwte, dwpe, dout, inp, B, T, C);
  }
  void embedding_forward_vocab_range(float* out, const int32_t* inp, const float* wte_local,
                                     int N, int C, int v0, int Vl) override {
    const ScopedOpTimer timer("embedding_forward_vocab_range");
    kernels_.embedding_forward_vocab_range(out, inp, wte_local, N, C, v0, Vl);
  }
  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps) override {
    const ScopedOpTimer timer("rmsnorm_forward");
    kernels_.rmsnorm_forward(out, rstd, inp, weight, N, C, eps);
  }
  void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight, const float* rstd, int N, int C) override {
    const ScopedOpTimer timer("rmsnorm_backward");
    kernels_.rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C);
  }
  void swiglu_forward(float* out, const float* inp, long N, int I) override {
    const ScopedOpTimer timer("swiglu_forward");
    kernels_.swiglu_forward(out, inp, N, I);
  }
  void swiglu_backward(float* dinp, const float* inp, const float* dout, long N, int I) override {
    const ScopedOpTimer timer("swiglu_backward");
    kernels_.swiglu_backward(dinp, inp, dout, N, I);
  }
  void rope_qkv_forward(float* out, const float* qkv, const float* cos_table, const float* sin_table, int B, int T, int NH, int NKV, int HS) override {
    const ScopedOpTimer timer("rope_qkv_forward");
    kernels_.rope_qkv_forward(out, qkv, cos_table, sin_table, B, T, NH, NKV, HS);
  }
  void rope_qkv_backward(float* dqkv, const float* dout, const float* cos_table, const float* sin_table, int B, int T, int NH, int NKV, int HS) override {
    const ScopedOpTimer timer("rope_qkv_backward");
    kernels_.rope_qkv_backward(dqkv, dout, cos_table, sin_table, B, T, NH, NKV, HS);
  }
  void position_add(float* out, const float* wpe, int B, int T, int C) override {
    const ScopedOpTimer timer("position_add");
    kernels_.position_add(out, wpe, B, T, C);
  }
  void encoder_backward_vocab_range(float* dwte_local, float* dwpe, const float* dout,
                                    const int32_t* inp, int B, int T, int C, int v0,
                                    int Vl) override {
    const ScopedOpTimer timer("encoder_backward_vocab_range");
    kernels_.encoder_backward_vocab_range(dwte_local, dwpe, dout, inp, B, T, C, v0, Vl);
  }
  void crossentropy_forward(float* losses, Act probs, ConstAct logits, const int32_t* targets,
                            int N, int V, int Vp) override {
    const ScopedOpTimer timer("crossentropy_forward");
    if (logits.bf16()) {
      return kernels_.crossentropy_forward_bf16(losses, probs.b16(), logits.b16(), targets, N, V,
                                                Vp);
    }
    kernels_.crossentropy_forward(losses, probs.f32(), logits.f32(), targets, N, V, Vp);
  }
  void crossentropy_backward(Act dlogits, ConstAct probs, const int32_t* targets, float dloss,
                             int N, int V, int Vp) override {
    const ScopedOpTimer timer("crossentropy_backward");
    if (probs.bf16()) {
      return kernels_.crossentropy_backward_bf16(dlogits.b16(), probs.b16(), targets, dloss, N, V,
                                                 Vp);
    }
    kernels_.crossentropy_backward(dlogits.f32(), probs.f32(), targets, dloss, N, V, Vp);
  }
  void crossentropy_forward_backward(float* losses, Act dlogits, ConstAct logits,
                                     const int32_t* targets, float dloss, int N, int V,
                                     int Vp) override {
    const ScopedOpTimer timer("crossentropy_forward_backward");
    if (logits.bf16()) {
      return kernels_.crossentropy_forward_backward_bf16(losses, dlogits.b16(), logits.b16(),
                                                         targets, dloss, N, V, Vp);
    }
    kernels_.crossentropy_forward_backward(losses, dlogits.f32(), logits.f32(), targets, dloss, N,
                                           V, Vp);
  }
  void crossentropy_vp_max(float* row_max, const float* logits, int N, int Vl, int v0,
                           int V) override {
    const ScopedOpTimer timer("crossentropy_vp_max");
    kernels_.crossentropy_vp_max(row_max, logits, N, Vl, v0, V);
  }
  void crossentropy_vp_sums(float* sum_exp, float* target_logit, const float* logits,
                            const float* row_max, const int32_t* targets, int N, int Vl, int v0,
                            int V) override {
    const ScopedOpTimer timer("crossentropy_vp_sums");
    kernels_.crossentropy_vp_sums(sum_exp, target_logit, logits, row_max, targets, N, Vl, v0, V);
  }
  void crossentropy_vp_losses(float* losses, const float* row_max, const float* sum_exp,
                              const float* target_logit, int N) override {
    const ScopedOpTimer timer("crossentropy_vp_losses");
    kernels_.crossentropy_vp_losses(losses, row_max, sum_exp, target_logit, N);
  }
  void crossentropy_vp_backward(float* dlogits, const float* logits, const float* row_max,
                                const float* sum_exp, const int32_t* targets, float dloss, int N,
                                int Vl, int v0, int V) override {
    const ScopedOpTimer timer("crossentropy_vp_backward");
    kernels_.crossentropy_vp_backward(dlogits, logits, row_max, sum_exp, targets, dloss, N, Vl, v0, V);
  }

  // The batch norm's training pair on either storage (the activations of one call share it).
  void bn_forward_train(Act out, float* mean, float* var, ConstAct inp, const float* gamma,
                     const float* beta, ConstAct residual, long M, int C, float eps, bool relu) {
    if (out.bf16()) {
      return kernels_.batchnorm_forward_train_bf16(out.b16(), mean, var, inp.b16(), gamma, beta,
                                                   residual ? residual.b16() : nullptr, M, C, eps,
                                                   relu);
    }
    kernels_.batchnorm_forward_train(out.f32(), mean, var, inp.f32(), gamma, beta,
                                     residual ? residual.f32() : nullptr, M, C, eps, relu);
  }
  void bn_backward(Act dinp, float* dgamma, float* dbeta, const float* dout, ConstAct inp,
                const float* mean, const float* var, const float* gamma, const float* beta, long M,
                int C, float eps, bool relu) {
    if (dinp.bf16()) {
      return kernels_.batchnorm_backward_bf16(dinp.b16(), dgamma, dbeta, dout, inp.b16(), mean,
                                              var, gamma, beta, M, C, eps, relu);
    }
    kernels_.batchnorm_backward(dinp.f32(), dgamma, dbeta, dout, inp.f32(), mean, var, gamma, beta,
                                M, C, eps, relu);
  }

  void conv2d_forward(Act out, ConstAct inp, ConstAct weight,
                      const Conv2dShape& s) override {
    const ScopedOpTimer timer("conv2d_forward");
    cpu::conv2d_forward(out, inp, weight, s);
  }
  void conv2d_filter(Act out, const float* weight, const Conv2dShape& s) override {
    const ScopedOpTimer timer("conv2d_filter");
    cpu::round_to_bf16(out.b16(), weight, s.weight_size());  // the same layout (conv2d.h)
  }
  void conv2d_backward(float* dinp, float* dweight, ConstAct dout, ConstAct inp,
                       ConstAct weight, const Conv2dShape& s) override {
    const ScopedOpTimer timer("conv2d_backward");
    cpu::conv2d_backward(dinp, dweight, dout, inp, weight, s);
  }
  void batchnorm_forward_train(Act out, float* mean, float* var, ConstAct inp,
                               const float* gamma, const float* beta, long M, int C,
                               float eps) override {
    const ScopedOpTimer timer("batchnorm_forward_train");
    bn_forward_train(out, mean, var, inp, gamma, beta, nullptr, M, C, eps, false);
  }
  void batchnorm_backward(Act dinp, float* dgamma, float* dbeta, const float* dout,
                          ConstAct inp, const float* mean, const float* var,
                          const float* gamma, long M, int C, float eps) override {
    const ScopedOpTimer timer("batchnorm_backward");
    bn_backward(dinp, dgamma, dbeta, dout, inp, mean, var, gamma, nullptr, M, C, eps, false);
  }
  void batchnorm_add_relu_backward(Act dinp, float* dgamma, float* dbeta, float* dout,
                                   const float* g, ConstAct out, ConstAct inp,
                                   const float* mean, const float* var, const float* gamma, long M,
                                   int C, float eps) override {
    const ScopedOpTimer timer("batchnorm_add_relu_backward");
    if (dinp.bf16()) {
      return kernels_.batchnorm_add_relu_backward_bf16(dinp.b16(), dgamma, dbeta, dout, g,
                                                       out.b16(), inp.b16(), mean, var, gamma, M,
                                                       C, eps);
    }
    kernels_.batchnorm_add_relu_backward(dinp.f32(), dgamma, dbeta, dout, g, out.f32(), inp.f32(),
                                         mean, var, gamma, M, C, eps);
  }
  void batchnorm_relu_forward_train(Act out, float* mean, float* var, ConstAct inp,
                                    const float* gamma, const float* beta, long M, int C,
                                    float eps) override {
    const ScopedOpTimer timer("batchnorm_relu_forward_train");
    bn_forward_train(out, mean, var, inp, gamma, beta, nullptr, M, C, eps, true);
  }
  void batchnorm_add_relu_forward_train(Act out, float* mean, float* var, ConstAct inp,
                                        const float* gamma, const float* beta,
                                        ConstAct residual, long M, int C,
                                        float eps) override {
    const ScopedOpTimer timer("batchnorm_add_relu_forward_train");
    bn_forward_train(out, mean, var, inp, gamma, beta, residual, M, C, eps, true);
  }
  void batchnorm_relu_backward(Act dinp, float* dgamma, float* dbeta, const float* dout,
                               ConstAct inp, ConstAct /*out*/, const float* mean,
                               const float* var, const float* gamma, const float* beta, long M,
                               int C, float eps) override {
    const ScopedOpTimer timer("batchnorm_relu_backward");
    bn_backward(dinp, dgamma, dbeta, dout, inp, mean, var, gamma, beta, M, C, eps, true);
  }
  void batchnorm_sums(double* sums, ConstAct inp, long M, int C) override {
    const ScopedOpTimer timer("batchnorm_sums");
    if (inp.bf16()) return kernels_.batchnorm_sums_bf16(sums, inp.b16(), M, C);
    kernels_.batchnorm_sums(sums, inp.f32(), M, C);
  }
  void batchnorm_stats(float* mean, float* var, const double* sums, double count, int C) override {
    const ScopedOpTimer timer("batchnorm_stats");
    kernels_.batchnorm_stats(mean, var, sums, count, C);
  }
  void batchnorm_normalize(Act out, ConstAct inp, const float* mean, const float* var,
                           const float* gamma, const float* beta, long M, int C,
                           float eps) override {
    const ScopedOpTimer timer("batchnorm_normalize");
    if (out.bf16()) {
      return kernels_.batchnorm_normalize_bf16(out.b16(), inp.b16(), mean, var, gamma, beta, M,
                                               C, eps);
    }
    kernels_.batchnorm_normalize(out.f32(), inp.f32(), mean, var, gamma, beta, M, C, eps);
  }
  void batchnorm_backward_sums(double* sums, float* dgamma, float* dbeta, const float* dout,
                               ConstAct inp, const float* mean, const float* var, long M,
                               int C, float eps) override {
    const ScopedOpTimer timer("batchnorm_backward_sums");
    if (inp.bf16()) {
      return kernels_.batchnorm_backward_sums_bf16(sums, dgamma, dbeta, dout, inp.b16(), mean,
                                                   var, M, C, eps);
    }
    kernels_.batchnorm_backward_sums(sums, dgamma, dbeta, dout, inp.f32(), mean, var, M, C, eps);
  }
  void batchnorm_backward_input(Act dinp, const double* sums, const float* dout,
                                ConstAct inp, const float* mean, const float* var,
                                const float* gamma, double count, long M, int C,
                                float eps) override {
    const ScopedOpTimer timer("batchnorm_backward_input");
    if (dinp.bf16()) {
      return kernels_.batchnorm_backward_input_bf16(dinp.b16(), sums, dout, inp.b16(), mean, var,
                                                    gamma, count, M, C, eps);
    }
    kernels_.batchnorm_backward_input(dinp.f32(), sums, dout, inp.f32(), mean, var, gamma, count,
                                      M, C, eps);
  }
  void batchnorm_update_running(float* running_mean, float* running_var, const float* mean,
                                const float* var, double count, int C, float momentum) override {
    const ScopedOpTimer timer("batchnorm_update_running");
    kernels_.batchnorm_update_running(running_mean, running_var, mean, var, count, C, momentum);
  }
  void maxpool_forward(Act out, int32_t* argmax, ConstAct inp,
                       const Pool2dShape& s) override {
    const ScopedOpTimer timer("maxpool_forward");
    if (out.bf16()) return kernels_.maxpool_forward_bf16(out.b16(), argmax, inp.b16(), s);
    kernels_.maxpool_forward(out.f32(), argmax, inp.f32(), s);
  }
  void maxpool_backward(float* dinp, const float* dout, const int32_t* argmax,
                        const Pool2dShape& s) override {
    const ScopedOpTimer timer("maxpool_backward");
    kernels_.maxpool_backward(dinp, dout, argmax, s);
  }
  void nchw_to_nhwc(Act out, const float* inp, int N, int C, int HW) override {
    const ScopedOpTimer timer("nchw_to_nhwc");
    if (out.bf16()) return kernels_.nchw_to_nhwc_bf16(out.b16(), inp, N, C, HW);
    kernels_.nchw_to_nhwc(out.f32(), inp, N, C, HW);
  }
  void global_avgpool_forward(float* out, ConstAct inp, int N, int HW, int C) override {
    const ScopedOpTimer timer("global_avgpool_forward");
    if (inp.bf16()) return kernels_.global_avgpool_forward_bf16(out, inp.b16(), N, HW, C);
    kernels_.global_avgpool_forward(out, inp.f32(), N, HW, C);
  }
  void global_avgpool_backward(float* dinp, const float* dout, int N, int HW, int C) override {
    const ScopedOpTimer timer("global_avgpool_backward");
    kernels_.global_avgpool_backward(dinp, dout, N, HW, C);
  }
  void classifier_loss_forward_backward(float* losses, float* dlogits, const float* logits,
                                        const int32_t* labels, float smoothing, float dloss,
                                        int N, int K) override {
    const ScopedOpTimer timer("classifier_loss_forward_backward");
    kernels_.classifier_loss_forward_backward(losses, dlogits, logits, labels, smoothing, dloss, N, K);
  }
  void classifier_correct(int64_t* top1, int64_t* top5, const float* logits,
                          const int32_t* labels, int N, int K) override {
    const ScopedOpTimer timer("classifier_correct");
    *top1 = 0;  // the backend's contract is =, the reference kernel's +=
    *top5 = 0;
    kernels_.classifier_correct(top1, top5, logits, labels, N, K);
  }

  void adamw_update(float* params, float* m, float* v, const float* grads, long n, float lr,
                    float beta1, float beta2, float eps, float weight_decay, int step,
                    float grad_scale) override {
    const ScopedOpTimer timer("adamw_update");
    kernels_.adamw_update(params, m, v, grads, n, lr, beta1, beta2, eps, weight_decay, step,
                          grad_scale);
  }
  void sgd_update(float* params, float* momentum_buffer, const float* grads, long n, float lr,
                  float momentum, float weight_decay, bool nesterov, float grad_scale) override {
    const ScopedOpTimer timer("sgd_update");
    kernels_.sgd_update(params, momentum_buffer, grads, n, lr, momentum, weight_decay, nesterov,
                        grad_scale);
  }
  void adamw_update_ranges(float* params, float* m, float* v, const float* grads,
                           std::span<const UpdateRange> ranges, float lr, float beta1, float beta2,
                           float eps, int step, float grad_scale) override {
    const ScopedOpTimer timer("adamw_update");
    kernels_.adamw_update_ranges(params, m, v, grads, ranges.data(),
                                 static_cast<int>(ranges.size()), lr, beta1, beta2, eps, step,
                                 grad_scale);
  }
  void sgd_update_ranges(float* params, float* momentum_buffer, const float* grads,
                         std::span<const UpdateRange> ranges, float lr, float momentum,
                         bool nesterov, float grad_scale) override {
    const ScopedOpTimer timer("sgd_update");
    kernels_.sgd_update_ranges(params, momentum_buffer, grads, ranges.data(),
                               static_cast<int>(ranges.size()), lr, momentum, nesterov,
                               grad_scale);
  }

  double sum_of_squares(const float* x, long n) override {
    const ScopedOpTimer timer("sum_of_squares");
    return kernels_.sum_of_squares(x, n);
  }

 private:
  const cpu::KernelTable& kernels_ = cpu::kernels();
  bool bf16_products_ = false;
};

}  // namespace

Backend& cpu_backend() {
  static CpuBackend backend;
  return backend;
}

Backend& backend_for(BackendKind kind, int device) {
  return kind == BackendKind::Cuda ? cuda_backend(device) : cpu_backend();
}

}  // namespace sg
