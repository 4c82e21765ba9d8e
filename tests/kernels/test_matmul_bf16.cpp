// matmul_forward_bf16 / matmul_backward_bf16 (kernels/matmul_bf16.h) against float64 loops over
// the bf16-rounded operands (only fp32 summation error allowed), against the fp32 product at a
// bf16 tolerance, and the same bits on 1, 2 and 3 threads: oneDNN's bf16 products where this CPU
// has them (skipped with the reason elsewhere) and the emulation that runs on other CPUs (always).
#include <doctest/doctest.h>

#include <omp.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/matmul.h"
#include "kernels/matmul_bf16.h"
#include "tensor/dtype.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/tolerance.h"

using namespace sg::test;

namespace {

bool have_bf16_products() {
  if (!sg::cpu::bf16_matmul_implementation().empty()) return true;
  MESSAGE("skipped: this CPU has no bf16 matrix products in oneDNN (needs AVX-512)");
  return false;
}

struct Reference {
  std::vector<double> out, dinp, dweight, dbias;
};

// float64 products of the given (already rounded or not) operands; dweight and dbias start at 0.
Reference reference(const std::vector<float>& inp, const std::vector<float>& weight,
                    const std::vector<float>& dout, const std::vector<float>& bias, int n, int c,
                    int oc) {
  Reference r{std::vector<double>(size_t(n) * oc), std::vector<double>(size_t(n) * c, 0.0),
              std::vector<double>(size_t(oc) * c, 0.0), std::vector<double>(oc, 0.0)};
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < oc; ++o) {
      double sum = bias[o];
      const double g = dout[size_t(i) * oc + o];
      r.dbias[o] += g;
      for (int k = 0; k < c; ++k) {
        const double w = weight[size_t(o) * c + k];
        sum += double{inp[size_t(i) * c + k]} * w;
        r.dinp[size_t(i) * c + k] += g * w;
        r.dweight[size_t(o) * c + k] += g * inp[size_t(i) * c + k];
      }
      r.out[size_t(i) * oc + o] = sum;
    }
  return r;
}

struct Result {
  std::vector<float> out, dinp, dweight, dbias;
};

enum class Path { native, emulated };

Result run_bf16(Path path, const std::vector<float>& inp, const std::vector<float>& weight,
                const std::vector<float>& dout, const std::vector<float>& bias,
                const std::vector<float>& dweight0, int n, int c, int oc) {
  Result r{std::vector<float>(size_t(n) * oc, 7.0f), std::vector<float>(size_t(n) * c, 7.0f),
           dweight0, std::vector<float>(oc, 0.0f)};
  const bool native = path == Path::native;
  (native ? sg::cpu::matmul_forward_bf16 : sg::cpu::matmul_forward_bf16_emulated)(
      r.out.data(), inp.data(), weight.data(), bias.data(), n, c, oc);
  (native ? sg::cpu::matmul_backward_bf16 : sg::cpu::matmul_backward_bf16_emulated)(
      r.dinp.data(), r.dweight.data(), r.dbias.data(), dout.data(), inp.data(), weight.data(), n,
      c, oc);
  return r;
}

