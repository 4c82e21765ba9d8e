// Causal attention against a float64 reference (whose backward is checked by finite
// differences), across several query bands, plus run-to-run bitwise determinism.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "backend/backend.h"
#include "kernels/attention.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/tolerance.h"

using namespace sg::test;

namespace {

struct Shape {
  int B, T, C, NH;
  int hs() const { return C / NH; }
};

struct AttentionRef {
  std::vector<double> out, att, lse;  // lse: log sum_{t2<=t} exp(scaled score)
};

AttentionRef reference_forward(const std::vector<double>& qkv, Shape s) {
  const int hs = s.hs(), C3 = 3 * s.C;
  const double scale = 1.0 / std::sqrt(double(hs));
  AttentionRef r{std::vector<double>(s.B * s.T * s.C, 0.0),
                 std::vector<double>(s.B * s.NH * s.T * s.T, 0.0),
                 std::vector<double>(s.B * s.NH * s.T, 0.0)};
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.NH; ++h)
      for (int t = 0; t < s.T; ++t) {
        const double* q = &qkv[(b * s.T + t) * C3 + h * hs];
        double* p = &r.att[((b * s.NH + h) * s.T + t) * s.T];
        double max_score = -INFINITY;
        for (int t2 = 0; t2 <= t; ++t2) {
          const double* k = &qkv[(b * s.T + t2) * C3 + s.C + h * hs];
          double dotqk = 0.0;
          for (int i = 0; i < hs; ++i) dotqk += q[i] * k[i];
          p[t2] = dotqk * scale;
          max_score = std::max(max_score, p[t2]);
        }
        double sum = 0.0;
        for (int t2 = 0; t2 <= t; ++t2) sum += p[t2] = std::exp(p[t2] - max_score);
        for (int t2 = 0; t2 <= t; ++t2) p[t2] /= sum;
        r.lse[(b * s.NH + h) * s.T + t] = max_score + std::log(sum);
        double* o = &r.out[(b * s.T + t) * s.C + h * hs];
        for (int t2 = 0; t2 <= t; ++t2) {
          const double* v = &qkv[(b * s.T + t2) * C3 + 2 * s.C + h * hs];
          for (int i = 0; i < hs; ++i) o[i] += p[t2] * v[i];
        }
      }
  return r;
}

// Gradient of sum(out * dout) with respect to qkv.
std::vector<double> reference_backward(const std::vector<double>& dout,
                                       const std::vector<double>& qkv, Shape s) {
  const int hs = s.hs(), C3 = 3 * s.C;
  const double scale = 1.0 / std::sqrt(double(hs));
  const auto fwd = reference_forward(qkv, s);
  std::vector<double> dqkv(qkv.size(), 0.0), dp(s.T);
  for (int b = 0; b < s.B; ++b)
    for (int h = 0; h < s.NH; ++h)
      for (int t = 0; t < s.T; ++t) {
        const double* p = &fwd.att[((b * s.NH + h) * s.T + t) * s.T];
        const double* d_o = &dout[(b * s.T + t) * s.C + h * hs];
        double sum_p_dp = 0.0;
        for (int t2 = 0; t2 <= t; ++t2) {
          const double* v = &qkv[(b * s.T + t2) * C3 + 2 * s.C + h * hs];
          double* dv = &dqkv[(b * s.T + t2) * C3 + 2 * s.C + h * hs];
          dp[t2] = 0.0;
          for (int i = 0; i < hs; ++i) {
            dp[t2] += d_o[i] * v[i];
            dv[i] += p[t2] * d_o[i];
          }
          sum_p_dp += p[t2] * dp[t2];
        }
        const double* q = &qkv[(b * s.T + t) * C3 + h * hs];
        double* dq = &dqkv[(b * s.T + t) * C3 + h * hs];
        for (int t2 = 0; t2 <= t; ++t2) {
          const double ds = p[t2] * (dp[t2] - sum_p_dp) * scale;
          const double* k = &qkv[(b * s.T + t2) * C3 + s.C + h * hs];
          double* dk = &dqkv[(b * s.T + t2) * C3 + s.C + h * hs];
          for (int i = 0; i < hs; ++i) {
            dq[i] += ds * k[i];
            dk[i] += ds * q[i];
          }
        }
      }
  return dqkv;
}

