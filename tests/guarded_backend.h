#pragma once
// A test backend whose "device memory" the host cannot touch: it allocates with mmap and keeps
// every allocation PROT_NONE except while one of its own calls runs (each op unprotects them,
// runs the CPU backend's op, and protects them again). Host code that reads or writes device
// memory directly (as it must not, for a GPU) then dies with SIGSEGV in the tests, and runs that
// pass compute exactly what the CPU backend computes. Single-threaded use only.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>

#include "backend/backend.h"
#include "util/error.h"

namespace sg::test {

class GuardedBackend final : public Backend {
 public:
  explicit GuardedBackend(Backend& inner) : inner_(inner) {}
  ~GuardedBackend() override {
    for (auto& [ptr, bytes] : allocations_) munmap(ptr, bytes);
  }
  Device device() const override { return Device::cuda(0); }  // anything but the host
  std::string name() const override { return "guarded"; }

  void* allocate(size_t bytes) override {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t rounded = (bytes + page - 1) / page * page;
    void* p = mmap(nullptr, rounded == 0 ? page : rounded, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw RunError("guarded backend: mmap failed");
    allocations_[p] = rounded == 0 ? page : rounded;
    in_use_ += allocations_[p];
    peak_ = std::max(peak_, in_use_);
    if (open_ > 0) mprotect(p, allocations_[p], PROT_READ | PROT_WRITE);
    return p;
  }
  void deallocate(void* ptr) noexcept override {
    auto it = allocations_.find(ptr);
    if (it == allocations_.end()) return;
    munmap(it->first, it->second);
    in_use_ -= it->second;
    allocations_.erase(it);
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    const Unlocked open(*this);
    inner_.copy(dst, src, bytes);
  }
  void copy_from_host(void* dst, const void* src, size_t bytes) override {
    const Unlocked open(*this);
    ++host_copies_;
    inner_.copy_from_host(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    const Unlocked open(*this);
    ++host_copies_;
    inner_.copy_to_host(dst, src, bytes);
  }
  // Copies between the host and this "device" so far, both ways.
  long host_copies() const { return host_copies_; }
  void fill(const TensorView& t, double value) override {
    const Unlocked open(*this);
    inner_.fill(t, value);
  }
  void synchronize() override {}
  size_t device_memory_peak() override { return peak_; }
  // Accepts every precision and computes in fp32: the tests of what the trainer does around
  // reduced precision (loss scaling) run on the host.
  void set_precision(sg::Precision precision) override { precision_ = precision; }
  sg::Precision precision() const { return precision_; }
  void convert(Act out, ConstAct inp, long n) override {
    const Unlocked open(*this);
    inner_.convert(out, inp, n);
  }

  // Under fp16 a GEMM multiplies fp16 copies of its inputs, as tensor cores do: an input beyond
  // fp16's range makes the products infinite (what dynamic loss scaling must catch).
  // Its activations are fp32 (activation_dtype's default): Act::f32 refuses anything else.
  void matmul_forward(Act out, ConstAct inp, ConstAct weight, const float* bias, int N, int C, int OC) override {
    const Unlocked open(*this);
    inner_.matmul_forward(out, inp, weight, bias, N, C, OC);
    if (beyond_fp16(inp.f32(), size_t(N) * C) || beyond_fp16(weight.f32(), size_t(OC) * C)) poison(out.f32(), size_t(N) * OC);
  }

  void matmul_backward(Act dinp, float* dweight, float* dbias, ConstAct dout, ConstAct inp, ConstAct weight, int N, int C, int OC) override {
    const Unlocked open(*this);
    inner_.matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC);
    if (beyond_fp16(dout.f32(), size_t(N) * OC) || beyond_fp16(inp.f32(), size_t(N) * C) ||
        beyond_fp16(weight.f32(), size_t(OC) * C)) {
      if (dinp) poison(dinp.f32(), size_t(N) * C);
      poison(dweight, size_t(OC) * C);
    }
  }

  void gelu_forward(Act out, ConstAct inp, long n) override {
    const Unlocked open(*this);
    inner_.gelu_forward(out, inp, n);
  }

  void gelu_backward(Act dinp, ConstAct inp, ConstAct dout, long n) override {
    const Unlocked open(*this);
    inner_.gelu_backward(dinp, inp, dout, n);
  }

  void relu_forward(Act out, ConstAct inp, long n) override {
    const Unlocked open(*this);
    inner_.relu_forward(out, inp, n);
  }

  void relu_backward(float* dinp, ConstAct out, const float* dout, long n) override {
    const Unlocked open(*this);
    inner_.relu_backward(dinp, out, dout, n);
  }

  void residual_forward(float* out, const float* a, const float* b, long n) override {
    const Unlocked open(*this);
    inner_.residual_forward(out, a, b, n);
  }

  void add_inplace(float* out, const float* in, long n) override {
    const Unlocked open(*this);
    inner_.add_inplace(out, in, n);
  }

  void add_relu_inplace(Act out, ConstAct in, long n) override {
    const Unlocked open(*this);
    inner_.add_relu_inplace(out, in, n);
  }

  void add_relu_backward(float* acc, const float* g, ConstAct out, long n) override {
    const Unlocked open(*this);
    inner_.add_relu_backward(acc, g, out, n);
  }

  void scale(float* x, float factor, long n) override {
    const Unlocked open(*this);
    inner_.scale(x, factor, n);
  }

  void add_bias(float* out, const float* bias, long N, long C) override {
    const Unlocked open(*this);
    inner_.add_bias(out, bias, N, C);
  }

  void layernorm_forward(Act out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias, int N, int C) override {
    const Unlocked open(*this);
    inner_.layernorm_forward(out, mean, rstd, inp, weight, bias, N, C);
  }

  void residual_layernorm_forward(float* residual, Act out, float* mean, float* rstd, const float* a, const float* b, const float* weight, const float* bias, int N, int C) override {
    const Unlocked open(*this);
    inner_.residual_layernorm_forward(residual, out, mean, rstd, a, b, weight, bias, N, C);
  }

  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp, const float* weight, const float* mean, const float* rstd, int N, int C) override {
    const Unlocked open(*this);
    inner_.layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }

