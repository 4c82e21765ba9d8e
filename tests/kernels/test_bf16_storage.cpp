// The CPU kernels on bf16 storage (docs/bf16.md), through the dispatched table (what the backend
// runs): each against its fp32 kernel on the same values (an output stored in bf16 is the fp32
// result rounded: bitwise where the arithmetic is the same, within one bf16 rounding where the
// products run on a copy) and against the fp32 kernel on unrounded inputs at bf16's tolerance.
// The linear layer's bf16 operands (activations and the weights' working copy): bitwise the
// product of fp32 operands holding the same values, native (where oneDNN has bf16 products) and
// emulated. The backend's convert, which makes that working copy.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "backend/backend.h"
#include "kernels/cpu/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/matmul_bf16.h"
#include "tensor/act.h"
#include "tensor/dtype.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/tolerance.h"

using namespace sg::test;

namespace {

const sg::cpu::KernelTable& k() { return sg::cpu::kernels(); }

// |a - b| within one bf16 rounding of b (2^-8 relative) plus atol.
void check_within_one_rounding(const std::vector<float>& got, const std::vector<float>& ref,
                               double atol, const char* what) {
  CHECK_CLOSE(got.data(), ref.data(), got.size(), (Tolerance{atol, 1.0 / 256}), what);
}

}  // namespace

TEST_CASE("layernorm_forward_bf16: the fp32 kernel's output rounded, the same statistics") {
  const int N = 37, C = 96;
  const auto inp = random_floats(size_t(N) * C, 1, -3.0f, 5.0f);
  const auto b = random_floats(size_t(N) * C, 2);
  const auto w = random_floats(C, 3, 0.5f, 1.5f), bias = random_floats(C, 4);
  std::vector<float> out32(inp.size()), mean32(N), rstd32(N), mean16(N), rstd16(N);
  std::vector<uint16_t> out16(inp.size());
  k().layernorm_forward(out32.data(), mean32.data(), rstd32.data(), inp.data(), w.data(),
                        bias.data(), N, C);
  k().layernorm_forward_bf16(out16.data(), mean16.data(), rstd16.data(), inp.data(), w.data(),
                             bias.data(), N, C);
  CHECK(out16 == bf16_bits(out32));
  CHECK(mean16 == mean32);
  CHECK(rstd16 == rstd32);

  std::vector<float> res32(inp.size()), res16(inp.size());
  k().residual_layernorm_forward(res32.data(), out32.data(), mean32.data(), rstd32.data(),
                                 inp.data(), b.data(), w.data(), bias.data(), N, C);
  k().residual_layernorm_forward_bf16(res16.data(), out16.data(), mean16.data(), rstd16.data(),
                                      inp.data(), b.data(), w.data(), bias.data(), N, C);
  CHECK(res16 == res32);  // the residual stream stays fp32
  CHECK(out16 == bf16_bits(out32));
  CHECK(rstd16 == rstd32);
}

TEST_CASE("gelu on bf16 storage: the fp32 kernel on the same values, rounded") {
  const long n = 100003;  // odd, threaded
  const auto x = random_floats(size_t(n), 5, -6.0f, 6.0f);
  const auto g = random_floats(size_t(n), 6);
  const auto x16 = bf16_bits(x), g16 = bf16_bits(g);
  const auto xr = from_bf16_bits(x16), gr = from_bf16_bits(g16);
  const size_t count = static_cast<size_t>(n);
  std::vector<float> out32(count), din32(count);
  std::vector<uint16_t> out16(count), din16(count);
  k().gelu_forward(out32.data(), xr.data(), n);
  k().gelu_forward_bf16(out16.data(), x16.data(), n);
  CHECK(out16 == bf16_bits(out32));
  k().gelu_backward(din32.data(), xr.data(), gr.data(), n);
  k().gelu_backward_bf16(din16.data(), x16.data(), g16.data(), n);
  CHECK(din16 == bf16_bits(din32));

  // Against the fp32 op on the unrounded inputs: bf16's tolerance.
  k().gelu_forward(out32.data(), x.data(), n);
  CHECK_CLOSE(from_bf16_bits(out16).data(), out32.data(), count, kBf16, "gelu forward vs fp32");
  k().gelu_backward(din32.data(), x.data(), g.data(), n);
  CHECK_CLOSE(from_bf16_bits(din16).data(), din32.data(), count, kBf16, "gelu backward vs fp32");
}

