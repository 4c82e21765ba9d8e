// gelu, residual and encoder against float64 loops; GELU also by finite differences.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "kernels/encoder.h"
#include "kernels/gelu.h"
#include "kernels/residual.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/tolerance.h"

using namespace sg::test;

namespace {

double gelu_reference(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
}

double gelu_grad_reference(double x) {
  const double k = std::sqrt(2.0 / M_PI);
  const double u = k * (x + 0.044715 * x * x * x);
  const double th = std::tanh(u);
  return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3.0 * 0.044715 * x * x);
}

// The fast exp inside the GELU kernel must keep ~1e-6 relative accuracy (a few float ulps).
constexpr Tolerance kGelu{1e-12, 1e-6};

std::vector<float> gelu_inputs() {
  // A sweep over [-12, 12] (both tails, where tanh saturates) plus the random bulk.
  std::vector<float> x = random_floats(1000, 21, -4.0f, 4.0f);
  for (int i = 0; i <= 2400; ++i) x.push_back(-12.0f + 0.01f * static_cast<float>(i));
  return x;
}

}  // namespace

TEST_CASE("gelu_forward matches float64 to 1e-6 relative") {
  const auto x = gelu_inputs();
  std::vector<float> out(x.size(), 99.0f);
  sg::cpu::gelu_forward(out.data(), x.data(), static_cast<long>(x.size()));
  std::vector<double> ref(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) ref[i] = gelu_reference(x[i]);
  CHECK_CLOSE(out.data(), ref.data(), out.size(), kGelu, "gelu out");
}

TEST_CASE("gelu_backward writes the analytic derivative over what dinp held") {
  const auto x = gelu_inputs();
  const auto dout = random_floats(x.size(), 22);
  const auto dinp0 = random_floats(x.size(), 23);
  auto dinp = dinp0;
  sg::cpu::gelu_backward(dinp.data(), x.data(), dout.data(), static_cast<long>(x.size()));
  std::vector<double> grad(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) grad[i] = gelu_grad_reference(x[i]) * dout[i];
  CHECK_CLOSE(dinp.data(), grad.data(), dinp.size(), kFp32, "gelu dinp");

  // The reference derivative itself, by central differences.
  std::vector<double> fd(x.size()), analytic(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double h = 1e-6;
    fd[i] = (gelu_reference(x[i] + h) - gelu_reference(x[i] - h)) / (2 * h);
    analytic[i] = gelu_grad_reference(x[i]);
  }
  CHECK_CLOSE(analytic.data(), fd.data(), fd.size(), kFiniteDiff64, "gelu reference derivative");
}

TEST_CASE("residual forward writes a+b, backward accumulates into both") {
  constexpr long n = 1037;
  const auto a = random_floats(n, 31), b = random_floats(n, 32), dout = random_floats(n, 33);
  std::vector<float> out(n, 7.0f);
  sg::cpu::residual_forward(out.data(), a.data(), b.data(), n);
  std::vector<double> ref(n);
  for (long i = 0; i < n; ++i) ref[i] = double{a[i]} + b[i];
  CHECK_CLOSE(out.data(), ref.data(), n, kFp32, "out");

  const auto da0 = random_floats(n, 34), db0 = random_floats(n, 35);
  auto da = da0, db = db0;
  sg::cpu::residual_backward(da.data(), db.data(), dout.data(), n);
  const auto e_da = plus(da0, to_double(dout)), e_db = plus(db0, to_double(dout));
  CHECK_CLOSE(da.data(), e_da.data(), n, kFp32, "da");
  CHECK_CLOSE(db.data(), e_db.data(), n, kFp32, "db");
}

TEST_CASE("encoder forward gathers, backward scatters with repeated tokens") {
  constexpr int B = 3, T = 5, C = 40, V = 6, Vp = 8, maxT = 7;
  const auto wte = random_floats(Vp * C, 41), wpe = random_floats(maxT * C, 42);
  const auto inp = random_ints(B * T, 43, 0, V - 1);  // 15 draws from 6 ids: repeats certain
  std::vector<float> out(B * T * C, -1.0f);
  sg::cpu::encoder_forward(out.data(), inp.data(), wte.data(), wpe.data(), B, T, C);
  std::vector<double> ref(B * T * C);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < C; ++c)
        ref[(b * T + t) * C + c] = double{wte[inp[b * T + t] * C + c]} + wpe[t * C + c];
  CHECK_CLOSE(out.data(), ref.data(), out.size(), kFp32, "out");

  const auto dout = random_floats(B * T * C, 44);
  const auto dwte0 = random_floats(Vp * C, 45), dwpe0 = random_floats(maxT * C, 46);
  auto dwte = dwte0, dwpe = dwpe0;
  sg::cpu::encoder_backward(dwte.data(), dwpe.data(), dout.data(), inp.data(), B, T, C);
  std::vector<double> e_dwte = to_double(dwte0), e_dwpe = to_double(dwpe0);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < C; ++c) {
        e_dwte[inp[b * T + t] * C + c] += dout[(b * T + t) * C + c];
        e_dwpe[t * C + c] += dout[(b * T + t) * C + c];
      }
  CHECK_CLOSE(dwte.data(), e_dwte.data(), dwte.size(), kFp32, "dwte");
  CHECK_CLOSE(dwpe.data(), e_dwpe.data(), dwpe.size(), kFp32, "dwpe");
}
