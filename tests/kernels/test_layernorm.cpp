// layernorm_forward / layernorm_backward, and residual_layernorm_forward, against float64; the
// float64 backward is itself checked by central differences of sum(out * w).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "backend/backend.h"
#include "kernels/layernorm.h"
#include "kernels/residual.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/tolerance.h"

using namespace sg::test;

namespace {

constexpr double kEps = 1e-5;

struct LayerNormRef {
  std::vector<double> out, mean, rstd;
};

LayerNormRef reference_forward(const std::vector<double>& inp, const std::vector<double>& weight,
                               const std::vector<double>& bias, int N, int C) {
  LayerNormRef r{std::vector<double>(N * C), std::vector<double>(N), std::vector<double>(N)};
  for (int n = 0; n < N; ++n) {
    double m = 0.0;
    for (int c = 0; c < C; ++c) m += inp[n * C + c];
    m /= C;
    double var = 0.0;
    for (int c = 0; c < C; ++c) var += (inp[n * C + c] - m) * (inp[n * C + c] - m);
    var /= C;
    const double s = 1.0 / std::sqrt(var + kEps);
    for (int c = 0; c < C; ++c) r.out[n * C + c] = (inp[n * C + c] - m) * s * weight[c] + bias[c];
    r.mean[n] = m;
    r.rstd[n] = s;
  }
  return r;
}

// Gradients of sum(out * dout) with respect to inp, weight, bias.
void reference_backward(std::vector<double>& dinp, std::vector<double>& dweight,
                        std::vector<double>& dbias, const std::vector<double>& dout,
                        const std::vector<double>& inp, const std::vector<double>& weight, int N,
                        int C) {
  const auto fwd = reference_forward(inp, weight, std::vector<double>(C, 0.0), N, C);
  dinp.assign(N * C, 0.0);
  dweight.assign(C, 0.0);
  dbias.assign(C, 0.0);
  for (int n = 0; n < N; ++n) {
    const double m = fwd.mean[n], s = fwd.rstd[n];
    double mean_dnorm = 0.0, mean_dnorm_norm = 0.0;
    for (int c = 0; c < C; ++c) {
      const double norm = (inp[n * C + c] - m) * s;
      const double dnorm = dout[n * C + c] * weight[c];
      mean_dnorm += dnorm / C;
      mean_dnorm_norm += dnorm * norm / C;
      dweight[c] += norm * dout[n * C + c];
      dbias[c] += dout[n * C + c];
    }
    for (int c = 0; c < C; ++c) {
      const double norm = (inp[n * C + c] - m) * s;
      const double dnorm = dout[n * C + c] * weight[c];
      dinp[n * C + c] = s * (dnorm - mean_dnorm - norm * mean_dnorm_norm);
    }
  }
}

// Rows with different offsets and scales, one with a large mean (cancellation test).
std::vector<float> layernorm_input(int N, int C, unsigned seed) {
  auto x = random_floats(N * C, seed);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c) x[n * C + c] = x[n * C + c] * (0.5f + n) + (n == 1 ? 300.0f : n);
  return x;
}

}  // namespace

TEST_CASE("layernorm_forward matches float64, including a row with a large mean") {
  constexpr int N = 6, C = 37;
  const auto inp = layernorm_input(N, C, 51);
  const auto weight = random_floats(C, 52, 0.5f, 1.5f), bias = random_floats(C, 53);
  std::vector<float> out(N * C, 5.0f), mean(N), rstd(N);
  sg::cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(),
                             bias.data(), N, C);
  const auto ref = reference_forward(to_double(inp), to_double(weight), to_double(bias), N, C);
  CHECK_CLOSE(out.data(), ref.out.data(), out.size(), kFp32, "out");
  CHECK_CLOSE(mean.data(), ref.mean.data(), mean.size(), kFp32, "mean");
  CHECK_CLOSE(rstd.data(), ref.rstd.data(), rstd.size(), kFp32, "rstd");
}

