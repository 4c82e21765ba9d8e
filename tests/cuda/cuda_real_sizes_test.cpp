// The CUDA backend's ops at the benchmark models' real sizes against the CPU backend: GPT-2 124M
// (T = 1024, 12 heads of 64, C = 768, vocabulary 50257 padded to 50304) and ResNet-50's
// convolution, batch-norm and pooling shapes, in fp32 and in bf16. The small shapes of
// cuda_backend_test.cpp reach every code path; these reach the launch shapes (full grid-stride
// grids, many-row reductions, cuDNN's algorithm choice and fused attention at the real shapes)
// that only a real size has. Exits 77 (skipped) without a GPU; gpu-check runs it on a lent one.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <vector>

#include "backend/backend.h"
#include "backend/device.h"
#include "tests/cuda/gpu_test_support.h"

using namespace sg::test;
using namespace sg::test::gpu_support;

namespace {

struct Precision {  // the GPU in `name` for one scope; fp32 again after it, also after a failure
  explicit Precision(const char* name) { gpu().set_precision(precision_named(name)); }
  ~Precision() { gpu().set_precision(sg::Precision::FP32); }
};

// A GPU result against the CPU's fp32 result: within `tol` in fp32, within 2 % of the largest
// value in reduced precision.
template <class T>
void check_at(const Twin<T>& t, bool reduced, Tolerance tol, const char* what) {
  if (!reduced) return check_twin(t, tol, what);
  INFO(what);
  const std::vector<T> got = t.gpu_values();
  CHECK(relative_to_largest(got.data(), t.cpu_values().data(), got.size()) < kReducedRelative);
}

}  // namespace

TEST_CASE("GPT-2 124M's products: qkv, attention projection, MLP up and down, N = 2048") {
  const int N = 2048, C = 768;
  const auto inp = random_floats(static_cast<size_t>(N) * 4 * C, 201);
  for (const char* precision : {"fp32", "bf16"}) {
    const bool reduced = std::string(precision) != "fp32";
    for (const auto& [in, out_c] : {std::pair{C, 3 * C}, std::pair{C, C}, std::pair{C, 4 * C},
                                   std::pair{4 * C, C}}) {
      CAPTURE(precision);
      CAPTURE(in);
      CAPTURE(out_c);
      Twin<float> x(std::vector<float>(inp.begin(), inp.begin() + static_cast<long>(N) * in));
      Twin<float> w(random_floats(static_cast<size_t>(out_c) * in, 202, -0.05f, 0.05f));
      Twin<float> b(random_floats(out_c, 203)), out(static_cast<size_t>(N) * out_c, 0.0f);
      Twin<float> dout(random_floats(out.size(), 204)), dx(x.size(), 0.0f), dw(w.size(), 0.0f);
      Twin<float> db(out_c, 0.0f);
      cpu().matmul_forward(out.c(), x.c(), w.c(), b.c(), N, in, out_c);
      cpu().matmul_backward(dx.c(), dw.c(), db.c(), dout.c(), x.c(), w.c(), N, in, out_c);
      Precision p(precision);
      gpu().matmul_forward(out.g(), x.g(), w.g(), b.g(), N, in, out_c);
      gpu().matmul_backward(dx.g(), dw.g(), db.g(), dout.g(), x.g(), w.g(), N, in, out_c);
      // 768 to 3072 terms a sum, and 2048 for the weight gradient: a little above kAccumulated.
      const Tolerance tol{1e-4, 1e-4};
      check_at(out, reduced, tol, "out");
      check_at(dx, reduced, tol, "dinp");
      check_at(dw, reduced, tol, "dweight");
      check_at(db, reduced, tol, "dbias");
    }
  }
}

