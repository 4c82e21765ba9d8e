// Our CUDA kernels, run on the CPU through the host emulation (kernels/cuda/emulation.h), against
// the CPU backend's op on random inputs at the tolerances of tests/tolerance.h. This binary is
// also built with ThreadSanitizer (test_cuda_kernels_tsan), which catches a missing
// __syncthreads. It needs the CUDA headers (cuda_bf16.h), not a GPU.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

// The CPU ops first: the emulation defines CUDA's keywords as macros.
#include "kernels/adamw.h"
#include "kernels/attention.h"
#include "kernels/batchnorm.h"
#include "kernels/classifier_loss.h"
#include "kernels/crossentropy.h"
#include "kernels/encoder.h"
#include "kernels/gelu.h"
#include "kernels/grad_norm.h"
#include "kernels/sgd.h"
#include "kernels/layernorm.h"
#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "kernels/matmul.h"
#include "kernels/relu.h"
#include "kernels/residual.h"
#include "kernels/pool.h"
#include "tensor/dtype.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/tolerance.h"

#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/attention.cuh"
#include "kernels/cuda/backend_kernels.cuh"
#include "kernels/cuda/batchnorm.cuh"
#include "kernels/cuda/casts.cuh"
#include "kernels/cuda/convnet.cuh"
#include "kernels/cuda/crossentropy.cuh"
#include "kernels/cuda/encoder.cuh"
#include "kernels/cuda/filter_layout.cuh"
#include "kernels/cuda/layernorm.cuh"
#include "kernels/cuda/llama_ops.cuh"
#include "kernels/cuda/matmul.cuh"
#include "kernels/cuda/optimizer.cuh"
#include "kernels/cuda/pool.cuh"

using namespace sg::test;

namespace {

constexpr sg::cuda::Stream kStream{};

}  // namespace

TEST_CASE("emulated GPU: GELU, ReLU, residual and bias adds (+ ReLU), casts, NCHW->NHWC") {
  const long n = 3001;  // ragged against the 256-thread blocks
  const auto x = random_floats(n, 1, -4.0f, 4.0f), dy = random_floats(n, 2);
  std::vector<float> ref(n), got(n);
  sg::cpu::gelu_forward(ref.data(), x.data(), n);
  sg::cuda::gelu_forward(got.data(), x.data(), n, kStream);
  CHECK_CLOSE(got.data(), ref.data(), n, kFp32, "gelu forward");
  std::vector<float> dref(n, 0.5f), dgot(n, 0.5f);  // written over a start value
  sg::cpu::gelu_backward(dref.data(), x.data(), dy.data(), n);
  sg::cuda::gelu_backward(dgot.data(), x.data(), dy.data(), n, kStream);
  CHECK_CLOSE(dgot.data(), dref.data(), n, kFp32, "gelu backward");

  sg::cpu::relu_forward(ref.data(), x.data(), n);
  sg::cuda::relu_forward(got.data(), x.data(), n, kStream);
  CHECK(got == ref);
  sg::cpu::relu_backward(dref.data(), ref.data(), dy.data(), n);
  sg::cuda::relu_backward(dgot.data(), got.data(), dy.data(), n, kStream);
  CHECK(dgot == dref);

  sg::cpu::residual_forward(ref.data(), x.data(), dy.data(), n);
  sg::cuda::residual_forward(got.data(), x.data(), dy.data(), n, kStream);
  CHECK(got == ref);
  sg::cpu::add_inplace(ref.data(), x.data(), n);
  sg::cuda::add_inplace(got.data(), x.data(), n, kStream);
  CHECK(got == ref);
  sg::cpu::add_relu_inplace(ref.data(), dy.data(), n);
  sg::cuda::add_relu_inplace(got.data(), dy.data(), n, kStream);
  CHECK(got == ref);
  const auto bias = random_floats(23, 3);
  std::vector<float> rows_ref(23 * 17, 1.0f), rows_got = rows_ref;
  sg::cpu::add_bias(rows_ref.data(), bias.data(), 17, 23);
  sg::cuda::add_bias(rows_got.data(), bias.data(), 17, 23, kStream);
  CHECK(rows_got == rows_ref);

  std::vector<__nv_bfloat16> half(n);
  std::vector<float> back(n);
  sg::cuda::cast_to_bf16(half.data(), x.data(), n, kStream);
  sg::cuda::cast_from_bf16(back.data(), half.data(), n, kStream);
  CHECK_CLOSE(back.data(), x.data(), n, kBf16, "bf16 round trip");

  const int N = 3, C = 3, HW = 49;
  const auto img = random_floats(N * C * HW, 4);
  std::vector<float> nhwc_ref(img.size()), nhwc_got(img.size());
  sg::cpu::nchw_to_nhwc(nhwc_ref.data(), img.data(), N, C, HW);
  sg::cuda::nchw_to_nhwc(nhwc_got.data(), img.data(), N, C, HW, kStream);
  CHECK(nhwc_got == nhwc_ref);
}

TEST_CASE("emulated GPU: layernorm forward and backward (rows split over warps and blocks)") {
  for (const auto& [N, C] : {std::pair{70, 64}, {33, 100}, {5, 768}}) {
    CAPTURE(N);
    CAPTURE(C);
    const auto x = random_floats(static_cast<size_t>(N) * C, 11, -2.0f, 3.0f);
    const auto w = random_floats(C, 12, 0.5f, 1.5f), b = random_floats(C, 13);
    const auto dy = random_floats(static_cast<size_t>(N) * C, 14);
    std::vector<float> y_ref(x.size()), y(x.size()), m_ref(N), m(N), s_ref(N), s(N);
    sg::cpu::layernorm_forward(y_ref.data(), m_ref.data(), s_ref.data(), x.data(), w.data(),
                               b.data(), N, C);
    sg::cuda::layernorm_forward(y.data(), m.data(), s.data(), x.data(), w.data(), b.data(), N, C,
                                kStream);
    CHECK_CLOSE(y.data(), y_ref.data(), y.size(), kFp32, "out");
    CHECK_CLOSE(m.data(), m_ref.data(), N, kFp32, "mean");
    CHECK_CLOSE(s.data(), s_ref.data(), N, kFp32, "rstd");
    std::vector<float> dx_ref(x.size(), 0.25f), dx = dx_ref, dw_ref(C, 1.0f), dw = dw_ref,
                                                db_ref(C, -1.0f), db = db_ref;
    std::vector<float> scratch(static_cast<size_t>(sg::cuda::layernorm_backward_scratch(N, C)));
    sg::cpu::layernorm_backward(dx_ref.data(), dw_ref.data(), db_ref.data(), dy.data(), x.data(),
                                w.data(), m_ref.data(), s_ref.data(), N, C);
    sg::cuda::layernorm_backward(dx.data(), dw.data(), db.data(), scratch.data(), dy.data(),
                                 x.data(), w.data(), m.data(), s.data(), N, C, kStream);
    CHECK_CLOSE(dx.data(), dx_ref.data(), dx.size(), kFp32, "dinp (+=)");
    CHECK_CLOSE(dw.data(), dw_ref.data(), C, kFp32, "dweight (+=)");
    CHECK_CLOSE(db.data(), db_ref.data(), C, kFp32, "dbias (+=)");
  }
}