  AttentionStorage attention_storage(int B, int T, int NH) const override {
    return inner_.attention_storage(B, T, NH);
  }

  void attention_forward(Act out, float* att, ConstAct qkv, int B, int T, int C, int NH) override {
    const Unlocked open(*this);
    inner_.attention_forward(out, att, qkv, B, T, C, NH);
  }

  void attention_backward(float* dqkv, float* scratch, ConstAct dout, ConstAct qkv, ConstAct out, const float* att, int B, int T, int C, int NH) override {
    const Unlocked open(*this);
    inner_.attention_backward(dqkv, scratch, dout, qkv, out, att, B, T, C, NH);
  }

  void encoder_forward(float* out, const int32_t* inp, const float* wte, const float* wpe, int B, int T, int C) override {
    const Unlocked open(*this);
    inner_.encoder_forward(out, inp, wte, wpe, B, T, C);
  }

  void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* inp, int B, int T, int C) override {
    const Unlocked open(*this);
    inner_.encoder_backward(dwte, dwpe, dout, inp, B, T, C);
  }

  void embedding_forward_vocab_range(float* out, const int32_t* inp, const float* wte_local, int N, int C, int v0, int Vl) override {
    const Unlocked open(*this);
    inner_.embedding_forward_vocab_range(out, inp, wte_local, N, C, v0, Vl);
  }

