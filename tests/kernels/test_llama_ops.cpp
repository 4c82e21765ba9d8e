// The Llama family's kernels (kernels/rmsnorm.h, swiglu.h, rope.h) against float64 forwards
// written out plainly here; each backward against central differences of that float64 forward
// (the gradient of sum(out * w)), so a wrong formula cannot hide in a matching reference.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "kernels/rmsnorm.h"
#include "kernels/rope.h"
#include "kernels/swiglu.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/tolerance.h"

using namespace sg::test;

namespace {

std::vector<double> rmsnorm_reference(const std::vector<double>& x, const std::vector<double>& w,
                                      int N, int C, double eps) {
  std::vector<double> out(x.size());
  for (int n = 0; n < N; ++n) {
    double sum = 0;
    for (int c = 0; c < C; ++c) sum += x[n * C + c] * x[n * C + c];
    const double s = 1.0 / std::sqrt(sum / C + eps);
    for (int c = 0; c < C; ++c) out[n * C + c] = w[c] * x[n * C + c] * s;
  }
  return out;
}

std::vector<double> swiglu_reference(const std::vector<double>& x, long N, int I) {
  std::vector<double> out(static_cast<size_t>(N) * I);
  for (long n = 0; n < N; ++n)
    for (int i = 0; i < I; ++i) {
      const double g = x[n * 2 * I + i], u = x[n * 2 * I + I + i];
      out[n * I + i] = g / (1 + std::exp(-g)) * u;
    }
  return out;
}

// transformers' LlamaRotaryEmbedding + apply_rotary_pos_emb + repeat_kv, in float64.
std::vector<double> rope_qkv_reference(const std::vector<double>& qkv, int B, int T, int NH,
                                       int NKV, int HS, const std::vector<double>& inv) {
  const int C = NH * HS, in_row = (NH + 2 * NKV) * HS, half = HS / 2, group = NH / NKV;
  std::vector<double> out(static_cast<size_t>(B) * T * 3 * C);
  for (int r = 0; r < B * T; ++r) {
    const int t = r % T;
    const auto turn = [&](double* o, const double* x) {
      for (int i = 0; i < HS; ++i) {
        const double angle = t * static_cast<double>(static_cast<float>(inv[i % half]));
        const double rotated_half = i < half ? -x[i + half] : x[i - half];
        o[i] = x[i] * std::cos(angle) + rotated_half * std::sin(angle);
      }
    };
    const double* in = qkv.data() + static_cast<size_t>(r) * in_row;
    double* o = out.data() + static_cast<size_t>(r) * 3 * C;
    for (int h = 0; h < NH; ++h) {
      const int kv = h / group;
      turn(o + h * HS, in + h * HS);
      turn(o + C + h * HS, in + C + kv * HS);
      for (int i = 0; i < HS; ++i) o[2 * C + h * HS + i] = in[C + NKV * HS + kv * HS + i];
    }
  }
  return out;
}

}  // namespace

TEST_CASE("rmsnorm_forward and rmsnorm_backward (+=) against float64") {
  constexpr int N = 70, C = 37;  // enough rows that both threads own several
  constexpr float eps = 1e-5f;
  auto x = random_floats(N * C, 1, -2.0f, 2.0f);
  for (int c = 0; c < C; ++c) x[3 * C + c] *= 1e-3f;  // a row of small values: eps matters
  const auto w = random_floats(C, 2, 0.5f, 1.5f);
  std::vector<float> out(N * C, 9.0f), rstd(N);
  sg::cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, eps);
  const auto ref = rmsnorm_reference(to_double(x), to_double(w), N, C, eps);
  CHECK_CLOSE(out.data(), ref.data(), out.size(), kFp32, "out");

  const auto dout = random_floats(N * C, 3);
  const auto dinp0 = random_floats(N * C, 4), dweight0 = random_floats(C, 5);
  auto dinp = dinp0, dweight = dweight0;
  sg::cpu::rmsnorm_backward(dinp.data(), dweight.data(), dout.data(), x.data(), w.data(),
                            rstd.data(), N, C);
  auto xd = to_double(x), wd = to_double(w);
  const auto loss = [&] { return dot(rmsnorm_reference(xd, wd, N, C, eps), to_double(dout)); };
  const auto want_dinp = plus(dinp0, finite_difference(loss, xd));
  const auto want_dweight = plus(dweight0, finite_difference(loss, wd));
  CHECK_CLOSE(dinp.data(), want_dinp.data(), dinp.size(), kFp32, "dinp (+=)");
  CHECK_CLOSE(dweight.data(), want_dweight.data(), dweight.size(), kFp32, "dweight (+=)");
}

