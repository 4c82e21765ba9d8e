// matmul_forward / matmul_backward against float64 loops, with and without bias / dinp.
#include <doctest/doctest.h>

#include <omp.h>

#include <vector>

#include "kernels/matmul.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/tolerance.h"

using namespace sg::test;

namespace {

constexpr int N = 7, C = 13, OC = 11;  // not multiples of any vector or tile width

std::vector<double> reference_forward(const std::vector<float>& inp,
                                      const std::vector<float>& weight, const float* bias) {
  std::vector<double> out(N * OC);
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < OC; ++o) {
      double sum = bias ? bias[o] : 0.0;
      for (int c = 0; c < C; ++c) sum += double{inp[n * C + c]} * weight[o * C + c];
      out[n * OC + o] = sum;
    }
  return out;
}

}  // namespace

TEST_CASE("matmul_forward matches float64 with and without bias") {
  const auto inp = random_floats(N * C, 1);
  const auto weight = random_floats(OC * C, 2);
  const auto bias = random_floats(OC, 3);
  for (bool with_bias : {true, false}) {
    CAPTURE(with_bias);
    std::vector<float> out(N * OC, 123.0f);  // garbage: forward must overwrite
    sg::cpu::matmul_forward(out.data(), inp.data(), weight.data(),
                            with_bias ? bias.data() : nullptr, N, C, OC);
    const auto ref = reference_forward(inp, weight, with_bias ? bias.data() : nullptr);
    CHECK_CLOSE(out.data(), ref.data(), out.size(), kFp32, "out");
  }
}

TEST_CASE("matmul_backward writes dinp, accumulates dweight and dbias") {
  const auto inp = random_floats(N * C, 4);
  const auto weight = random_floats(OC * C, 5);
  const auto dout = random_floats(N * OC, 6);
  // Gradients start non-zero: the kernel must add to dweight and dbias, and write dinp (an
  // activation's gradient: its buffer holds the last micro-batch's, never zeroed).
  const auto dinp0 = random_floats(N * C, 7);
  const auto dweight0 = random_floats(OC * C, 8);
  const auto dbias0 = random_floats(OC, 9);

  std::vector<double> ref_dinp(N * C, 0.0), ref_dweight(OC * C, 0.0), ref_dbias(OC, 0.0);
  for (int n = 0; n < N; ++n)
    for (int o = 0; o < OC; ++o) {
      const double g = dout[n * OC + o];
      ref_dbias[o] += g;
      for (int c = 0; c < C; ++c) {
        ref_dinp[n * C + c] += g * weight[o * C + c];
        ref_dweight[o * C + c] += g * inp[n * C + c];
      }
    }

  SUBCASE("all gradients") {
    auto dinp = dinp0, dweight = dweight0, dbias = dbias0;
    sg::cpu::matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                             weight.data(), N, C, OC);
    const auto& e_dinp = ref_dinp;
    const auto e_dweight = plus(dweight0, ref_dweight);
    const auto e_dbias = plus(dbias0, ref_dbias);
    CHECK_CLOSE(dinp.data(), e_dinp.data(), dinp.size(), kFp32, "dinp");
    CHECK_CLOSE(dweight.data(), e_dweight.data(), dweight.size(), kFp32, "dweight");
    CHECK_CLOSE(dbias.data(), e_dbias.data(), dbias.size(), kFp32, "dbias");
  }
  SUBCASE("dinp and dbias null") {
    auto dweight = dweight0;
    sg::cpu::matmul_backward(nullptr, dweight.data(), nullptr, dout.data(), inp.data(),
                             weight.data(), N, C, OC);
    const auto e_dweight = plus(dweight0, ref_dweight);
    CHECK_CLOSE(dweight.data(), e_dweight.data(), dweight.size(), kFp32, "dweight");
  }
}

TEST_CASE("matmul at a transformer shape with many rows") {
  // Large enough that OpenBLAS takes its blocked (and, with threads, parallel) path.
  constexpr int n = 300, c = 96, oc = 200;
  const auto inp = random_floats(n * c, 10);
  const auto weight = random_floats(oc * c, 11);
  const auto bias = random_floats(oc, 12);
  const auto dout = random_floats(n * oc, 13);
  std::vector<float> out(n * oc);
  sg::cpu::matmul_forward(out.data(), inp.data(), weight.data(), bias.data(), n, c, oc);
  std::vector<double> ref(n * oc);
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < oc; ++o) {
      double sum = bias[o];
      for (int k = 0; k < c; ++k) sum += double{inp[i * c + k]} * weight[o * c + k];
      ref[i * oc + o] = sum;
    }
  CHECK_CLOSE(out.data(), ref.data(), out.size(), kFp32, "out");

  std::vector<float> dbias(oc, 0.0f), dweight(oc * c, 0.0f), dinp(n * c, 0.0f);
  sg::cpu::matmul_backward(dinp.data(), dweight.data(), dbias.data(), dout.data(), inp.data(),
                           weight.data(), n, c, oc);
  std::vector<double> ref_dbias(oc, 0.0);
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < oc; ++o) ref_dbias[o] += dout[i * oc + o];
  // A sum of 300 terms of size ~1: float32 rounding grows with the count.
  CHECK_CLOSE(dbias.data(), ref_dbias.data(), dbias.size(), (Tolerance{1e-4, 1e-4}), "dbias");
}