TEST_CASE("emulated GPU: softmax cross-entropy, fused and in place, and its vocabulary-parallel parts") {
  const int N = 5, V = 300, Vp = 384;
  const auto logits = random_floats(static_cast<size_t>(N) * Vp, 21, -5.0f, 5.0f);
  const auto targets = random_ints(N, 22, 0, V - 1);
  const float dloss = 0.125f;
  std::vector<float> l_ref(N), l(N), p_ref(logits.size()), p(logits.size());
  sg::cpu::crossentropy_forward(l_ref.data(), p_ref.data(), logits.data(), targets.data(), N, V, Vp);
  sg::cuda::crossentropy_forward(l.data(), p.data(), logits.data(), targets.data(), N, V, Vp, kStream);
  CHECK_CLOSE(l.data(), l_ref.data(), N, kFp32, "losses");
  CHECK_CLOSE(p.data(), p_ref.data(), p.size(), kFp32, "probs");
  std::vector<float> d_ref(logits.size()), d(logits.size());
  sg::cpu::crossentropy_backward(d_ref.data(), p_ref.data(), targets.data(), dloss, N, V, Vp);
  sg::cuda::crossentropy_backward(d.data(), p.data(), targets.data(), dloss, N, V, Vp, kStream);
  CHECK_CLOSE(d.data(), d_ref.data(), d.size(), kFp32, "dlogits");
  // Fused, in place: the logits become their gradient.
  std::vector<float> fused = logits;
  sg::cuda::crossentropy_forward_backward(l.data(), fused.data(), fused.data(), targets.data(), dloss,
                                          N, V, Vp, kStream);
  CHECK_CLOSE(l.data(), l_ref.data(), N, kFp32, "fused losses");
  CHECK_CLOSE(fused.data(), d_ref.data(), fused.size(), kFp32, "fused dlogits");

  // Two ranks of 192 columns each (the second holds the 84 real ones and the padding).
  for (int rank = 0; rank < 2; ++rank) {
    CAPTURE(rank);
    const int Vl = Vp / 2, v0 = rank * Vl;
    std::vector<float> local(static_cast<size_t>(N) * Vl);
    for (int n = 0; n < N; ++n)
      std::copy_n(logits.data() + static_cast<size_t>(n) * Vp + v0, Vl, local.data() + static_cast<size_t>(n) * Vl);
    std::vector<float> m_ref(N), m(N), se_ref(N), se(N), tl_ref(N), tl(N), vl_ref(N), vl(N);
    sg::cpu::crossentropy_vp_max(m_ref.data(), local.data(), N, Vl, v0, V);
    sg::cuda::crossentropy_vp_max(m.data(), local.data(), N, Vl, v0, V, kStream);
    CHECK(m == m_ref);
    sg::cpu::crossentropy_vp_sums(se_ref.data(), tl_ref.data(), local.data(), m_ref.data(), targets.data(), N, Vl, v0, V);
    sg::cuda::crossentropy_vp_sums(se.data(), tl.data(), local.data(), m.data(), targets.data(), N, Vl, v0, V, kStream);
    CHECK_CLOSE(se.data(), se_ref.data(), N, kFp32, "sum_exp");
    CHECK(tl == tl_ref);
    sg::cpu::crossentropy_vp_losses(vl_ref.data(), m_ref.data(), se_ref.data(), tl_ref.data(), N);
    sg::cuda::crossentropy_vp_losses(vl.data(), m.data(), se.data(), tl.data(), N, kStream);
    CHECK_CLOSE(vl.data(), vl_ref.data(), N, kFp32, "partial losses");
    std::vector<float> g_ref(local.size()), g = local;
    sg::cpu::crossentropy_vp_backward(g_ref.data(), local.data(), m_ref.data(), se_ref.data(), targets.data(), dloss, N, Vl, v0, V);
    sg::cuda::crossentropy_vp_backward(g.data(), g.data(), m.data(), se.data(), targets.data(), dloss, N, Vl, v0, V, kStream);
    CHECK_CLOSE(g.data(), g_ref.data(), g.size(), kFp32, "vp dlogits (in place)");
  }
}

TEST_CASE("emulated GPU: AdamW (fp32, and on bf16 weights with fp32 masters), SGD, the norm") {
  // Step 2 scales the gradient (clipping's factor), as the kernels read it.
  const long n = 20000;  // two 16K blocks of the norm, the last ragged
  const auto g = random_floats(n, 31, -0.1f, 0.1f);
  auto p_ref = random_floats(n, 32), p = p_ref;
  std::vector<float> m_ref(n, 0.0f), v_ref(n, 0.0f), m = m_ref, v = v_ref;
  std::vector<float> master = p;
  std::vector<__nv_bfloat16> weights(n);
  std::vector<float> m2 = m, v2 = v;
  for (int step = 1; step <= 3; ++step) {
    const float scale = step == 2 ? 0.375f : 1.0f;
    sg::cpu::adamw_update(p_ref.data(), m_ref.data(), v_ref.data(), g.data(), n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step, scale);
    sg::cuda::adamw_update(p.data(), m.data(), v.data(), g.data(), n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step, scale, kStream);
    sg::cuda::adamw_update(nullptr, m2.data(), v2.data(), g.data(), n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step,
                           scale, kStream, master.data(), weights.data());
  }
  CHECK_CLOSE(p.data(), p_ref.data(), n, kFp32, "params");
  CHECK_CLOSE(m.data(), m_ref.data(), n, kFp32, "m");
  CHECK_CLOSE(v.data(), v_ref.data(), n, kFp32, "v");
  CHECK_CLOSE(master.data(), p_ref.data(), n, kFp32, "fp32 masters");
  std::vector<float> rounded(n);
  for (long i = 0; i < n; ++i) rounded[i] = __bfloat162float(weights[i]);
  CHECK_CLOSE(rounded.data(), p_ref.data(), n, kBf16, "bf16 weights");

  auto q_ref = random_floats(n, 33), q = q_ref;
  std::vector<float> buf_ref(n, 0.0f), buf(n, 0.0f);
  for (int step = 0; step < 3; ++step) {
    const float scale = step == 1 ? 0.375f : 1.0f;
    sg::cpu::sgd_update(q_ref.data(), buf_ref.data(), g.data(), n, 0.1f, 0.9f, 1e-4f, true, scale);
    sg::cuda::sgd_update(q.data(), buf.data(), g.data(), n, 0.1f, 0.9f, 1e-4f, true, scale, kStream);
  }
  CHECK_CLOSE(q.data(), q_ref.data(), n, kFp32, "sgd params");
  CHECK_CLOSE(buf.data(), buf_ref.data(), n, kFp32, "sgd momentum");

  std::vector<double> scratch(static_cast<size_t>(sg::cuda::sum_of_squares_scratch(n)));
  double total = 0;
  sg::cuda::sum_of_squares(&total, scratch.data(), g.data(), n, kStream);
  CHECK(total == doctest::Approx(sg::cpu::sum_of_squares(g.data(), n)).epsilon(1e-12));
}

TEST_CASE("emulated GPU: embeddings forward and backward, whole and vocabulary-parallel") {
  const int B = 3, T = 7, C = 40, V = 50;
  const auto wte = random_floats(static_cast<size_t>(V) * C, 41), wpe = random_floats(static_cast<size_t>(T) * C, 42);
  auto inp = random_ints(static_cast<size_t>(B) * T, 43, 0, V - 1);
  inp[5] = inp[9] = inp[20] = 17;  // a token seen several times
  std::vector<float> ref(static_cast<size_t>(B) * T * C), got(ref.size());
  sg::cpu::encoder_forward(ref.data(), inp.data(), wte.data(), wpe.data(), B, T, C);
  sg::cuda::encoder_forward(got.data(), inp.data(), wte.data(), wpe.data(), B, T, C, kStream);
  CHECK(got == ref);
  const auto dout = random_floats(ref.size(), 44);
  for (const auto& [v0, Vl] : {std::pair{0, V}, {20, 15}}) {
    CAPTURE(v0);
    std::vector<float> dwte_ref(static_cast<size_t>(Vl) * C, 0.5f), dwte = dwte_ref;
    std::vector<float> dwpe_ref(static_cast<size_t>(T) * C, -0.5f), dwpe = dwpe_ref;
    sg::cpu::encoder_backward_vocab_range(dwte_ref.data(), dwpe_ref.data(), dout.data(), inp.data(), B, T, C, v0, Vl);
    const sg::cuda::TokenBuckets buckets = sg::cuda::bucket_tokens(inp.data(), B * T, v0, Vl);
    sg::cuda::encoder_backward(dwte.data(), dwpe.data(), dout.data(), buckets.tokens.data(),
                               buckets.offsets.data(), buckets.positions.data(),
                               static_cast<int>(buckets.tokens.size()), B, T, C, kStream);
    CHECK_CLOSE(dwte.data(), dwte_ref.data(), dwte.size(), kFp32, "dwte");
    CHECK_CLOSE(dwpe.data(), dwpe_ref.data(), dwpe.size(), kFp32, "dwpe");
    std::vector<float> part_ref(ref.size()), part(ref.size());
    sg::cpu::embedding_forward_vocab_range(part_ref.data(), inp.data(), wte.data() + static_cast<size_t>(v0) * C, B * T, C, v0, Vl);
    sg::cuda::embedding_forward_vocab_range(part.data(), inp.data(), wte.data() + static_cast<size_t>(v0) * C, B * T, C, v0, Vl, kStream);
    CHECK(part == part_ref);
    sg::cpu::position_add(part_ref.data(), wpe.data(), B, T, C);
    sg::cuda::position_add(part.data(), wpe.data(), B, T, C, kStream);
    CHECK(part == part_ref);
  }
}