TEST_CASE("GPT-2 124M's attention: T = 1024, 12 heads of 64, fp32 kernels and bf16 SDPA") {
  const int B = 2, T = 1024, C = 768, NH = 12;
  Twin<float> qkv(random_floats(static_cast<size_t>(B) * T * 3 * C, 211));
  Twin<float> out(static_cast<size_t>(B) * T * C, 0.0f);
  const sg::AttentionStorage on_cpu = cpu().attention_storage(B, T, NH);
  const sg::AttentionStorage on_gpu = gpu().attention_storage(B, T, NH);
  std::vector<float> att(on_cpu.state), scratch(on_cpu.scratch);
  Twin<float> lse(on_gpu.state, 0.0f), delta(on_gpu.scratch, 0.0f);
  cpu().attention_forward(out.c(), att.data(), qkv.c(), B, T, C, NH);
  gpu().attention_forward(out.g(), lse.g(), qkv.g(), B, T, C, NH);
  check_twin(out, kAccumulated, "out (fp32, our flash kernels)");
  Twin<float> dout(random_floats(out.size(), 212)), dqkv(qkv.size(), 0.0f);
  cpu().attention_backward(dqkv.c(), scratch.data(), dout.c(), qkv.c(), out.c(), att.data(), B, T, C, NH);
  gpu().attention_backward(dqkv.g(), delta.g(), dout.g(), qkv.g(), out.g(), lse.g(), B, T, C, NH);
  check_twin(dqkv, Tolerance{1e-4, 1e-4}, "dqkv (fp32, our flash kernels)");
  check_reduced_attention("bf16", B, T, C, NH, 213);
}

TEST_CASE("GPT-2 124M's layer norms, embeddings and classifier: 4096 rows, V = 50304") {
  const int B = 4, T = 1024, C = 768, V = 50257, Vp = 50304, N = B * T;
  Twin<float> x(random_floats(static_cast<size_t>(N) * C, 221, -2.0f, 3.0f));
  Twin<float> w(random_floats(C, 222, 0.5f, 1.5f)), b(random_floats(C, 223));
  Twin<float> out(x.size(), 0.0f), mean(N, 0.0f), rstd(N, 0.0f);
  cpu().layernorm_forward(out.c(), mean.c(), rstd.c(), x.c(), w.c(), b.c(), N, C);
  gpu().layernorm_forward(out.g(), mean.g(), rstd.g(), x.g(), w.g(), b.g(), N, C);
  check_twin(out, kAccumulated, "layernorm out");
  Twin<float> dy(random_floats(x.size(), 224)), dx(x.size(), 0.0f), dw(C, 0.0f), db(C, 0.0f);
  cpu().layernorm_backward(dx.c(), dw.c(), db.c(), dy.c(), x.c(), w.c(), mean.c(), rstd.c(), N, C);
  gpu().layernorm_backward(dx.g(), dw.g(), db.g(), dy.g(), x.g(), w.g(), mean.g(), rstd.g(), N, C);
  check_twin(dx, kAccumulated, "layernorm dinp");
  check_twin(dw, Tolerance{1e-4, 1e-4}, "layernorm dweight (4096 rows)");
  check_twin(db, Tolerance{1e-4, 1e-4}, "layernorm dbias (4096 rows)");

  Twin<int32_t> tokens(random_ints(static_cast<size_t>(N), 225, 0, V - 1));
  Twin<float> wte(random_floats(static_cast<size_t>(Vp) * C, 226)), wpe(random_floats(static_cast<size_t>(T) * C, 227));
  cpu().encoder_forward(out.c(), tokens.c(), wte.c(), wpe.c(), B, T, C);
  gpu().encoder_forward(out.g(), tokens.g(), wte.g(), wpe.g(), B, T, C);
  check_equal(out, "embedding forward");
  Twin<float> dwte(wte.size(), 0.0f), dwpe(wpe.size(), 0.0f);
  cpu().encoder_backward(dwte.c(), dwpe.c(), dy.c(), tokens.c(), B, T, C);
  gpu().encoder_backward(dwte.g(), dwpe.g(), dy.g(), tokens.g(), B, T, C);
  check_twin(dwte, kAccumulated, "dwte");
  check_twin(dwpe, kAccumulated, "dwpe");

  const int rows = 1024;  // the classifier's fused loss and gradient over the padded vocabulary
  Twin<float> logits(random_floats(static_cast<size_t>(rows) * Vp, 228, -8.0f, 8.0f));
  Twin<float> losses(rows, 0.0f);
  cpu().crossentropy_forward_backward(losses.c(), logits.c(), logits.c(), tokens.c(), 1.0f / rows, rows, V, Vp);
  gpu().crossentropy_forward_backward(losses.g(), logits.g(), logits.g(), tokens.g(), 1.0f / rows, rows, V, Vp);
  check_twin(losses, kAccumulated, "losses");
  check_twin(logits, kAccumulated, "dlogits (in place)");
}