std::vector<float> attention_input(Shape s, unsigned seed) {
  // Spread of 2 gives peaked softmax rows, so a wrong scale or mask shows.
  return random_floats(s.B * s.T * 3 * s.C, seed, -2.0f, 2.0f);
}

}  // namespace

TEST_CASE("attention float64 reference backward agrees with finite differences") {
  const Shape s{2, 5, 8, 2};
  auto qkv = to_double(attention_input(s, 71));
  const auto w = to_double(random_floats(s.B * s.T * s.C, 72));
  const auto loss = [&] { return dot(reference_forward(qkv, s).out, w); };
  const auto analytic = reference_backward(w, qkv, s);
  const auto fd = finite_difference(loss, qkv);
  CHECK_CLOSE(analytic.data(), fd.data(), fd.size(), kFiniteDiff64, "dqkv");
}

TEST_CASE("attention forward and backward match float64 over several causal bands") {
  // T = 150 spans three 64-row bands, the last one partial; hs = 16. T = 300: five bands.
  for (const Shape s : {Shape{2, 150, 48, 3}, Shape{1, 7, 12, 1}, Shape{1, 300, 64, 2}}) {
    CAPTURE(s.T);
    const auto qkv = attention_input(s, 73);
    std::vector<float> out(s.B * s.T * s.C, 3.0f);
    std::vector<float> lse(s.B * s.NH * s.T, 3.0f);
    sg::cpu::attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.C, s.NH);
    const auto ref = reference_forward(to_double(qkv), s);
    CHECK_CLOSE(out.data(), ref.out.data(), out.size(), kFp32, "out");
    CHECK_CLOSE(lse.data(), ref.lse.data(), lse.size(), kFp32, "lse");

    const auto dout = random_floats(out.size(), 74);
    const auto dqkv0 = random_floats(qkv.size(), 75);
    auto dqkv = dqkv0;
    sg::cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), lse.data(), s.B, s.T, s.C,
                                s.NH);
    const auto expected = plus(dqkv0, reference_backward(to_double(dout), to_double(qkv), s));
    CHECK_CLOSE(dqkv.data(), expected.data(), dqkv.size(), kFp32, "dqkv");
  }
}

TEST_CASE("attention keeps B*NH*T floats: the storage the model allocates is what it writes") {
  const Shape s{2, 70, 32, 4};
  const sg::AttentionStorage storage = sg::attention_storage_for(sg::BackendKind::Cpu, s.B, s.T, s.NH);
  CHECK(storage.state == static_cast<size_t>(s.B * s.NH * s.T));
  CHECK(storage.scratch == 0);
  // Guard floats after the state: the forward must not write past it.
  const auto qkv = attention_input(s, 78);
  std::vector<float> out(s.B * s.T * s.C), lse(storage.state + 16, -7.0f);
  sg::cpu::attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.C, s.NH);
  for (size_t i = storage.state; i < lse.size(); ++i) CHECK(lse[i] == -7.0f);
}

TEST_CASE("attention is bitwise deterministic run to run") {
  const Shape s{2, 70, 32, 4};
  const auto qkv = attention_input(s, 76);
  const auto dout = random_floats(s.B * s.T * s.C, 77);
  std::vector<float> results[2];
  for (auto& result : results) {
    std::vector<float> out(s.B * s.T * s.C), lse(s.B * s.NH * s.T);
    std::vector<float> dqkv(qkv.size(), 0.0f);
    sg::cpu::attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.T, s.C, s.NH);
    sg::cpu::attention_backward(dqkv.data(), dout.data(), qkv.data(), lse.data(), s.B, s.T, s.C,
                                s.NH);
    result = out;
    result.insert(result.end(), dqkv.begin(), dqkv.end());
  }
  CHECK(results[0] == results[1]);
}