// One shape: against float64 on the rounded operands (sums of fp32 products of bf16 values: the
// fp32 tolerance, looser for the long sums), against float64 on the unrounded ones at bf16's,
// different from the fp32 kernel's bits (the rounding happened), and the same bits on 1-3 threads.
void check_shape(Path path, int n, int c, int oc) {
  CAPTURE(path == Path::native ? "native" : "emulated");
  CAPTURE(n);
  CAPTURE(c);
  CAPTURE(oc);
  const auto inp = random_floats(size_t(n) * c, 31);
  const auto weight = random_floats(size_t(oc) * c, 32);
  const auto dout = random_floats(size_t(n) * oc, 33);
  const auto bias = random_floats(oc, 34);
  const auto dweight0 = random_floats(size_t(oc) * c, 35);
  const Reference exact = reference(bf16_rounded(inp), bf16_rounded(weight), bf16_rounded(dout), bias, n, c, oc);
  const Reference plain = reference(inp, weight, dout, bias, n, c, oc);
  const Tolerance long_sum{1e-4, 1e-4};  // up to 300 terms of size ~1 summed in fp32

  const int threads_before = omp_get_max_threads();
  Result first;
  for (int threads : {1, 2, 3}) {
    CAPTURE(threads);
    omp_set_num_threads(threads);
    const Result got = run_bf16(path, inp, weight, dout, bias, dweight0, n, c, oc);
    CHECK_CLOSE(got.out.data(), exact.out.data(), got.out.size(), long_sum, "out");
    CHECK_CLOSE(got.dinp.data(), exact.dinp.data(), got.dinp.size(), long_sum, "dinp");
    const auto e_dweight = plus(dweight0, exact.dweight);
    CHECK_CLOSE(got.dweight.data(), e_dweight.data(), got.dweight.size(), long_sum, "dweight");
    CHECK_CLOSE(got.dbias.data(), plain.dbias.data(), got.dbias.size(), long_sum, "dbias (fp32)");
    // bf16's 8 bits against the unrounded operands: an error ~ 2^-9 sqrt(terms) relative.
    const Tolerance bf16_sum{0.05, 2e-2};
    CHECK_CLOSE(got.out.data(), plain.out.data(), got.out.size(), bf16_sum, "out vs unrounded");
    if (threads == 1) {
      first = got;
    } else {
      CHECK(got.out == first.out);
      CHECK(got.dinp == first.dinp);
      CHECK(got.dweight == first.dweight);
    }
  }
  omp_set_num_threads(threads_before);

  // dbias sums the unrounded dout: the fp32 kernel's bits.
  std::vector<float> dbias32(oc, 0.0f);
  sg::cpu::matmul_bias_backward(dbias32.data(), dout.data(), n, oc);
  CHECK(first.dbias == dbias32);

  // The fp32 kernel on the same operands gives other bits: the products were rounded.
  std::vector<float> out32(size_t(n) * oc);
  sg::cpu::matmul_forward(out32.data(), inp.data(), weight.data(), bias.data(), n, c, oc);
  CHECK(out32 != first.out);
}

}  // namespace

TEST_CASE("round_to_bf16 rounds as float_to_bf16: ties to even, inf and NaN kept") {
  std::vector<float> in = random_floats(100003, 30, -1e4f, 1e4f);  // odd length, threaded
  in[0] = 1.0f + 1.0f / 256;   // tie -> even (down)
  in[1] = 1.0f + 3.0f / 256;   // tie -> even (up)
  in[2] = std::numeric_limits<float>::infinity();
  in[3] = -std::numeric_limits<float>::infinity();
  in[4] = std::nanf("");
  in[5] = std::numeric_limits<float>::max();  // rounds up to inf, as float_to_bf16
  in[6] = std::numeric_limits<float>::denorm_min();
  std::vector<uint16_t> out(in.size());
  sg::cpu::round_to_bf16(out.data(), in.data(), static_cast<long>(in.size()));
  int mismatches = 0;
  for (size_t i = 0; i < in.size(); ++i) mismatches += out[i] != sg::float_to_bf16(in[i]);
  CHECK(mismatches == 0);
  CHECK(sg::bf16_to_float(out[0]) == 1.0f);
  CHECK(sg::bf16_to_float(out[1]) == 1.0f + 4.0f / 256);
  CHECK(std::isnan(sg::bf16_to_float(out[4])));
}

TEST_CASE("bf16 matmul: fewer rows than one band, odd sizes") {
  check_shape(Path::emulated, 7, 13, 11);
  if (have_bf16_products()) check_shape(Path::native, 7, 13, 11);
}

TEST_CASE("bf16 matmul: several bands of rows, the last partial, in every product") {
  // 300 rows: bands of 128, 128 and 44 for out and dinp; 200 outputs: 128 and 72 for dweight.
  check_shape(Path::emulated, 300, 96, 200);
  if (have_bf16_products()) check_shape(Path::native, 300, 96, 200);
}