TEST_CASE("GPT-2 124M's AdamW and global norm over 124 M parameters") {
  const long n = 124'475'904;  // GPT-2 124M with the vocabulary padded to 50304
  Twin<float> g(random_floats(static_cast<size_t>(n), 231, -0.01f, 0.01f));
  Twin<float> p(random_floats(static_cast<size_t>(n), 232)), m(n, 0.0f), v(n, 0.0f);
  cpu().adamw_update(p.c(), m.c(), v.c(), g.c(), n, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 0.5f);
  gpu().adamw_update(p.g(), m.g(), v.g(), g.g(), n, 6e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1, 0.5f);
  check_twin(p, kAccumulated, "params");
  check_twin(v, kAccumulated, "v");
  const double cpu_sum = cpu().sum_of_squares(g.c(), n), gpu_sum = gpu().sum_of_squares(g.g(), n);
  CHECK(gpu_sum == doctest::Approx(cpu_sum).epsilon(1e-9));
}

TEST_CASE("ResNet-50's convolutions at batch 8 in fp32 and bf16 (cuDNN finds an algorithm)") {
  std::vector<sg::Conv2dShape> shapes;
  auto add = [&](int H, int C, int K, int R, int stride) {
    sg::Conv2dShape s;
    s.N = 8, s.H = H, s.W = H, s.C = C, s.K = K, s.R = R, s.S = R;
    s.stride = stride, s.pad = R / 2, s.groups = 1;
    shapes.push_back(s);
  };
  add(224, 3, 64, 7, 2);    // the stem
  add(56, 64, 64, 3, 1);    // layer 1's 3x3
  add(56, 256, 64, 1, 1);   // layer 1's reduction
  add(56, 128, 128, 3, 2);  // layer 2's strided 3x3
  add(28, 512, 1024, 1, 2);  // layer 3's downsample
  add(7, 512, 512, 3, 1);   // layer 4's 3x3
  for (const char* precision : {"fp32", "bf16"}) {
    const bool reduced = std::string(precision) != "fp32";
    for (const sg::Conv2dShape& s : shapes) {
      CAPTURE(precision);
      CAPTURE(s.H);
      CAPTURE(s.C);
      CAPTURE(s.K);
      CAPTURE(s.R);
      CAPTURE(s.stride);
      Twin<float> x(random_floats(static_cast<size_t>(s.in_size()), 241));
      Twin<float> w(random_floats(static_cast<size_t>(s.weight_size()), 242, -0.1f, 0.1f));
      Twin<float> out(static_cast<size_t>(s.out_size()), 0.0f);
      Twin<float> dout(random_floats(out.size(), 243)), dx(x.size(), 0.0f), dw(w.size(), 0.0f);
      cpu().conv2d_forward(out.c(), x.c(), w.c(), s);
      cpu().conv2d_backward(dx.c(), dw.c(), dout.c(), x.c(), w.c(), s);
      Precision p(precision);
      gpu().conv2d_forward(out.g(), x.g(), w.g(), s);
      gpu().conv2d_backward(dx.g(), dw.g(), dout.g(), x.g(), w.g(), s);
      // Up to 4608 terms a sum forward, 8 * 112 * 112 for the weight gradient.
      const Tolerance tol{1e-4, 1e-4};
      check_at(out, reduced, tol, "out");
      check_at(dx, reduced, tol, "dinp");
      check_at(dw, reduced, Tolerance{1e-3, 1e-3}, "dweight");
    }
  }
}