TEST_CASE("emulated GPU: label-smoothed classifier loss, top-1/5, pooling, split batch norm") {
  const int N = 6, K = 37;
  const auto logits = random_floats(static_cast<size_t>(N) * K, 51, -3.0f, 3.0f);
  const auto labels = random_ints(N, 52, 0, K - 1);
  std::vector<float> l_ref(N), l(N), d_ref(logits.size()), d = logits;
  sg::cpu::classifier_loss_forward_backward(l_ref.data(), d_ref.data(), logits.data(), labels.data(), 0.1f, 0.25f, N, K);
  sg::cuda::classifier_loss_forward_backward(l.data(), d.data(), d.data(), labels.data(), 0.1f, 0.25f, N, K, kStream);
  CHECK_CLOSE(l.data(), l_ref.data(), N, kFp32, "losses");
  CHECK_CLOSE(d.data(), d_ref.data(), d.size(), kFp32, "dlogits (in place)");
  int64_t top1_ref = 0, top5_ref = 0;
  sg::cpu::classifier_correct(&top1_ref, &top5_ref, logits.data(), labels.data(), N, K);
  std::vector<int32_t> top1(N), top5(N);
  sg::cuda::classifier_correct(top1.data(), top5.data(), logits.data(), labels.data(), N, K, kStream);
  int64_t t1 = 0, t5 = 0;
  for (int i = 0; i < N; ++i) t1 += top1[i], t5 += top5[i];
  CHECK(t1 == top1_ref);
  CHECK(t5 == top5_ref);

  const int HW = 49, C = 24;
  const auto x = random_floats(static_cast<size_t>(N) * HW * C, 53), dy = random_floats(static_cast<size_t>(N) * C, 54);
  std::vector<float> pooled_ref(static_cast<size_t>(N) * C), pooled(pooled_ref.size());
  sg::cpu::global_avgpool_forward(pooled_ref.data(), x.data(), N, HW, C);
  sg::cuda::global_avgpool_forward(pooled.data(), x.data(), N, HW, C, kStream);
  CHECK_CLOSE(pooled.data(), pooled_ref.data(), pooled.size(), kFp32, "avgpool");
  std::vector<float> dx_ref(x.size()), dx(x.size());
  sg::cpu::global_avgpool_backward(dx_ref.data(), dy.data(), N, HW, C);
  sg::cuda::global_avgpool_backward(dx.data(), dy.data(), N, HW, C, kStream);
  CHECK(dx == dx_ref);

  const long M = 600;  // three bands of 256 rows, the last ragged
  const auto a = random_floats(static_cast<size_t>(M) * C, 55, -1.0f, 2.0f), gy = random_floats(static_cast<size_t>(M) * C, 56);
  const auto gamma = random_floats(C, 57, 0.5f, 1.5f), beta = random_floats(C, 58);
  std::vector<double> sums_ref(2 * C), sums(2 * C), scratch(static_cast<size_t>(sg::cuda::batchnorm_sums_scratch(M, C)));
  sg::cpu::batchnorm_sums(sums_ref.data(), a.data(), M, C);
  sg::cuda::batchnorm_sums(sums.data(), scratch.data(), a.data(), M, C, kStream);
  CHECK_CLOSE(sums.data(), sums_ref.data(), sums.size(), kFp32, "sums");
  std::vector<float> mean(C), var(C), mean_ref(C), var_ref(C);
  sg::cpu::batchnorm_stats(mean_ref.data(), var_ref.data(), sums_ref.data(), M, C);
  sg::cuda::batchnorm_stats(mean.data(), var.data(), sums.data(), M, C, kStream);
  CHECK_CLOSE(mean.data(), mean_ref.data(), C, kFp32, "mean");
  CHECK_CLOSE(var.data(), var_ref.data(), C, kFp32, "var");
  std::vector<float> y_ref(a.size()), y(a.size());
  sg::cpu::batchnorm_normalize(y_ref.data(), a.data(), mean.data(), var.data(), gamma.data(), beta.data(), M, C, 1e-5f);
  sg::cuda::batchnorm_normalize(y.data(), a.data(), mean.data(), var.data(), gamma.data(), beta.data(), M, C, 1e-5f, kStream);
  CHECK_CLOSE(y.data(), y_ref.data(), y.size(), kFp32, "normalize");
  std::vector<float> dg_ref(C, 1.0f), db_ref(C, 2.0f), dg = dg_ref, db = db_ref;
  sg::cpu::batchnorm_backward_sums(sums_ref.data(), dg_ref.data(), db_ref.data(), gy.data(), a.data(), mean.data(), var.data(), M, C, 1e-5f);
  sg::cuda::batchnorm_backward_sums(sums.data(), scratch.data(), dg.data(), db.data(), gy.data(), a.data(), mean.data(), var.data(), M, C, 1e-5f, kStream);
  CHECK_CLOSE(sums.data(), sums_ref.data(), sums.size(), kFp32, "backward sums");
  CHECK_CLOSE(dg.data(), dg_ref.data(), C, kFp32, "dgamma");
  CHECK_CLOSE(db.data(), db_ref.data(), C, kFp32, "dbeta");
  std::vector<float> gx_ref(a.size()), gx(a.size());
  sg::cpu::batchnorm_backward_input(gx_ref.data(), sums_ref.data(), gy.data(), a.data(), mean.data(), var.data(), gamma.data(), M, M, C, 1e-5f);
  sg::cuda::batchnorm_backward_input(gx.data(), sums_ref.data(), gy.data(), a.data(), mean.data(), var.data(), gamma.data(), M, M, C, 1e-5f, kStream);
  CHECK_CLOSE(gx.data(), gx_ref.data(), gx.size(), kFp32, "dinp");
  std::vector<float> rm_ref(C, 0.1f), rv_ref(C, 0.9f), rm = rm_ref, rv = rv_ref;
  sg::cpu::batchnorm_update_running(rm_ref.data(), rv_ref.data(), mean.data(), var.data(), M, C, 0.1f);
  sg::cuda::batchnorm_update_running(rm.data(), rv.data(), mean.data(), var.data(), M, C, 0.1f, kStream);
  CHECK_CLOSE(rm.data(), rm_ref.data(), C, kFp32, "running mean");
  CHECK_CLOSE(rv.data(), rv_ref.data(), C, kFp32, "running var");
}

TEST_CASE("emulated GPU: flash attention forward and backward without the T x T matrix") {
  // Head sizes 16, 64 and 32 (kernels of their own) and 24 (the run-time head size's kernels).
  for (const auto& [B, T, C, NH] :
       {std::tuple{2, 45, 32, 2}, {1, 70, 128, 2}, {1, 40, 64, 2}, {1, 33, 48, 2}}) {
    CAPTURE(T);
    CAPTURE(C);
    const auto qkv = random_floats(static_cast<size_t>(B) * T * 3 * C, 61);
    std::vector<float> out_ref(static_cast<size_t>(B) * T * C), out(out_ref.size());
    std::vector<float> att(static_cast<size_t>(B) * NH * T), lse(att.size());  // att: the CPU's
    sg::cpu::attention_forward(out_ref.data(), att.data(), qkv.data(), B, T, C, NH);
    sg::cuda::attention_forward(out.data(), lse.data(), qkv.data(), B, T, C, NH, kStream);
    CHECK_CLOSE(out.data(), out_ref.data(), out.size(), kFp32, "out");
    const auto dout = random_floats(out.size(), 62);
    std::vector<float> dqkv_ref(qkv.size(), 0.5f), dqkv = dqkv_ref, delta(lse.size());
    sg::cpu::attention_backward(dqkv_ref.data(), dout.data(), qkv.data(), att.data(), B, T, C, NH);
    sg::cuda::attention_backward(dqkv.data(), delta.data(), dout.data(), out.data(), qkv.data(), lse.data(), B, T, C, NH, kStream);
    CHECK_CLOSE(dqkv.data(), dqkv_ref.data(), dqkv.size(), kFp32, "dqkv (+=)");
  }
}