  void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int N, int C, float eps) override {
    const Unlocked open(*this);
    inner_.rmsnorm_forward(out, rstd, inp, weight, N, C, eps);
  }

  void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight, const float* rstd, int N, int C) override {
    const Unlocked open(*this);
    inner_.rmsnorm_backward(dinp, dweight, dout, inp, weight, rstd, N, C);
  }

  void swiglu_forward(float* out, const float* inp, long N, int I) override {
    const Unlocked open(*this);
    inner_.swiglu_forward(out, inp, N, I);
  }

  void swiglu_backward(float* dinp, const float* inp, const float* dout, long N, int I) override {
    const Unlocked open(*this);
    inner_.swiglu_backward(dinp, inp, dout, N, I);
  }

  void rope_qkv_forward(float* out, const float* qkv, const float* cos_table, const float* sin_table, int B, int T, int NH, int NKV, int HS) override {
    const Unlocked open(*this);
    inner_.rope_qkv_forward(out, qkv, cos_table, sin_table, B, T, NH, NKV, HS);
  }

  void rope_qkv_backward(float* dqkv, const float* dout, const float* cos_table, const float* sin_table, int B, int T, int NH, int NKV, int HS) override {
    const Unlocked open(*this);
    inner_.rope_qkv_backward(dqkv, dout, cos_table, sin_table, B, T, NH, NKV, HS);
  }

  void position_add(float* out, const float* wpe, int B, int T, int C) override {
    const Unlocked open(*this);
    inner_.position_add(out, wpe, B, T, C);
  }

  void encoder_backward_vocab_range(float* dwte_local, float* dwpe, const float* dout, const int32_t* inp, int B, int T, int C, int v0, int Vl) override {
    const Unlocked open(*this);
    inner_.encoder_backward_vocab_range(dwte_local, dwpe, dout, inp, B, T, C, v0, Vl);
  }

  void crossentropy_forward(float* losses, Act probs, ConstAct logits, const int32_t* targets, int N, int V, int Vp) override {
    const Unlocked open(*this);
    inner_.crossentropy_forward(losses, probs, logits, targets, N, V, Vp);
  }

  void crossentropy_backward(Act dlogits, ConstAct probs, const int32_t* targets, float dloss, int N, int V, int Vp) override {
    const Unlocked open(*this);
    inner_.crossentropy_backward(dlogits, probs, targets, dloss, N, V, Vp);
  }

  void crossentropy_forward_backward(float* losses, Act dlogits, ConstAct logits, const int32_t* targets, float dloss, int N, int V, int Vp) override {
    const Unlocked open(*this);
    inner_.crossentropy_forward_backward(losses, dlogits, logits, targets, dloss, N, V, Vp);
  }

  void crossentropy_vp_max(float* row_max, const float* logits, int N, int Vl, int v0, int V) override {
    const Unlocked open(*this);
    inner_.crossentropy_vp_max(row_max, logits, N, Vl, v0, V);
  }

  void crossentropy_vp_sums(float* sum_exp, float* target_logit, const float* logits, const float* row_max, const int32_t* targets, int N, int Vl, int v0, int V) override {
    const Unlocked open(*this);
    inner_.crossentropy_vp_sums(sum_exp, target_logit, logits, row_max, targets, N, Vl, v0, V);
  }

  void crossentropy_vp_losses(float* losses, const float* row_max, const float* sum_exp, const float* target_logit, int N) override {
    const Unlocked open(*this);
    inner_.crossentropy_vp_losses(losses, row_max, sum_exp, target_logit, N);
  }

  void crossentropy_vp_backward(float* dlogits, const float* logits, const float* row_max, const float* sum_exp, const int32_t* targets, float dloss, int N, int Vl, int v0, int V) override {
    const Unlocked open(*this);
    inner_.crossentropy_vp_backward(dlogits, logits, row_max, sum_exp, targets, dloss, N, Vl, v0, V);
  }

  void conv2d_forward(Act out, ConstAct inp, ConstAct weight, const Conv2dShape& s) override {
    const Unlocked open(*this);
    inner_.conv2d_forward(out, inp, weight, s);
  }

  void conv2d_filter(Act out, const float* weight, const Conv2dShape& s) override {
    const Unlocked open(*this);
    inner_.conv2d_filter(out, weight, s);
  }
  void conv2d_backward(float* dinp, float* dweight, ConstAct dout, ConstAct inp, ConstAct weight, const Conv2dShape& s) override {
    const Unlocked open(*this);
    inner_.conv2d_backward(dinp, dweight, dout, inp, weight, s);
  }

  void batchnorm_forward_train(Act out, float* mean, float* var, ConstAct inp, const float* gamma, const float* beta, long M, int C, float eps) override {
    const Unlocked open(*this);
    inner_.batchnorm_forward_train(out, mean, var, inp, gamma, beta, M, C, eps);
  }

  void batchnorm_backward(Act dinp, float* dgamma, float* dbeta, const float* dout, ConstAct inp, const float* mean, const float* var, const float* gamma, long M, int C, float eps) override {
    const Unlocked open(*this);
    inner_.batchnorm_backward(dinp, dgamma, dbeta, dout, inp, mean, var, gamma, M, C, eps);
  }

  void batchnorm_add_relu_backward(Act dinp, float* dgamma, float* dbeta, float* dout, const float* g, ConstAct out, ConstAct inp, const float* mean, const float* var, const float* gamma, long M, int C, float eps) override {
    const Unlocked open(*this);
    inner_.batchnorm_add_relu_backward(dinp, dgamma, dbeta, dout, g, out, inp, mean, var, gamma, M, C, eps);
  }

  void batchnorm_relu_forward_train(Act out, float* mean, float* var, ConstAct inp, const float* gamma, const float* beta, long M, int C, float eps) override {
    const Unlocked open(*this);
    inner_.batchnorm_relu_forward_train(out, mean, var, inp, gamma, beta, M, C, eps);
  }

  void batchnorm_relu_backward(Act dinp, float* dgamma, float* dbeta, const float* dout, ConstAct inp, ConstAct out, const float* mean, const float* var, const float* gamma, const float* beta, long M, int C, float eps) override {
    const Unlocked open(*this);
    inner_.batchnorm_relu_backward(dinp, dgamma, dbeta, dout, inp, out, mean, var, gamma, beta, M, C, eps);
  }

  void batchnorm_add_relu_forward_train(Act out, float* mean, float* var, ConstAct inp, const float* gamma, const float* beta, ConstAct residual, long M, int C, float eps) override {
    const Unlocked open(*this);
    inner_.batchnorm_add_relu_forward_train(out, mean, var, inp, gamma, beta, residual, M, C, eps);
  }

  void batchnorm_sums(double* sums, ConstAct inp, long M, int C) override {
    const Unlocked open(*this);
    inner_.batchnorm_sums(sums, inp, M, C);
  }

  void batchnorm_stats(float* mean, float* var, const double* sums, double count, int C) override {
    const Unlocked open(*this);
    inner_.batchnorm_stats(mean, var, sums, count, C);
  }

  void batchnorm_normalize(Act out, ConstAct inp, const float* mean, const float* var, const float* gamma, const float* beta, long M, int C, float eps) override {
    const Unlocked open(*this);
    inner_.batchnorm_normalize(out, inp, mean, var, gamma, beta, M, C, eps);
  }

  void batchnorm_backward_sums(double* sums, float* dgamma, float* dbeta, const float* dout, ConstAct inp, const float* mean, const float* var, long M, int C, float eps) override {
    const Unlocked open(*this);
    inner_.batchnorm_backward_sums(sums, dgamma, dbeta, dout, inp, mean, var, M, C, eps);
  }

  void batchnorm_backward_input(Act dinp, const double* sums, const float* dout, ConstAct inp, const float* mean, const float* var, const float* gamma, double count, long M, int C, float eps) override {
    const Unlocked open(*this);
    inner_.batchnorm_backward_input(dinp, sums, dout, inp, mean, var, gamma, count, M, C, eps);
  }

  void batchnorm_update_running(float* running_mean, float* running_var, const float* mean, const float* var, double count, int C, float momentum) override {
    const Unlocked open(*this);
    inner_.batchnorm_update_running(running_mean, running_var, mean, var, count, C, momentum);
  }

  void maxpool_forward(Act out, int32_t* argmax, ConstAct inp, const Pool2dShape& s) override {
    const Unlocked open(*this);
    inner_.maxpool_forward(out, argmax, inp, s);
  }

  void maxpool_backward(float* dinp, const float* dout, const int32_t* argmax, const Pool2dShape& s) override {
    const Unlocked open(*this);
    inner_.maxpool_backward(dinp, dout, argmax, s);
  }

  void nchw_to_nhwc(Act out, const float* inp, int N, int C, int HW) override {
    const Unlocked open(*this);
    inner_.nchw_to_nhwc(out, inp, N, C, HW);
  }

  void global_avgpool_forward(float* out, ConstAct inp, int N, int HW, int C) override {
    const Unlocked open(*this);
    inner_.global_avgpool_forward(out, inp, N, HW, C);
  }

  void global_avgpool_backward(float* dinp, const float* dout, int N, int HW, int C) override {
    const Unlocked open(*this);
    inner_.global_avgpool_backward(dinp, dout, N, HW, C);
  }

  void classifier_loss_forward_backward(float* losses, float* dlogits, const float* logits, const int32_t* labels, float smoothing, float dloss, int N, int K) override {
    const Unlocked open(*this);
    inner_.classifier_loss_forward_backward(losses, dlogits, logits, labels, smoothing, dloss, N, K);
  }

  void classifier_correct(int64_t* top1, int64_t* top5, const float* logits, const int32_t* labels, int N, int K) override {
    const Unlocked open(*this);
    inner_.classifier_correct(top1, top5, logits, labels, N, K);
  }

  void adamw_update(float* params, float* m, float* v, const float* grads, long n, float lr, float beta1, float beta2, float eps, float weight_decay, int step, float grad_scale) override {
    const Unlocked open(*this);
    inner_.adamw_update(params, m, v, grads, n, lr, beta1, beta2, eps, weight_decay, step, grad_scale);
  }

  void sgd_update(float* params, float* momentum_buffer, const float* grads, long n, float lr, float momentum, float weight_decay, bool nesterov, float grad_scale) override {
    const Unlocked open(*this);
    inner_.sgd_update(params, momentum_buffer, grads, n, lr, momentum, weight_decay, nesterov, grad_scale);
  }

  void adamw_update_ranges(float* params, float* m, float* v, const float* grads, std::span<const UpdateRange> ranges, float lr, float beta1, float beta2, float eps, int step, float grad_scale) override {
    const Unlocked open(*this);
    inner_.adamw_update_ranges(params, m, v, grads, ranges, lr, beta1, beta2, eps, step, grad_scale);
  }

  void sgd_update_ranges(float* params, float* momentum_buffer, const float* grads, std::span<const UpdateRange> ranges, float lr, float momentum, bool nesterov, float grad_scale) override {
    const Unlocked open(*this);
    inner_.sgd_update_ranges(params, momentum_buffer, grads, ranges, lr, momentum, nesterov, grad_scale);
  }

  double sum_of_squares(const float* x, long n) override {
    const Unlocked open(*this);
    return inner_.sum_of_squares(x, n);
  }

 private:
  bool beyond_fp16(const float* x, size_t n) const {
    if (precision_ != sg::Precision::FP16) return false;
    for (size_t i = 0; i < n; ++i) {
      if (!(std::fabs(x[i]) <= 65504.0f)) return true;
    }
    return false;
  }
  static void poison(float* x, size_t n) { std::fill(x, x + n, std::numeric_limits<float>::infinity()); }

  // While one exists, every allocation is readable and writable (nested calls keep them open).
  class Unlocked {
   public:
    explicit Unlocked(GuardedBackend& b) : b_(b) {
      if (b_.open_++ == 0) b_.set_all(PROT_READ | PROT_WRITE);
    }
    ~Unlocked() {
      if (--b_.open_ == 0) b_.set_all(PROT_NONE);
    }

   private:
    GuardedBackend& b_;
  };
  void set_all(int protection) {
    for (auto& [ptr, bytes] : allocations_) mprotect(ptr, bytes, protection);
  }
  long host_copies_ = 0;
  Backend& inner_;
  std::map<void*, size_t> allocations_;
  int open_ = 0;
  sg::Precision precision_ = sg::Precision::FP32;
  size_t in_use_ = 0, peak_ = 0;
};

}  // namespace sg::test