TEST_CASE("layernorm float64 reference backward agrees with finite differences") {
  constexpr int N = 3, C = 9;
  auto inp = to_double(layernorm_input(N, C, 54));
  auto weight = to_double(random_floats(C, 55, 0.5f, 1.5f));
  auto bias = to_double(random_floats(C, 56));
  const auto w = to_double(random_floats(N * C, 57));
  const auto loss = [&] { return dot(reference_forward(inp, weight, bias, N, C).out, w); };
  std::vector<double> dinp, dweight, dbias;
  reference_backward(dinp, dweight, dbias, w, inp, weight, N, C);
  const auto fd_inp = finite_difference(loss, inp);
  const auto fd_weight = finite_difference(loss, weight);
  const auto fd_bias = finite_difference(loss, bias);
  CHECK_CLOSE(dinp.data(), fd_inp.data(), dinp.size(), kFiniteDiff64, "dinp");
  CHECK_CLOSE(dweight.data(), fd_weight.data(), dweight.size(), kFiniteDiff64, "dweight");
  CHECK_CLOSE(dbias.data(), fd_bias.data(), dbias.size(), kFiniteDiff64, "dbias");
}

TEST_CASE("layernorm_backward accumulates the float64 gradients") {
  constexpr int N = 70, C = 37;  // enough rows that both threads own several
  const auto inp = layernorm_input(N, C, 58);
  const auto weight = random_floats(C, 59, 0.5f, 1.5f), bias = random_floats(C, 60);
  const auto dout = random_floats(N * C, 61);
  std::vector<float> out(N * C), mean(N), rstd(N);
  sg::cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(),
                             bias.data(), N, C);
  const auto dinp0 = random_floats(N * C, 62);
  const auto dweight0 = random_floats(C, 63), dbias0 = random_floats(C, 64);
  auto dinp = dinp0, dweight = dweight0, dbias = dbias0;
  sg::cpu::layernorm_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                              weight.data(), mean.data(), rstd.data(), N, C);
  std::vector<double> r_dinp, r_dweight, r_dbias;
  reference_backward(r_dinp, r_dweight, r_dbias, to_double(dout), to_double(inp),
                     to_double(weight), N, C);
  const auto e_dinp = plus(dinp0, r_dinp);
  const auto e_dweight = plus(dweight0, r_dweight);
  const auto e_dbias = plus(dbias0, r_dbias);
  CHECK_CLOSE(dinp.data(), e_dinp.data(), dinp.size(), kFp32, "dinp");
  CHECK_CLOSE(dweight.data(), e_dweight.data(), dweight.size(), kFp32, "dweight");
  CHECK_CLOSE(dbias.data(), e_dbias.data(), dbias.size(), kFp32, "dbias");
}

TEST_CASE("residual_layernorm_forward: the residual and the norm, bit for bit the two ops") {
  constexpr int N = 7, C = 45;  // vectors and a scalar tail per row
  const auto a = layernorm_input(N, C, 71), b = random_floats(N * C, 72);
  const auto weight = random_floats(C, 73, 0.5f, 1.5f), bias = random_floats(C, 74);
  std::vector<float> r(N * C, 5.0f), out(N * C, 5.0f), mean(N), rstd(N);
  sg::cpu::residual_layernorm_forward(r.data(), out.data(), mean.data(), rstd.data(), a.data(),
                                      b.data(), weight.data(), bias.data(), N, C);
  std::vector<float> r2(N * C), out2(N * C), mean2(N), rstd2(N);
  sg::cpu::residual_forward(r2.data(), a.data(), b.data(), long{N} * C);
  sg::cpu::layernorm_forward(out2.data(), mean2.data(), rstd2.data(), r2.data(), weight.data(),
                             bias.data(), N, C);
  CHECK(r == r2);
  CHECK(out == out2);
  CHECK(mean == mean2);
  CHECK(rstd == rstd2);
  // And against float64 from the float sum.
  const auto ref = reference_forward(to_double(r2), to_double(weight), to_double(bias), N, C);
  CHECK_CLOSE(out.data(), ref.out.data(), out.size(), kFp32, "out");

  // The CPU backend's op is Backend's composition (what the CUDA backend runs), bit for bit.
  sg::Backend& be = sg::cpu_backend();
  std::vector<float> r3(N * C), out3(N * C), mean3(N), rstd3(N);
  be.residual_layernorm_forward(r3.data(), out3.data(), mean3.data(), rstd3.data(), a.data(),
                                b.data(), weight.data(), bias.data(), N, C);
  std::vector<float> r4(N * C), out4(N * C), mean4(N), rstd4(N);
  be.Backend::residual_layernorm_forward(r4.data(), out4.data(), mean4.data(), rstd4.data(),
                                         a.data(), b.data(), weight.data(), bias.data(), N, C);
  CHECK(r3 == r4);
  CHECK(out3 == out4);
  CHECK(mean3 == mean4);
  CHECK(rstd3 == rstd4);
}