TEST_CASE("emulated GPU: max pooling forward and its gather backward, bitwise the reference's") {
  // ResNet's 3x3/2 pad 1 (ragged edges), non-overlapping 2x2/2, and 3x3/1 where one input is the
  // maximum of several windows (its gradient is their sum, in the reference's order).
  const sg::Pool2dShape shapes[] = {{2, 9, 7, 5, 3, 3, 2, 1}, {1, 8, 8, 3, 2, 2, 2, 0},
                                    {1, 6, 5, 4, 3, 3, 1, 1}};
  for (const sg::Pool2dShape& s : shapes) {
    CAPTURE(s.H);
    CAPTURE(s.stride);
    const auto x = random_floats(static_cast<size_t>(s.in_size()), 71, -2.0f, 2.0f);
    const auto dy = random_floats(static_cast<size_t>(s.out_size()), 72);
    std::vector<float> y_ref(static_cast<size_t>(s.out_size())), y(y_ref.size());
    std::vector<int32_t> arg_ref(y_ref.size()), arg(y_ref.size());
    sg::cpu::maxpool_forward_reference(y_ref.data(), arg_ref.data(), x.data(), s);
    sg::cuda::maxpool_forward(y.data(), arg.data(), x.data(), s, kStream);
    CHECK(y == y_ref);
    CHECK(arg == arg_ref);
    std::vector<float> dx_ref(x.size()), dx(x.size(), 7.0f);  // = : the start value is overwritten
    sg::cpu::maxpool_backward_reference(dx_ref.data(), dy.data(), arg_ref.data(), s);
    sg::cuda::maxpool_backward(dx.data(), dy.data(), arg.data(), s, kStream);
    CHECK(dx == dx_ref);
  }
}

TEST_CASE("emulated GPU: the linear layer's bias broadcast and its gradient in fixed row bands") {
  const auto bias = random_floats(19, 80);
  std::vector<float> rows(19 * 7, -1.0f), rows_ref(rows.size(), 0.0f);
  sg::cpu::add_bias(rows_ref.data(), bias.data(), 7, 19);
  sg::cuda::broadcast_bias(rows.data(), bias.data(), 7, 19, kStream);
  CHECK(rows == rows_ref);

  for (const auto& [N, OC] : {std::pair{600, 37}, {5, 300}}) {  // ragged bands; one band
    CAPTURE(N);
    const int C = 3;
    const auto dout = random_floats(static_cast<size_t>(N) * OC, 81);
    const auto inp = random_floats(static_cast<size_t>(N) * C, 82), w = random_floats(static_cast<size_t>(OC) * C, 83);
    std::vector<float> dw(static_cast<size_t>(OC) * C, 0.0f), db_ref(OC, 0.5f), db = db_ref;
    sg::cpu::matmul_backward(nullptr, dw.data(), db_ref.data(), dout.data(), inp.data(), w.data(), N, C, OC);
    std::vector<float> scratch(static_cast<size_t>(sg::cuda::bias_backward_scratch(N, OC)));
    sg::cuda::bias_backward(db.data(), scratch.data(), dout.data(), N, OC, kStream);
    CHECK_CLOSE(db.data(), db_ref.data(), db.size(), kFp32, "dbias (+=)");
  }
}

TEST_CASE("emulated GPU: convolution filters to cuDNN's NHWC layout and their gradient back") {
  const int K = 6, Cg = 5, RS = 9;
  const auto w = random_floats(static_cast<size_t>(K) * Cg * RS, 91);
  std::vector<float> krsc(w.size()), expected(w.size());
  for (int k = 0; k < K; ++k)
    for (int c = 0; c < Cg; ++c)
      for (int rs = 0; rs < RS; ++rs) expected[(static_cast<size_t>(k) * RS + rs) * Cg + c] = w[(static_cast<size_t>(k) * Cg + c) * RS + rs];
  sg::cuda::filter_kcrs_to_krsc(krsc.data(), w.data(), K, Cg, RS, kStream);
  CHECK(krsc == expected);
  std::vector<float> back(w.size(), 1.0f), back_ref(w.size());
  for (size_t i = 0; i < w.size(); ++i) back_ref[i] = 1.0f + w[i];
  sg::cuda::filter_krsc_add_to_kcrs(back.data(), krsc.data(), K, Cg, RS, kStream);
  CHECK(back == back_ref);
}

TEST_CASE("emulated GPU: fills of 2- and 8-byte patterns, the classifier's flag counts") {
  const long n = 1000;
  std::vector<uint16_t> halves(n + 1, 0);
  sg::cuda::fill_pattern<uint16_t>(halves.data(), 0x3f80, n, kStream);
  CHECK(std::count(halves.begin(), halves.end() - 1, 0x3f80) == n);
  CHECK(halves[n] == 0);  // nothing past the end
  std::vector<int64_t> longs(n, 0);
  sg::cuda::fill_pattern<int64_t>(longs.data(), -3, n, kStream);
  CHECK(std::count(longs.begin(), longs.end(), -3) == n);

  const int N = 600;  // more rows than the block's threads
  const auto f1 = random_ints(N, 92, 0, 1), f5 = random_ints(N, 93, 0, 1);
  int64_t top1 = -1, top5 = -1;
  sg::cuda::count_flags(&top1, &top5, f1.data(), f5.data(), N, kStream);
  CHECK(top1 == std::count(f1.begin(), f1.end(), 1));
  CHECK(top5 == std::count(f5.begin(), f5.end(), 1));
}

TEST_CASE("emulated GPU: scale, fill, the 16-bit casts and their accumulation, forward-only classifier loss") {
  const long n = 3001;  // past the emulation's 8 blocks of 256: the grid-stride loops wrap
  const auto x = random_floats(n, 101, -3.0f, 3.0f);
  std::vector<float> got = x;
  sg::cuda::scale(got.data(), 0.375f, n, kStream);
  for (long i = 0; i < n; ++i) REQUIRE(got[i] == x[i] * 0.375f);
  sg::cuda::fill(got.data(), -2.5f, n, kStream);
  CHECK(std::count(got.begin(), got.end(), -2.5f) == n);

  // Round to nearest even into bf16 and fp16, back exactly, and += onto a start value.
  std::vector<__nv_bfloat16> b16(n);
  std::vector<__half> h16(n);
  sg::cuda::cast_to_16bit(b16.data(), x.data(), n, kStream);
  sg::cuda::cast_to_16bit(h16.data(), x.data(), n, kStream);
  std::vector<float> b_back(n), h_back(n), acc(n, 0.5f);
  sg::cuda::cast_from_16bit(b_back.data(), b16.data(), n, kStream);
  sg::cuda::cast_from_16bit(h_back.data(), h16.data(), n, kStream);
  for (long i = 0; i < n; ++i) {
    REQUIRE(b_back[i] == sg::bf16_to_float(sg::float_to_bf16(x[i])));
    REQUIRE(h_back[i] == sg::half_to_float(sg::float_to_half(x[i])));
  }
  sg::cuda::accumulate_16bit(acc.data(), b16.data(), n, kStream);
  for (long i = 0; i < n; ++i) REQUIRE(acc[i] == 0.5f + b_back[i]);

  // Evaluation: losses only, no gradient pointer.
  const int N = 6, K = 1000;
  const auto logits = random_floats(static_cast<size_t>(N) * K, 102, -3.0f, 3.0f);
  const auto labels = random_ints(N, 103, 0, K - 1);
  std::vector<float> l_ref(N), l(N);
  sg::cpu::classifier_loss_forward_backward(l_ref.data(), nullptr, logits.data(), labels.data(), 0.1f, 0.0f, N, K);
  sg::cuda::classifier_loss_forward_backward(l.data(), nullptr, logits.data(), labels.data(), 0.1f, 0.0f, N, K, kStream);
  CHECK_CLOSE(l.data(), l_ref.data(), N, kFp32, "evaluation losses");
}