TEST_CASE("ResNet-50's batch norm and pooling at batch 32, and a batch norm over 17 M rows") {
  const float eps = 1e-5f;
  for (const auto& [M, C] : {std::pair{32L * 112 * 112, 64}, std::pair{32L * 56 * 56, 256},
                            std::pair{17'000'000L, 2}}) {  // more bands than a grid's rows
    CAPTURE(M);
    CAPTURE(C);
    Twin<float> x(random_floats(static_cast<size_t>(M) * C, 251, -1.0f, 2.0f));
    Twin<float> gamma(random_floats(C, 252, 0.5f, 1.5f)), beta(random_floats(C, 253));
    Twin<float> out(x.size(), 0.0f), mean(C, 0.0f), var(C, 0.0f);
    cpu().batchnorm_relu_forward_train(out.c(), mean.c(), var.c(), x.c(), gamma.c(), beta.c(), M, C, eps);
    gpu().batchnorm_relu_forward_train(out.g(), mean.g(), var.g(), x.g(), gamma.g(), beta.g(), M, C, eps);
    check_twin(out, kAccumulated, "out");
    check_twin(mean, kAccumulated, "mean");
    check_twin(var, kAccumulated, "var");
    Twin<float> dy(random_floats(x.size(), 254)), dx(x.size(), 0.0f), dg(C, 0.0f), db(C, 0.0f);
    cpu().batchnorm_relu_backward(dx.c(), dg.c(), db.c(), dy.c(), x.c(), out.c(), mean.c(), var.c(), gamma.c(), beta.c(), M, C, eps);
    gpu().batchnorm_relu_backward(dx.g(), dg.g(), db.g(), dy.g(), x.g(), out.g(), mean.g(), var.g(), gamma.g(), beta.g(), M, C, eps);
    check_twin(dx, kAccumulated, "dinp");
    check_twin(dg, Tolerance{1e-4, 1e-4}, "dgamma");
    check_twin(db, Tolerance{1e-4, 1e-4}, "dbeta");
  }
  sg::Pool2dShape s;
  s.N = 32, s.H = 112, s.W = 112, s.C = 64, s.R = 3, s.S = 3, s.stride = 2, s.pad = 1;
  Twin<float> x(random_floats(static_cast<size_t>(s.in_size()), 255));
  Twin<float> out(static_cast<size_t>(s.out_size()), 0.0f);
  Twin<int32_t> argmax(out.size(), 0);
  cpu().maxpool_forward(out.c(), argmax.c(), x.c(), s);
  gpu().maxpool_forward(out.g(), argmax.g(), x.g(), s);
  check_equal(out, "maxpool");
  Twin<float> dout(random_floats(out.size(), 256)), dx(x.size(), 0.0f);
  cpu().maxpool_backward(dx.c(), dout.c(), argmax.c(), s);
  gpu().maxpool_backward(dx.g(), dout.g(), argmax.g(), s);
  check_twin(dx, kElementwise, "maxpool backward");
  const int N = 256, K = 1000;
  Twin<float> logits(random_floats(static_cast<size_t>(N) * K, 257, -3.0f, 3.0f));
  Twin<int32_t> labels(random_ints(N, 258, 0, K - 1));
  Twin<float> losses(N, 0.0f);
  cpu().classifier_loss_forward_backward(losses.c(), logits.c(), logits.c(), labels.c(), 0.1f, 1.0f / N, N, K);
  gpu().classifier_loss_forward_backward(losses.g(), logits.g(), logits.g(), labels.g(), 0.1f, 1.0f / N, N, K);
  check_twin(losses, kAccumulated, "classifier losses");
  check_twin(logits, kAccumulated, "classifier dlogits");
}

int main(int argc, char** argv) { return run_gpu_tests(argc, argv); }