TEST_CASE("attention on bf16 storage: the fp32 kernels on the same values") {
  struct Shape {
    int B, T, C, NH;
  };
  for (const Shape s : {Shape{2, 70, 64, 4}, Shape{1, 129, 96, 2}}) {
    CAPTURE(s.T);
    const size_t n_qkv = size_t(s.B) * s.T * 3 * s.C, n_out = size_t(s.B) * s.T * s.C;
    const size_t n_lse = size_t(s.B) * s.NH * s.T;
    const auto qkv = random_floats(n_qkv, 7, -2.0f, 2.0f);
    const auto dout = random_floats(n_out, 8);
    const auto qkv16 = bf16_bits(qkv), dout16 = bf16_bits(dout);
    const auto qkvr = from_bf16_bits(qkv16), doutr = from_bf16_bits(dout16);

    std::vector<float> out32(n_out), lse32(n_lse), lse16(n_lse);
    std::vector<uint16_t> out16(n_out);
    k().attention_forward(out32.data(), lse32.data(), qkvr.data(), s.B, s.T, s.C, s.NH);
    k().attention_forward_bf16(out16.data(), lse16.data(), qkv16.data(), s.B, s.T, s.C, s.NH);
    // The bf16 path multiplies dense copies of each head (other strides for the same sgemm):
    // within a rounding of the fp32 kernel's output, and its statistics to fp32's accuracy.
    check_within_one_rounding(from_bf16_bits(out16), out32, 1e-6, "out");
    CHECK_CLOSE(lse16.data(), lse32.data(), n_lse, kFp32, "lse");

    const auto d0 = random_floats(n_qkv, 9);  // dqkv is +=
    std::vector<float> d32 = d0, d16 = d0;
    k().attention_backward(d32.data(), doutr.data(), qkvr.data(), lse32.data(), s.B, s.T, s.C,
                           s.NH);
    k().attention_backward_bf16(d16.data(), dout16.data(), qkv16.data(), lse16.data(), s.B, s.T,
                                s.C, s.NH);
    CHECK_CLOSE(d16.data(), d32.data(), n_qkv, kFp32, "dqkv");

    // Against fp32 on the unrounded tensors: bf16's tolerance.
    k().attention_forward(out32.data(), lse32.data(), qkv.data(), s.B, s.T, s.C, s.NH);
    CHECK_CLOSE(from_bf16_bits(out16).data(), out32.data(), n_out, kBf16, "out vs unrounded fp32");
  }
}