TEST_CASE("emulated GPU: real launch shapes: C = 768 over many rows, V = 50304, bands past the grid") {
  const int N = 70, C = 768;  // GPT-2 124M's width over more rows than one block takes
  const auto x = random_floats(static_cast<size_t>(N) * C, 111, -2.0f, 3.0f);
  const auto w = random_floats(C, 112, 0.5f, 1.5f), b = random_floats(C, 113);
  std::vector<float> y_ref(x.size()), y(x.size()), m_ref(N), m(N), s_ref(N), s(N);
  sg::cpu::layernorm_forward(y_ref.data(), m_ref.data(), s_ref.data(), x.data(), w.data(), b.data(), N, C);
  sg::cuda::layernorm_forward(y.data(), m.data(), s.data(), x.data(), w.data(), b.data(), N, C, kStream);
  CHECK_CLOSE(y.data(), y_ref.data(), y.size(), kFp32, "layernorm at C = 768");

  const int rows = 3, V = 50257, Vp = 50304;  // the padded GPT-2 vocabulary
  const auto logits = random_floats(static_cast<size_t>(rows) * Vp, 114, -8.0f, 8.0f);
  const auto targets = random_ints(rows, 115, 0, V - 1);
  std::vector<float> l_ref(rows), l(rows), d_ref = logits, d = logits;
  sg::cpu::crossentropy_forward_backward(l_ref.data(), d_ref.data(), d_ref.data(), targets.data(), 1.0f / rows, rows, V, Vp);
  sg::cuda::crossentropy_forward_backward(l.data(), d.data(), d.data(), targets.data(), 1.0f / rows, rows, V, Vp, kStream);
  CHECK_CLOSE(l.data(), l_ref.data(), rows, kFp32, "losses at V = 50304");
  CHECK_CLOSE(d.data(), d_ref.data(), d.size(), kFp32, "dlogits at V = 50304");

  // More bands of 256 rows than the emulation's grid rows (8; 65535 on a GPU): the band loop
  // strides, as ResNet's batch norms beyond 16.8 M rows do on a GPU.
  const long M = 12 * 256 + 17;
  const int K = 5;
  const auto a = random_floats(static_cast<size_t>(M) * K, 116, -1.0f, 2.0f);
  std::vector<double> sums_ref(2 * K), sums(2 * K), scratch(static_cast<size_t>(sg::cuda::batchnorm_sums_scratch(M, K)));
  REQUIRE(sg::cuda::strided_grid((M + 255) / 256) < (M + 255) / 256);
  sg::cpu::batchnorm_sums(sums_ref.data(), a.data(), M, K);
  sg::cuda::batchnorm_sums(sums.data(), scratch.data(), a.data(), M, K, kStream);
  CHECK_CLOSE(sums.data(), sums_ref.data(), sums.size(), kFp32, "sums over 13 bands");
}

namespace {

std::vector<__nv_bfloat16> to_nv_bf16(const std::vector<float>& v) {
  std::vector<__nv_bfloat16> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = __float2bfloat16(v[i]);
  return r;
}
std::vector<float> from_nv_bf16(const std::vector<__nv_bfloat16>& v) {
  std::vector<float> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = __bfloat162float(v[i]);
  return r;
}
// Two bf16 results of the same op computed in fp32 by different formulas or orders: within one
// bf16 rounding of each other (2^-8 relative) plus a small absolute slack near zero.
constexpr Tolerance kOneRounding{1e-5, 1.0 / 128};

}  // namespace

TEST_CASE("emulated GPU: bf16 storage in GELU, layer norm, the bias broadcast and its gradient") {
  // docs/bf16.md: the kernels load bf16 exactly, compute in fp32 and round on the store; against
  // the CPU's bf16 kernels on the same values.
  const long n = 3001;
  const auto x = bf16_bits(random_floats(n, 91, -4.0f, 4.0f)), g = bf16_bits(random_floats(n, 92));
  const auto xf = from_bf16_bits(x), gf = from_bf16_bits(g);
  std::vector<uint16_t> ref(n), dref(n);
  sg::cpu::gelu_forward_bf16(ref.data(), x.data(), n);
  sg::cpu::gelu_backward_bf16(dref.data(), x.data(), g.data(), n);
  const auto x16 = to_nv_bf16(xf), g16 = to_nv_bf16(gf);
  std::vector<__nv_bfloat16> out(n), dinp(n);
  sg::cuda::gelu_forward(out.data(), x16.data(), n, kStream);
  sg::cuda::gelu_backward(dinp.data(), x16.data(), g16.data(), n, kStream);
  CHECK_CLOSE(from_nv_bf16(out).data(), from_bf16_bits(ref).data(), size_t(n), kOneRounding, "gelu forward");
  CHECK_CLOSE(from_nv_bf16(dinp).data(), from_bf16_bits(dref).data(), size_t(n), kOneRounding, "gelu backward");

  const int N = 70, C = 96;  // rows over several blocks of 8 warps
  const auto xs = random_floats(size_t(N) * C, 93, -2.0f, 3.0f);
  const auto w = random_floats(C, 94, 0.5f, 1.5f), b = random_floats(C, 95);
  std::vector<uint16_t> y_ref(xs.size());
  std::vector<float> m_ref(N), s_ref(N), m(N), s(N);
  sg::cpu::layernorm_forward_bf16(y_ref.data(), m_ref.data(), s_ref.data(), xs.data(), w.data(),
                                  b.data(), N, C);
  std::vector<__nv_bfloat16> y(xs.size());
  sg::cuda::layernorm_forward(y.data(), m.data(), s.data(), xs.data(), w.data(), b.data(), N, C,
                              kStream);
  CHECK_CLOSE(from_nv_bf16(y).data(), from_bf16_bits(y_ref).data(), y.size(), kOneRounding, "layernorm out");
  CHECK_CLOSE(s.data(), s_ref.data(), size_t(N), kFp32, "layernorm rstd");

  // The bias broadcast into a bf16 output: the bias rounded, exactly.
  const auto bias = random_floats(19, 96);
  std::vector<__nv_bfloat16> rows(7 * 19);
  sg::cuda::broadcast_bias(rows.data(), bias.data(), 7, 19, kStream);
  const auto rows_f = from_nv_bf16(rows);
  for (int r = 0; r < 7; ++r) {
    for (int o = 0; o < 19; ++o) {
      CHECK(rows_f[r * 19 + o] == sg::bf16_to_float(sg::float_to_bf16(bias[o])));
    }
  }
  // The bias gradient from a bf16 dout: the fp32 sums of its values, in the same fixed order.
  const int rows_n = 600, OC = 33;
  const auto dout_f = from_bf16_bits(bf16_bits(random_floats(size_t(rows_n) * OC, 97)));
  const auto dout16 = to_nv_bf16(dout_f);
  std::vector<float> db16(OC, 0.5f), db32(OC, 0.5f);
  std::vector<float> scratch(static_cast<size_t>(sg::cuda::bias_backward_scratch(rows_n, OC)));
  sg::cuda::bias_backward(db16.data(), scratch.data(), dout16.data(), rows_n, OC, kStream);
  sg::cuda::bias_backward(db32.data(), scratch.data(), dout_f.data(), rows_n, OC, kStream);
  CHECK(db16 == db32);
}

TEST_CASE("emulated GPU: cross-entropy on bf16 logits, fused in place and in two steps") {
  const int N = 6, V = 500, Vp = 512;
  const auto logits16 = bf16_bits(random_floats(size_t(N) * Vp, 98, -5.0f, 5.0f));
  const auto targets = random_ints(N, 99, 0, V - 1);
  const float dloss = 0.125f;
  std::vector<float> loss_ref(N), loss(N);
  std::vector<uint16_t> ref = logits16;
  sg::cpu::crossentropy_forward_backward_bf16(loss_ref.data(), ref.data(), ref.data(),
                                              targets.data(), dloss, N, V, Vp);
  auto d = to_nv_bf16(from_bf16_bits(logits16));
  sg::cuda::crossentropy_forward_backward(loss.data(), d.data(), d.data(), targets.data(), dloss, N,
                                          V, Vp, kStream);
  CHECK_CLOSE(loss.data(), loss_ref.data(), size_t(N), kFp32, "losses (fused)");
  CHECK_CLOSE(from_nv_bf16(d).data(), from_bf16_bits(ref).data(), d.size(), kOneRounding,
              "dlogits (fused, in place)");
  std::vector<uint16_t> p_ref = logits16, g_ref(logits16.size());
  sg::cpu::crossentropy_forward_bf16(loss_ref.data(), p_ref.data(), p_ref.data(), targets.data(),
                                     N, V, Vp);
  sg::cpu::crossentropy_backward_bf16(g_ref.data(), p_ref.data(), targets.data(), dloss, N, V, Vp);
  auto p = to_nv_bf16(from_bf16_bits(logits16));
  std::vector<__nv_bfloat16> g(p.size());
  sg::cuda::crossentropy_forward(loss.data(), p.data(), p.data(), targets.data(), N, V, Vp,
                                 kStream);
  sg::cuda::crossentropy_backward(g.data(), p.data(), targets.data(), dloss, N, V, Vp, kStream);
  CHECK_CLOSE(loss.data(), loss_ref.data(), size_t(N), kFp32, "losses");
  CHECK_CLOSE(from_nv_bf16(p).data(), from_bf16_bits(p_ref).data(), p.size(), kOneRounding,
              "probabilities");
  CHECK_CLOSE(from_nv_bf16(g).data(), from_bf16_bits(g_ref).data(), g.size(), kOneRounding,
              "dlogits from the probabilities");
}