TEST_CASE("swiglu_forward and swiglu_backward (=) against float64, saturated gates included") {
  constexpr long N = 9;
  constexpr int I = 33;
  auto x = random_floats(N * 2 * I, 6, -6.0f, 6.0f);
  x[0] = -100.0f;  // exp(-g) overflows in float: silu -> -0, its derivative -> 0
  x[1] = 100.0f;
  std::vector<float> out(N * I);
  sg::cpu::swiglu_forward(out.data(), x.data(), N, I);
  const auto ref = swiglu_reference(to_double(x), N, I);
  CHECK_CLOSE(out.data(), ref.data(), out.size(), kFp32, "out");

  const auto dout = random_floats(N * I, 7);
  std::vector<float> dinp(N * 2 * I, 7.0f);
  sg::cpu::swiglu_backward(dinp.data(), x.data(), dout.data(), N, I);
  auto xd = to_double(x);
  const auto loss = [&] { return dot(swiglu_reference(xd, N, I), to_double(dout)); };
  const auto want = finite_difference(loss, xd);
  CHECK_CLOSE(dinp.data(), want.data(), dinp.size(), kFp32, "dinp");
}

TEST_CASE("rope_qkv forward and backward: rotation, grouped key/value heads, the transpose") {
  constexpr int B = 2, T = 5, HS = 8;
  for (const auto [NH, NKV] : {std::pair{4, 4}, std::pair{4, 2}, std::pair{6, 1}}) {
    CAPTURE(NH);
    CAPTURE(NKV);
    const auto inv = sg::rope_inverse_frequencies(HS, 10000.0, {});
    std::vector<float> cos_table(T * HS / 2), sin_table(T * HS / 2);
    sg::rope_tables(cos_table.data(), sin_table.data(), T, inv);
    const size_t in = static_cast<size_t>(B) * T * (NH + 2 * NKV) * HS;
    const size_t out_n = static_cast<size_t>(B) * T * 3 * NH * HS;
    const auto qkv = random_floats(in, 8 + NKV);
    std::vector<float> out(out_n, 3.0f);
    sg::cpu::rope_qkv_forward(out.data(), qkv.data(), cos_table.data(), sin_table.data(), B, T,
                              NH, NKV, HS);
    const auto ref = rope_qkv_reference(to_double(qkv), B, T, NH, NKV, HS, inv);
    CHECK_CLOSE(out.data(), ref.data(), out_n, kFp32, "out");

    const auto dout = random_floats(out_n, 20 + NKV);
    std::vector<float> dqkv(in, 5.0f);
    sg::cpu::rope_qkv_backward(dqkv.data(), dout.data(), cos_table.data(), sin_table.data(), B,
                               T, NH, NKV, HS);
    auto qd = to_double(qkv);
    const auto loss = [&] {
      return dot(rope_qkv_reference(qd, B, T, NH, NKV, HS, inv), to_double(dout));
    };
    const auto want = finite_difference(loss, qd);
    CHECK_CLOSE(dqkv.data(), want.data(), in, kFp32, "dqkv");
  }
}

TEST_CASE("rope frequencies: theta^(-2i/HS), and Llama 3's scaling by wavelength band") {
  const auto plain = sg::rope_inverse_frequencies(64, 500000.0, {});
  CHECK(plain[0] == 1.0);
  CHECK(plain[1] == doctest::Approx(std::pow(500000.0, -2.0 / 64)));
  // Llama 3.1's settings: factor 8, low 1, high 4, original context 8192.
  const sg::RopeScaling s{8.0, 1.0, 4.0, 8192};
  const auto scaled = sg::rope_inverse_frequencies(64, 500000.0, s);
  int kept = 0, divided = 0, blended = 0;
  for (size_t i = 0; i < plain.size(); ++i) {
    const double wavelength = 2 * M_PI / plain[i];
    if (wavelength < 8192.0 / 4) {
      CHECK(scaled[i] == plain[i]);
      ++kept;
    } else if (wavelength > 8192.0) {
      CHECK(scaled[i] == doctest::Approx(plain[i] / 8));
      ++divided;
    } else {
      CHECK(scaled[i] < plain[i]);  // between the two: a blend of both
      CHECK(scaled[i] > plain[i] / 8);
      ++blended;
    }
  }
  CHECK(kept > 0);
  CHECK(divided > 0);
  CHECK(blended > 0);
}