TEST_CASE("bf16 matmul with bf16 activations: bitwise the fp32 operands of the same values") {
  const int n = 200, c = 72, oc = 136;
  const auto inp16 = bf16_bits(random_floats(size_t(n) * c, 11));
  const auto dout16 = bf16_bits(random_floats(size_t(n) * oc, 12));
  const auto inp = from_bf16_bits(inp16), dout = from_bf16_bits(dout16);
  const auto weight = random_floats(size_t(oc) * c, 13), bias = random_floats(oc, 14);
  // The weights' bf16 working copy: the fp32 master rounded, as each product would round it.
  const auto weight16 = bf16_bits(weight);
  const sg::ConstAct w16(weight16.data(), sg::DType::BF16);
  const auto dweight0 = random_floats(size_t(oc) * c, 15);
  using Forward = decltype(&sg::cpu::matmul_forward_bf16);
  using Backward = decltype(&sg::cpu::matmul_backward_bf16);
  struct Path {
    const char* name;
    Forward forward;
    Backward backward;
  };
  std::vector<Path> paths{{"emulated", sg::cpu::matmul_forward_bf16_emulated,
                           sg::cpu::matmul_backward_bf16_emulated}};
  if (!sg::cpu::bf16_matmul_implementation().empty()) {
    paths.push_back({"native", sg::cpu::matmul_forward_bf16, sg::cpu::matmul_backward_bf16});
  } else {
    MESSAGE("native path skipped: this CPU has no bf16 matrix products in oneDNN (needs AVX-512)");
  }
  for (const Path& p : paths) {
    CAPTURE(p.name);
    for (const bool with_bias : {true, false}) {
      CAPTURE(with_bias);
      const float* b = with_bias ? bias.data() : nullptr;
      std::vector<float> out32(size_t(n) * oc);
      std::vector<uint16_t> out16(out32.size());
      p.forward(out32.data(), inp.data(), weight.data(), b, n, c, oc);
      p.forward(sg::Act(out16.data(), sg::DType::BF16),
                sg::ConstAct(inp16.data(), sg::DType::BF16), weight.data(), b, n, c, oc);
      CHECK(out16 == bf16_bits(out32));
      std::vector<float> out_mixed(out32.size());  // bf16 input, fp32 output
      p.forward(out_mixed.data(), sg::ConstAct(inp16.data(), sg::DType::BF16), weight.data(), b,
                n, c, oc);
      CHECK(out_mixed == out32);
      std::vector<uint16_t> out16w(out32.size());  // the weight's bf16 copy too
      p.forward(sg::Act(out16w.data(), sg::DType::BF16),
                sg::ConstAct(inp16.data(), sg::DType::BF16), w16, b, n, c, oc);
      CHECK(out16w == out16);
    }
    std::vector<float> din32(size_t(n) * c), dw32 = dweight0, db32(oc, 0.0f);
    std::vector<float> dw16 = dweight0, db16(oc, 0.0f);
    std::vector<uint16_t> din16(din32.size());
    p.backward(din32.data(), dw32.data(), db32.data(), dout.data(), inp.data(), weight.data(), n,
               c, oc);
    p.backward(sg::Act(din16.data(), sg::DType::BF16), dw16.data(), db16.data(),
               sg::ConstAct(dout16.data(), sg::DType::BF16),
               sg::ConstAct(inp16.data(), sg::DType::BF16), weight.data(), n, c, oc);
    CHECK(din16 == bf16_bits(din32));
    CHECK(dw16 == dw32);
    CHECK(db16 == db32);
    // The weight's bf16 copy (the input gradient's product packs it from bf16 instead of fp32).
    std::vector<float> dw16w = dweight0, db16w(oc, 0.0f);
    std::vector<uint16_t> din16w(din32.size());
    p.backward(sg::Act(din16w.data(), sg::DType::BF16), dw16w.data(), db16w.data(),
               sg::ConstAct(dout16.data(), sg::DType::BF16),
               sg::ConstAct(inp16.data(), sg::DType::BF16), w16, n, c, oc);
    CHECK(din16w == din16);
    CHECK(dw16w == dw32);
    CHECK(db16w == db32);
    // No input gradient wanted (the first layer of a stage).
    std::vector<float> dw_only = dweight0, db_only(oc, 0.0f);
    p.backward(nullptr, dw_only.data(), db_only.data(),
               sg::ConstAct(dout16.data(), sg::DType::BF16),
               sg::ConstAct(inp16.data(), sg::DType::BF16), weight.data(), n, c, oc);
    CHECK(dw_only == dw32);
  }
}

TEST_CASE("the backend's convert: fp32 to bf16 rounded to nearest even, bf16 to fp32 exact") {
  sg::Backend& cpu = sg::cpu_backend();
  // Large enough for the threaded (oneDNN reorder) path, with ties and specials at the start.
  auto x = random_floats(100003, 31);
  x[0] = 1.0f + 1.0f / 256;  // halfway between two bf16 values: ties to even (1.0)
  x[1] = 1.0f + 3.0f / 256;  // halfway: ties to even (1 + 4/256)
  x[2] = -0.0f;
  std::vector<uint16_t> b(x.size());
  cpu.convert(sg::Act(b.data(), sg::DType::BF16), x.data(), static_cast<long>(x.size()));
  CHECK(b == bf16_bits(x));
  CHECK(b[0] == 0x3f80);
  CHECK(b[1] == 0x3f82);
  CHECK(b[2] == 0x8000);
  std::vector<float> back(x.size());
  cpu.convert(back.data(), sg::ConstAct(b.data(), sg::DType::BF16), static_cast<long>(x.size()));
  CHECK(back == from_bf16_bits(b));
  std::vector<float> same(x.size());
  cpu.convert(same.data(), x.data(), static_cast<long>(x.size()));
  CHECK(same == x);
}