// --- ResNet's kernels on bf16 storage, and the batch norm's fused forms ---------------------

namespace {

// The values rounded to bf16 (nearest even): the inputs a bf16 kernel is given, and the
// reference for its output, the fp32 kernel's rounded.
std::vector<float> rounded(const std::vector<float>& v) { return from_nv_bf16(to_nv_bf16(v)); }
std::vector<float> widened(const std::vector<__nv_bfloat16>& v) { return from_nv_bf16(v); }
// Bit for bit (== would take -0 for 0).
template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}
template <class T>
std::vector<T> as_type(const std::vector<float>& v) {
  if constexpr (std::is_same_v<T, float>) {
    return v;
  } else {
    return to_nv_bf16(v);
  }
}

}  // namespace

// A kernel on bf16 storage widens its inputs exactly, runs the fp32 kernel's arithmetic (the same
// template) and rounds once on the store: on bf16 values its output is the fp32 kernel's output
// on the same values rounded, bit for bit (not just within a rounding). The ReLUs, max pooling
// and the transposes round nothing of their own: they pick, zero or move stored values.
TEST_CASE("emulated GPU: ReLUs, pooling and NCHW->NHWC on bf16 storage, bitwise the fp32 kernels rounded") {
  const long n = 3001;
  const auto x = rounded(random_floats(n, 121, -4.0f, 4.0f)), r = rounded(random_floats(n, 122));
  const auto dy = random_floats(n, 123), g = random_floats(n, 124);  // gradients stay fp32
  const auto x16 = to_nv_bf16(x), r16 = to_nv_bf16(r);
  std::vector<float> y(n);
  std::vector<__nv_bfloat16> y16(n);
  sg::cuda::relu_forward(y.data(), x.data(), n, kStream);
  sg::cuda::relu_forward(y16.data(), x16.data(), n, kStream);
  CHECK(same_bits(widened(y16), rounded(y)));
  std::vector<float> d(n, 0.5f), d16(n, 0.5f);
  sg::cuda::relu_backward(d.data(), y.data(), dy.data(), n, kStream);
  sg::cuda::relu_backward(d16.data(), y16.data(), dy.data(), n, kStream);
  CHECK(same_bits(d16, d));
  std::vector<float> sum = x;
  std::vector<__nv_bfloat16> sum16 = x16;
  sg::cuda::add_relu_inplace(sum.data(), r.data(), n, kStream);
  sg::cuda::add_relu_inplace(sum16.data(), r16.data(), n, kStream);
  CHECK(same_bits(widened(sum16), rounded(sum)));
  // acc = out > 0 ? acc + g : 0 in one pass, bitwise add_inplace then relu_backward, with the
  // ReLU's output in fp32 and in bf16.
  for (const bool bf16 : {false, true}) {
    CAPTURE(bf16);
    std::vector<float> fused = dy, pair = dy;
    if (bf16) {
      sg::cuda::add_relu_backward(fused.data(), g.data(), sum16.data(), n, kStream);
      sg::cuda::add_inplace(pair.data(), g.data(), n, kStream);
      sg::cuda::relu_backward(pair.data(), sum16.data(), pair.data(), n, kStream);
    } else {
      sg::cuda::add_relu_backward(fused.data(), g.data(), sum.data(), n, kStream);
      sg::cuda::add_inplace(pair.data(), g.data(), n, kStream);
      sg::cuda::relu_backward(pair.data(), sum.data(), pair.data(), n, kStream);
    }
    CHECK(same_bits(fused, pair));
  }

  // fp32 images in, the NHWC activations rounded.
  const int N = 3, C = 3, HW = 49;
  const auto img = random_floats(N * C * HW, 125);
  std::vector<float> nhwc(img.size());
  std::vector<__nv_bfloat16> nhwc16(img.size());
  sg::cuda::nchw_to_nhwc(nhwc.data(), img.data(), N, C, HW, kStream);
  sg::cuda::nchw_to_nhwc(nhwc16.data(), img.data(), N, C, HW, kStream);
  CHECK(same_bits(widened(nhwc16), rounded(nhwc)));

  // Max pooling: the same maxima and positions; global average pooling: the same fp32 features.
  const sg::Pool2dShape s{2, 9, 7, 5, 3, 3, 2, 1};
  const auto a = rounded(random_floats(static_cast<size_t>(s.in_size()), 126, -2.0f, 2.0f));
  const auto a16 = to_nv_bf16(a);
  std::vector<float> p(static_cast<size_t>(s.out_size()));
  std::vector<__nv_bfloat16> p16(p.size());
  std::vector<int32_t> arg(p.size()), arg16(p.size());
  sg::cuda::maxpool_forward(p.data(), arg.data(), a.data(), s, kStream);
  sg::cuda::maxpool_forward(p16.data(), arg16.data(), a16.data(), s, kStream);
  CHECK(same_bits(widened(p16), p));
  CHECK(arg16 == arg);
  const int HWp = s.H * s.W;
  std::vector<float> f(static_cast<size_t>(s.N) * s.C), f16(f.size());
  sg::cuda::global_avgpool_forward(f.data(), a.data(), s.N, HWp, s.C, kStream);
  sg::cuda::global_avgpool_forward(f16.data(), a16.data(), s.N, HWp, s.C, kStream);
  CHECK(same_bits(f16, f));
}