// Forward and both gradients (with a bias where `with_bias`) against float64, on 1, 2 and 3
// threads, which must give the same bits. `dinp_tol`: dinp sums OC terms.
void check_matmul_shape_across_threads(int n, int c, int oc, bool with_bias, Tolerance dinp_tol) {
  const auto inp = random_floats(n * c, 20);
  const auto weight = random_floats(static_cast<size_t>(oc) * c, 21);
  const auto bias = random_floats(oc, 25);
  const auto dout = random_floats(static_cast<size_t>(n) * oc, 22);
  const auto dinp0 = random_floats(n * c, 23);
  const auto dweight0 = random_floats(static_cast<size_t>(oc) * c, 24);
  std::vector<double> ref(static_cast<size_t>(n) * oc), ref_dinp(n * c, 0.0),
      ref_dweight(static_cast<size_t>(oc) * c, 0.0);
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < oc; ++o) {
      double sum = with_bias ? bias[o] : 0.0;
      const double g = dout[static_cast<size_t>(i) * oc + o];
      for (int k = 0; k < c; ++k) {
        sum += double{inp[i * c + k]} * weight[static_cast<size_t>(o) * c + k];
        ref_dinp[i * c + k] += g * weight[static_cast<size_t>(o) * c + k];
        ref_dweight[static_cast<size_t>(o) * c + k] += g * inp[i * c + k];
      }
      ref[static_cast<size_t>(i) * oc + o] = sum;
    }
  const auto& e_dinp = ref_dinp;  // written over dinp0
  const auto e_dweight = plus(dweight0, ref_dweight);
  std::vector<std::vector<float>> first;
  const int threads_before = omp_get_max_threads();
  for (int threads : {1, 2, 3}) {
    CAPTURE(threads);
    omp_set_num_threads(threads);
    std::vector<float> out(static_cast<size_t>(n) * oc, 5.0f);
    sg::cpu::matmul_forward(out.data(), inp.data(), weight.data(),
                            with_bias ? bias.data() : nullptr, n, c, oc);
    auto dinp = dinp0, dweight = dweight0;
    sg::cpu::matmul_backward(dinp.data(), dweight.data(), nullptr, dout.data(), inp.data(),
                             weight.data(), n, c, oc);
    CHECK_CLOSE(out.data(), ref.data(), out.size(), kFp32, "out");
    CHECK_CLOSE(dinp.data(), e_dinp.data(), dinp.size(), dinp_tol, "dinp");
    // Sums of n terms of size ~1.
    CHECK_CLOSE(dweight.data(), e_dweight.data(), dweight.size(), kFp32, "dweight");
    if (first.empty()) {
      first = {out, dinp, dweight};
    } else {
      CHECK(out == first[0]);
      CHECK(dinp == first[1]);
      CHECK(dweight == first[2]);
    }
  }
  omp_set_num_threads(threads_before);
}

TEST_CASE("matmul at a language-model head's shape (oneDNN's sgemm): float64, thread counts") {
  // 16400 outputs and 600 rows take the head's oneDNN path (kernels/cpu/matmul.cpp): 17 bands
  // of output columns, the last partial, and for the input gradient 3 bands of rows, the last
  // partial. The results must match float64 and be the same bits for any thread count.
  check_matmul_shape_across_threads(600, 24, 16400, false, Tolerance{1e-3, 1e-4});
}

TEST_CASE("matmul gradients at a layer's shape with 512 rows or more (oneDNN): float64, threads") {
  // 600 rows take the layers' oneDNN path for the gradients: 3 bands of rows for the input
  // gradient, the last partial, and 4 bands of output columns for the weight gradient, the last
  // partial (200 = 3 x 64 + 8). The forward (bias included) is OpenBLAS's.
  check_matmul_shape_across_threads(600, 96, 200, true, kFp32);
}
