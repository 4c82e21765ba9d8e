#pragma once
// What the GPU tests share (cuda_backend_test.cpp at small shapes, cuda_real_sizes_test.cpp at
// the benchmark models' shapes): the same data on the host and the GPU (Twin), the tolerances,
// and the reduced-precision attention check.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/device.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/tolerance.h"

namespace sg::test::gpu_support {

using sg::Backend;

// --- tolerances, once -------------------------------------------------------------------------
// Elementwise fp32 kernels: the same formula on both sides; only the math library's last ulps
// (tanhf, expf) and, in GELU's negative tail, 1 + tanh's cancellation (~1e-7 absolute) differ.
inline constexpr Tolerance kElementwise{1e-6, 1e-6};
// Sums in another order (reductions, softmax, norms) and fp32 GEMMs and convolutions without
// TF32: a few ulps per accumulated term over the tens to hundreds of terms of these shapes.
inline constexpr Tolerance kAccumulated{2e-5, 1e-4};
// bf16 inputs (reduced precision): 8 mantissa bits, as the largest error over the largest value.
inline constexpr double kReducedRelative = 2e-2;

inline Backend& cpu() { return sg::cpu_backend(); }
inline Backend& gpu() { return sg::cuda_backend(0); }

// The same data on the host (what the CPU backend computes on) and on the GPU.
template <class T>
class Twin {
 public:
  explicit Twin(std::vector<T> values) : host_(std::move(values)) {
    device_ = static_cast<T*>(gpu().allocate(bytes()));
    gpu().copy_from_host(device_, host_.data(), bytes());
  }
  Twin(size_t n, T value) : Twin(std::vector<T>(n, value)) {}
  ~Twin() { gpu().deallocate(device_); }
  Twin(const Twin&) = delete;
  Twin& operator=(const Twin&) = delete;

  T* c() { return host_.data(); }  // for the CPU backend
  T* g() { return device_; }       // for the CUDA backend
  const std::vector<T>& cpu_values() const { return host_; }
  std::vector<T> gpu_values() const {
    std::vector<T> out(host_.size());
    gpu().copy_to_host(out.data(), device_, bytes());
    return out;
  }
  size_t size() const { return host_.size(); }

 private:
  size_t bytes() const { return std::max<size_t>(1, host_.size()) * sizeof(T); }
  std::vector<T> host_;
  T* device_ = nullptr;
};

template <class T>
inline void check_twin(const Twin<T>& t, Tolerance tol, const char* what) {
  const std::vector<T> got = t.gpu_values();
  CHECK_CLOSE(got.data(), t.cpu_values().data(), t.size(), tol, what);
}
template <class T>
inline void check_equal(const Twin<T>& t, const char* what) {
  INFO(what);
  CHECK(t.gpu_values() == t.cpu_values());
}

// Whether the module has cuDNN's fused attention (`info`'s cudnn-frontend line names a version).
inline bool module_has_cudnn_sdpa() {
  for (const std::string& line : sg::cuda_library_versions()) {
    if (line.rfind("cudnn-frontend ", 0) == 0) return line.rfind("cudnn-frontend none", 0) != 0;
  }
  return false;
}

// One causal attention forward and backward in reduced precision on the GPU against the CPU's
// fp32 probabilities: out, the log-sum-exp against our fp32 flash kernels' (the backward of
// either path reads the other's), the dqkv increments (+= onto 0.5), and a second backward
// bitwise equal to the first (cuDNN's deterministic backward).
// train.precision's word as the backend takes it ("bf16" -> Precision::BF16).
inline sg::Precision precision_named(const char* name) {
  return sg::parse_spec_enum<sg::Precision>(name).value();
}

inline void check_reduced_attention(const char* precision, int B, int T, int C, int NH, uint64_t seed) {
  struct Fp32Again {  // the later test cases run in fp32, also after a failure here
    ~Fp32Again() { gpu().set_precision(sg::Precision::FP32); }
  } fp32_again;
  CAPTURE(precision);
  CAPTURE(T);
  CAPTURE(C / NH);
  const size_t n_qkv = static_cast<size_t>(B) * T * 3 * C, n_out = static_cast<size_t>(B) * T * C;
  const size_t n_lse = static_cast<size_t>(B) * NH * T;
  Twin<float> qkv(random_floats(n_qkv, seed)), out(n_out, 0.0f), lse(n_lse, 0.0f);
  const sg::AttentionStorage on_cpu = cpu().attention_storage(B, T, NH);
  std::vector<float> att(on_cpu.state), scratch(on_cpu.scratch);
  cpu().attention_forward(out.c(), att.data(), qkv.c(), B, T, C, NH);
  gpu().set_precision(precision_named(precision));
  gpu().attention_forward(out.g(), lse.g(), qkv.g(), B, T, C, NH);
  const auto got_out = out.gpu_values();
  CHECK(relative_to_largest(got_out.data(), out.cpu_values().data(), n_out) < kReducedRelative);
  if (C / NH <= 64) {  // our kernels' log-sum-exp, in fp32
    gpu().set_precision(sg::Precision::FP32);
    Twin<float> out32(n_out, 0.0f), lse32(n_lse, 0.0f);
    gpu().attention_forward(out32.g(), lse32.g(), qkv.g(), B, T, C, NH);
    const auto want = lse32.gpu_values(), got = lse.gpu_values();
    CHECK_CLOSE(got.data(), want.data(), n_lse, sg::test::kBf16, "log-sum-exp");
    gpu().set_precision(precision_named(precision));
  }
  Twin<float> dout(random_floats(n_out, seed + 1)), dqkv(n_qkv, 0.5f), again(n_qkv, 0.5f);
  Twin<float> delta(n_lse, 0.0f);
  cpu().attention_backward(dqkv.c(), scratch.data(), dout.c(), qkv.c(), out.c(), att.data(), B, T,
                           C, NH);
  gpu().attention_backward(dqkv.g(), delta.g(), dout.g(), qkv.g(), out.g(), lse.g(), B, T, C, NH);
  gpu().attention_backward(again.g(), delta.g(), dout.g(), qkv.g(), out.g(), lse.g(), B, T, C, NH);
  gpu().set_precision(sg::Precision::FP32);
  std::vector<float> got = dqkv.gpu_values(), want = dqkv.cpu_values();
  CHECK(again.gpu_values() == got);
  for (size_t i = 0; i < n_qkv; ++i) {  // the increments, not diluted by the start value
    got[i] -= 0.5f;
    want[i] -= 0.5f;
  }
  CHECK(relative_to_largest(got.data(), want.data(), n_qkv) < kReducedRelative);
}

// The GPU test binaries' main: 77 (skipped, for Meson) without the CUDA backend or a GPU, else
// doctest's run.
inline int run_gpu_tests(int argc, char** argv) {
  if (!sg::cuda_backend_compiled()) {
    std::puts("skipped: built without the CUDA backend");
    return 77;
  }
  if (sg::cuda_devices().empty()) {
    std::puts("skipped: no CUDA device visible");
    return 77;
  }
  doctest::Context context(argc, argv);
  return context.run();
}

}  // namespace sg::test::gpu_support