TEST_CASE("emulated GPU: batch norm on bf16 storage, bitwise the fp32 kernels rounded") {
  const long M = 600;  // three bands of 256 rows, the last ragged
  const int C = 24;
  const float eps = 1e-5f;
  const size_t n = static_cast<size_t>(M) * C;
  const auto x = rounded(random_floats(n, 131, -1.0f, 2.0f)), res = rounded(random_floats(n, 132));
  const auto dy = random_floats(n, 133), g = random_floats(n, 134);
  const auto gamma = random_floats(C, 135, 0.5f, 1.5f), beta = random_floats(C, 136);
  const auto x16 = to_nv_bf16(x), res16 = to_nv_bf16(res);
  std::vector<double> sums(2 * C), sums16(2 * C), scratch(static_cast<size_t>(sg::cuda::batchnorm_sums_scratch(M, C)));
  sg::cuda::batchnorm_sums(sums.data(), scratch.data(), x.data(), M, C, kStream);
  sg::cuda::batchnorm_sums(sums16.data(), scratch.data(), x16.data(), M, C, kStream);
  CHECK(same_bits(sums16, sums));
  std::vector<float> mean(C), var(C);
  sg::cuda::batchnorm_stats(mean.data(), var.data(), sums.data(), M, C, kStream);

  std::vector<float> y(n), y_relu(n), y_add(n);
  std::vector<__nv_bfloat16> y16(n), y_relu16(n), y_add16(n);
  sg::cuda::batchnorm_normalize(y.data(), x.data(), mean.data(), var.data(), gamma.data(), beta.data(), M, C, eps, kStream);
  sg::cuda::batchnorm_normalize(y16.data(), x16.data(), mean.data(), var.data(), gamma.data(), beta.data(), M, C, eps, kStream);
  CHECK(same_bits(widened(y16), rounded(y)));
  sg::cuda::batchnorm_normalize_relu(y_relu.data(), x.data(), mean.data(), var.data(), gamma.data(), beta.data(), M, C, eps, kStream);
  sg::cuda::batchnorm_normalize_relu(y_relu16.data(), x16.data(), mean.data(), var.data(), gamma.data(), beta.data(), M, C, eps, kStream);
  CHECK(same_bits(widened(y_relu16), rounded(y_relu)));
  // With the residual: the batch norm rounded before the add, as the unfused pair stores it.
  sg::cuda::batchnorm_normalize_add_relu(y_add16.data(), x16.data(), res16.data(), mean.data(), var.data(), gamma.data(), beta.data(), M, C, eps, kStream);
  y_add = rounded(y);
  sg::cuda::add_relu_inplace(y_add.data(), res.data(), static_cast<long>(n), kStream);
  CHECK(same_bits(widened(y_add16), rounded(y_add)));

  // The backward: dout fp32, x (and the mask's output) bf16, dinp bf16.
  const auto relu_out = widened(y_relu16), add_out = widened(y_add16);
  std::vector<float> dg(C, 1.0f), db(C, 2.0f), dg16 = dg, db16 = db;
  sg::cuda::batchnorm_backward_sums(sums.data(), scratch.data(), dg.data(), db.data(), dy.data(), x.data(), mean.data(), var.data(), M, C, eps, kStream);
  sg::cuda::batchnorm_backward_sums(sums16.data(), scratch.data(), dg16.data(), db16.data(), dy.data(), x16.data(), mean.data(), var.data(), M, C, eps, kStream);
  CHECK(same_bits(sums16, sums));
  CHECK(same_bits(dg16, dg));
  CHECK(same_bits(db16, db));
  std::vector<float> dx(n);
  std::vector<__nv_bfloat16> dx16(n);
  sg::cuda::batchnorm_backward_input(dx.data(), sums.data(), dy.data(), x.data(), mean.data(), var.data(), gamma.data(), M, M, C, eps, kStream);
  sg::cuda::batchnorm_backward_input(dx16.data(), sums.data(), dy.data(), x16.data(), mean.data(), var.data(), gamma.data(), M, M, C, eps, kStream);
  CHECK(same_bits(widened(dx16), rounded(dx)));

  sg::cuda::batchnorm_relu_backward_sums(sums.data(), scratch.data(), dg.data(), db.data(), dy.data(), relu_out.data(), x.data(), mean.data(), var.data(), M, C, eps, kStream);
  sg::cuda::batchnorm_relu_backward_sums(sums16.data(), scratch.data(), dg16.data(), db16.data(), dy.data(), y_relu16.data(), x16.data(), mean.data(), var.data(), M, C, eps, kStream);
  CHECK(same_bits(sums16, sums));
  CHECK(same_bits(dg16, dg));
  sg::cuda::batchnorm_relu_backward_input(dx.data(), sums.data(), dy.data(), relu_out.data(), x.data(), mean.data(), var.data(), gamma.data(), M, M, C, eps, kStream);
  sg::cuda::batchnorm_relu_backward_input(dx16.data(), sums.data(), dy.data(), y_relu16.data(), x16.data(), mean.data(), var.data(), gamma.data(), M, M, C, eps, kStream);
  CHECK(same_bits(widened(dx16), rounded(dx)));

  std::vector<float> sum_dy = dy, sum_dy16 = dy;  // written: the gradients' masked sum
  sg::cuda::batchnorm_add_relu_backward_sums(sums.data(), scratch.data(), dg.data(), db.data(), sum_dy.data(), g.data(), add_out.data(), x.data(), mean.data(), var.data(), M, C, eps, kStream);
  sg::cuda::batchnorm_add_relu_backward_sums(sums16.data(), scratch.data(), dg16.data(), db16.data(), sum_dy16.data(), g.data(), y_add16.data(), x16.data(), mean.data(), var.data(), M, C, eps, kStream);
  CHECK(same_bits(sum_dy16, sum_dy));
  CHECK(same_bits(sums16, sums));
  CHECK(same_bits(db16, db));
}

namespace {

// The fused batch-norm kernels against the unfused sequence on the same T values, bit for bit
// (backend.h's contract for the fused ops): the same sums in the same order, nothing rounded that
// the sequence does not round.
template <class T>
void check_fused_batchnorm(const std::vector<float>& x32, const std::vector<float>& res32,
                           const std::vector<float>& dy, const std::vector<float>& g,
                           const std::vector<float>& gamma, const std::vector<float>& beta, long M,
                           int C) {
  const float eps = 1e-5f;
  const size_t n = x32.size();
  const auto x = as_type<T>(x32), res = as_type<T>(res32);
  std::vector<double> sums(2 * C), sums2(2 * C), scratch(static_cast<size_t>(sg::cuda::batchnorm_sums_scratch(M, C)));
  std::vector<float> mean(C), var(C);
  sg::cuda::batchnorm_sums(sums.data(), scratch.data(), x.data(), M, C, kStream);
  sg::cuda::batchnorm_stats(mean.data(), var.data(), sums.data(), M, C, kStream);

  // batch norm + ReLU, batch norm + residual + ReLU: one pass against two.
  std::vector<T> fused(n), pair(n), fused_add(n), pair_add(n);
  sg::cuda::batchnorm_normalize_relu(fused.data(), x.data(), mean.data(), var.data(), gamma.data(), beta.data(), M, C, eps, kStream);
  sg::cuda::batchnorm_normalize(pair.data(), x.data(), mean.data(), var.data(), gamma.data(), beta.data(), M, C, eps, kStream);
  sg::cuda::relu_forward(pair.data(), pair.data(), static_cast<long>(n), kStream);
  CHECK(same_bits(fused, pair));
  sg::cuda::batchnorm_normalize_add_relu(fused_add.data(), x.data(), res.data(), mean.data(), var.data(), gamma.data(), beta.data(), M, C, eps, kStream);
  sg::cuda::batchnorm_normalize(pair_add.data(), x.data(), mean.data(), var.data(), gamma.data(), beta.data(), M, C, eps, kStream);
  sg::cuda::add_relu_inplace(pair_add.data(), res.data(), static_cast<long>(n), kStream);
  CHECK(same_bits(fused_add, pair_add));

  // The ReLU's backward read on the fly against relu_backward's masked copy.
  std::vector<float> dg(C, 1.0f), db(C, 2.0f), dg2 = dg, db2 = db, masked(n);
  std::vector<T> dx(n), dx2(n);
  sg::cuda::batchnorm_relu_backward_sums(sums.data(), scratch.data(), dg.data(), db.data(), dy.data(), fused.data(), x.data(), mean.data(), var.data(), M, C, eps, kStream);
  sg::cuda::batchnorm_relu_backward_input(dx.data(), sums.data(), dy.data(), fused.data(), x.data(), mean.data(), var.data(), gamma.data(), M, M, C, eps, kStream);
  sg::cuda::relu_backward(masked.data(), fused.data(), dy.data(), static_cast<long>(n), kStream);
  sg::cuda::batchnorm_backward_sums(sums2.data(), scratch.data(), dg2.data(), db2.data(), masked.data(), x.data(), mean.data(), var.data(), M, C, eps, kStream);
  sg::cuda::batchnorm_backward_input(dx2.data(), sums2.data(), masked.data(), x.data(), mean.data(), var.data(), gamma.data(), M, M, C, eps, kStream);
  CHECK(same_bits(sums, sums2));
  CHECK(same_bits(dg, dg2));
  CHECK(same_bits(db, db2));
  CHECK(same_bits(dx, dx2));

  // The residual block's sum made in the first pass against add_relu_backward's two ops.
  std::vector<float> d1 = dy, d2 = dy;
  sg::cuda::batchnorm_add_relu_backward_sums(sums.data(), scratch.data(), dg.data(), db.data(), d1.data(), g.data(), fused_add.data(), x.data(), mean.data(), var.data(), M, C, eps, kStream);
  sg::cuda::batchnorm_backward_input(dx.data(), sums.data(), d1.data(), x.data(), mean.data(), var.data(), gamma.data(), M, M, C, eps, kStream);
  sg::cuda::add_inplace(d2.data(), g.data(), static_cast<long>(n), kStream);
  sg::cuda::relu_backward(d2.data(), fused_add.data(), d2.data(), static_cast<long>(n), kStream);
  sg::cuda::batchnorm_backward_sums(sums2.data(), scratch.data(), dg2.data(), db2.data(), d2.data(), x.data(), mean.data(), var.data(), M, C, eps, kStream);
  sg::cuda::batchnorm_backward_input(dx2.data(), sums2.data(), d2.data(), x.data(), mean.data(), var.data(), gamma.data(), M, M, C, eps, kStream);
  CHECK(same_bits(d1, d2));
  CHECK(same_bits(sums, sums2));
  CHECK(same_bits(dg, dg2));
  CHECK(same_bits(db, db2));
  CHECK(same_bits(dx, dx2));
}

}  // namespace