TEST_CASE("an fp32 kernel refuses a bf16 activation with a message") {
  uint16_t storage[4] = {};
  const sg::Act a(storage, sg::DType::BF16);
  CHECK_THROWS_WITH_AS(a.f32(), doctest::Contains("stored as BF16"), sg::RunError);
  CHECK(a.b16() == storage);
  float f[2] = {};
  const sg::Act plain(f);
  CHECK_THROWS_AS(plain.b16(), sg::RunError);
  CHECK(static_cast<const float*>(sg::ConstAct(plain).data) == f);
  CHECK(a.at(3).data == storage + 3);
}

TEST_CASE("cross-entropy on bf16 logits: the fp32 kernels' loss and gradient on the same values") {
  const int N = 9, V = 1000, Vp = 1024;
  auto logits_f = random_floats(size_t(N) * Vp, 21, -6.0f, 6.0f);
  logits_f[3] = logits_f[7] = 9.0f;  // a tie at the max in row 0
  const auto targets = random_ints(N, 22, 0, V - 1);
  const auto logits16 = bf16_bits(logits_f);
  const auto logits = from_bf16_bits(logits16);
  const float dloss = 1.0f / 64;
  // Fused, in place.
  std::vector<float> loss32(N), loss16(N), d32 = logits;
  std::vector<uint16_t> d16 = logits16;
  k().crossentropy_forward_backward(loss32.data(), d32.data(), d32.data(), targets.data(), dloss, N,
                                    V, Vp);
  k().crossentropy_forward_backward_bf16(loss16.data(), d16.data(), d16.data(), targets.data(),
                                         dloss, N, V, Vp);
  CHECK_CLOSE(loss16.data(), loss32.data(), size_t(N), kFp32, "losses (fused)");
  // The gradient: the fp32 kernel's rounded (within one rounding: the target's subtraction may
  // be fused into one rounding here), the padding zero.
  check_within_one_rounding(from_bf16_bits(d16), d32, 1e-9, "dlogits");
  for (int n = 0; n < N; ++n) {
    for (int v = V; v < Vp; ++v) CHECK(d16[size_t(n) * Vp + v] == 0);
  }
  // Unfused: probabilities in place, then the gradient from them.
  std::vector<float> p32 = logits;
  std::vector<uint16_t> p16 = logits16;
  k().crossentropy_forward(loss32.data(), p32.data(), p32.data(), targets.data(), N, V, Vp);
  k().crossentropy_forward_bf16(loss16.data(), p16.data(), p16.data(), targets.data(), N, V, Vp);
  CHECK_CLOSE(loss16.data(), loss32.data(), size_t(N), kFp32, "losses");
  check_within_one_rounding(from_bf16_bits(p16), p32, 1e-9, "probabilities");
  std::vector<uint16_t> g16(p16.size());
  std::vector<float> g32(p16.size());
  const auto p16_values = from_bf16_bits(p16);
  k().crossentropy_backward(g32.data(), p16_values.data(), targets.data(), dloss, N, V, Vp);
  k().crossentropy_backward_bf16(g16.data(), p16.data(), targets.data(), dloss, N, V, Vp);
  CHECK(g16 == bf16_bits(g32));  // one product each: exactly the fp32 kernel's, rounded
  // Against the fp32 op on the unrounded logits: the loss at bf16's tolerance.
  k().crossentropy_forward(loss32.data(), p32.data(), logits_f.data(), targets.data(), N, V, Vp);
  CHECK_CLOSE(loss16.data(), loss32.data(), size_t(N), kBf16, "losses vs unrounded logits");
}