TEST_CASE("emulated GPU: batch norm with ReLU and residual add fused, bitwise the unfused kernels") {
  const long M = 600;
  const int C = 24;
  const size_t n = static_cast<size_t>(M) * C;
  const auto x = random_floats(n, 141, -1.0f, 2.0f), res = random_floats(n, 142);
  const auto dy = random_floats(n, 143), g = random_floats(n, 144);
  const auto gamma = random_floats(C, 145, 0.5f, 1.5f), beta = random_floats(C, 146);
  SUBCASE("fp32") { check_fused_batchnorm<float>(x, res, dy, g, gamma, beta, M, C); }
  SUBCASE("bf16") { check_fused_batchnorm<__nv_bfloat16>(x, res, dy, g, gamma, beta, M, C); }
}

TEST_CASE("emulated GPU: convolution filters cast to bf16 (and transposed) in one kernel, bf16 gradients added back") {
  // The rounding is the only change: to_nv_bf16 rounds to nearest even as the kernel does.
  for (const int RS : {9, 1}) {  // 3x3 (transposed) and 1x1 (the same bytes: a cast)
    CAPTURE(RS);
    const int K = 6, Cg = 5;
    const auto w = random_floats(static_cast<size_t>(K) * Cg * RS, 151);
    std::vector<float> expected(w.size());
    for (int k = 0; k < K; ++k)
      for (int c = 0; c < Cg; ++c)
        for (int rs = 0; rs < RS; ++rs) expected[(static_cast<size_t>(k) * RS + rs) * Cg + c] = w[(static_cast<size_t>(k) * Cg + c) * RS + rs];
    std::vector<__nv_bfloat16> krsc(w.size()), krsc_from16(w.size());
    sg::cuda::filter_kcrs_to_krsc(krsc.data(), w.data(), K, Cg, RS, kStream);
    CHECK(same_bits(widened(krsc), rounded(expected)));
    const auto w16 = to_nv_bf16(w);  // a bf16 weight: moved, not rounded again
    sg::cuda::filter_kcrs_to_krsc(krsc_from16.data(), w16.data(), K, Cg, RS, kStream);
    CHECK(same_bits(widened(krsc_from16), rounded(expected)));
    // A bf16 weight gradient in cuDNN's layout added to the fp32 one in ours (+=), widened.
    std::vector<float> back(w.size(), 1.0f), back_ref(w.size());
    const auto wr = rounded(w);
    for (size_t i = 0; i < w.size(); ++i) back_ref[i] = 1.0f + wr[i];
    sg::cuda::filter_krsc_add_to_kcrs(back.data(), krsc.data(), K, Cg, RS, kStream);
    CHECK(same_bits(back, back_ref));
  }
  // The input gradient cuDNN writes in bf16, widened into the fp32 dinp (=): exact.
  const auto dx = rounded(random_floats(777, 152));
  const auto dx16 = to_nv_bf16(dx);
  std::vector<float> dinp(dx.size(), 3.0f);
  sg::cuda::cast_from_16bit(dinp.data(), dx16.data(), static_cast<long>(dx.size()), kStream);
  CHECK(same_bits(dinp, dx));
}

TEST_CASE("emulated GPU: Llama's RMSNorm, SwiGLU and rotary q/k/v with grouped key/value heads") {
  // RMSNorm: rows over warps and more than one block of rows (the weight's partial sums).
  const int N = 70, C = 45;
  const auto x = random_floats(static_cast<size_t>(N) * C, 301), w = random_floats(C, 302, 0.5f, 1.5f);
  std::vector<float> y_ref(x.size()), y(x.size()), s_ref(N), s(N);
  sg::cpu::rmsnorm_forward(y_ref.data(), s_ref.data(), x.data(), w.data(), N, C, 1e-5f);
  sg::cuda::rmsnorm_forward(y.data(), s.data(), x.data(), w.data(), N, C, 1e-5f, kStream);
  CHECK_CLOSE(y.data(), y_ref.data(), y.size(), kFp32, "rmsnorm out");
  CHECK_CLOSE(s.data(), s_ref.data(), s.size(), kFp32, "rmsnorm rstd");
  const auto dy = random_floats(x.size(), 303);
  auto dx_ref = random_floats(x.size(), 304), dw_ref = random_floats(C, 305);
  auto dx = dx_ref, dw = dw_ref;
  std::vector<float> scratch(static_cast<size_t>(sg::cuda::rmsnorm_backward_scratch(N, C)));
  sg::cpu::rmsnorm_backward(dx_ref.data(), dw_ref.data(), dy.data(), x.data(), w.data(),
                            s_ref.data(), N, C);
  sg::cuda::rmsnorm_backward(dx.data(), dw.data(), scratch.data(), dy.data(), x.data(), w.data(),
                             s_ref.data(), N, C, kStream);
  CHECK_CLOSE(dx.data(), dx_ref.data(), dx.size(), kFp32, "rmsnorm dinp (+=)");
  CHECK_CLOSE(dw.data(), dw_ref.data(), dw.size(), kFp32, "rmsnorm dweight (+=)");

  // SwiGLU: ragged against the blocks.
  const long rows = 7;
  const int I = 131;
  const auto gu = random_floats(static_cast<size_t>(rows) * 2 * I, 306, -5.0f, 5.0f);
  const auto dz = random_floats(static_cast<size_t>(rows) * I, 307);
  std::vector<float> z_ref(static_cast<size_t>(rows) * I), z(z_ref.size());
  std::vector<float> dg_ref(gu.size()), dg(gu.size(), 9.0f);
  sg::cpu::swiglu_forward(z_ref.data(), gu.data(), rows, I);
  sg::cuda::swiglu_forward(z.data(), gu.data(), rows, I, kStream);
  CHECK_CLOSE(z.data(), z_ref.data(), z.size(), kFp32, "swiglu out");
  sg::cpu::swiglu_backward(dg_ref.data(), gu.data(), dz.data(), rows, I);
  sg::cuda::swiglu_backward(dg.data(), gu.data(), dz.data(), rows, I, kStream);
  CHECK_CLOSE(dg.data(), dg_ref.data(), dg.size(), kFp32, "swiglu dinp");

  // Rotary q/k/v: plain attention (NH = NKV), grouped (2 query heads a key head) and one key head.
  const int B = 2, T = 7, HS = 16;
  const auto inv = sg::rope_inverse_frequencies(HS, 10000.0, {});
  std::vector<float> cos_t(T * HS / 2), sin_t(T * HS / 2);
  sg::rope_tables(cos_t.data(), sin_t.data(), T, inv);
  for (const auto [NH, NKV] : {std::pair{4, 4}, std::pair{4, 2}, std::pair{3, 1}}) {
    CAPTURE(NH);
    CAPTURE(NKV);
    const size_t in = static_cast<size_t>(B) * T * (NH + 2 * NKV) * HS;
    const size_t out = static_cast<size_t>(B) * T * 3 * NH * HS;
    const auto qkv = random_floats(in, 308), d = random_floats(out, 309);
    std::vector<float> o_ref(out), o(out), dq_ref(in), dq(in, 9.0f);
    sg::cpu::rope_qkv_forward(o_ref.data(), qkv.data(), cos_t.data(), sin_t.data(), B, T, NH, NKV, HS);
    sg::cuda::rope_qkv_forward(o.data(), qkv.data(), cos_t.data(), sin_t.data(), B, T, NH, NKV, HS,
                               kStream);
    CHECK_CLOSE(o.data(), o_ref.data(), out, kFp32, "rope_qkv out");
    sg::cpu::rope_qkv_backward(dq_ref.data(), d.data(), cos_t.data(), sin_t.data(), B, T, NH, NKV, HS);
    sg::cuda::rope_qkv_backward(dq.data(), d.data(), cos_t.data(), sin_t.data(), B, T, NH, NKV, HS,
                                kStream);
    CHECK_CLOSE(dq.data(), dq_ref.data(), in, kFp32, "rope_qkv dqkv");
  }
}
