// 1x1 convolutions as matrix products (kernels/cpu/conv2d_gemm.cpp): the three passes against the
// float64 reference at stride 1 and 2 (ragged sizes, few channels, the subsampled input gradient
// zero where no output reads), the shapes they take, the CPU convolution routing the 1x1 layers
// to them, repeatable bits, and SINGULARITY_CONV's values.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "kernels/conv2d.h"
#include "tests/error_of.h"
#include "tests/kernels/conv_algorithms_scope.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/tolerance.h"

using namespace sg::test;

namespace {

sg::Conv2dShape shape1x1(int N, int H, int W, int C, int K, int stride) {
  sg::Conv2dShape s;
  s.N = N, s.H = H, s.W = W, s.C = C, s.K = K, s.stride = stride;
  return s;
}

std::vector<sg::Conv2dShape> shapes() {
  return {
      shape1x1(2, 6, 7, 16, 24, 1),   // a bottleneck's 1x1
      shape1x1(2, 8, 8, 16, 32, 2),   // the downsample shortcut
      shape1x1(3, 9, 7, 12, 8, 2),    // odd sizes: the last row and column are read
      shape1x1(2, 10, 11, 8, 4, 3),   // stride 3: rows and columns no output reads
      shape1x1(4, 10, 10, 4, 8, 2),   // few channels: a tiny ResNet's downsample
      shape1x1(4, 2, 2, 16, 64, 1),   // 2x2 spatial
      shape1x1(1, 5, 5, 3, 5, 1),     // 3 channels
      // oneDNN's matmul primitive: a reducing layer's forward (C > K; also the two strided
      // shapes above with C > K) and a widening one's weight gradient (K >= 2C, few rows; also
      // the downsample shortcuts above); the others are sgemm's.
      shape1x1(2, 7, 6, 96, 24, 1),
      shape1x1(2, 5, 6, 24, 96, 1),
  };
}

struct Passes {
  std::vector<float> y, dx, dw;
};

Passes run_gemm(const sg::Conv2dShape& s, const std::vector<float>& x, const std::vector<float>& w,
                const std::vector<float>& dy, const std::vector<float>& dw0) {
  Passes r{std::vector<float>(dy.size(), 5.0f), std::vector<float>(x.size(), 7.0f), dw0};
  sg::cpu::conv2d_1x1_forward(r.y.data(), x.data(), w.data(), s);
  sg::cpu::conv2d_1x1_backward_data(r.dx.data(), dy.data(), w.data(), s);
  sg::cpu::conv2d_1x1_backward_weights(r.dw.data(), dy.data(), x.data(), s);
  return r;
}

}  // namespace

TEST_CASE("1x1 conv2d as a product matches the reference (forward, data, weights +=)") {
  for (const auto& s : shapes()) {
    INFO("N H W C K stride = " << s.N << " " << s.H << " " << s.W << " " << s.C << " " << s.K
                               << " " << s.stride);
    REQUIRE(sg::cpu::conv2d_1x1_fits(s));
    const auto x = random_floats(static_cast<size_t>(s.in_size()), 51);
    const auto w = random_floats(static_cast<size_t>(s.weight_size()), 52);
    const auto dy = random_floats(static_cast<size_t>(s.out_size()), 53);
    const auto dw0 = random_floats(w.size(), 54);
    const Passes got = run_gemm(s, x, w, dy, dw0);
    std::vector<float> y_ref(dy.size()), dx_ref(x.size()), dw_ref = dw0;
    sg::cpu::conv2d_forward_reference(y_ref.data(), x.data(), w.data(), s);
    sg::cpu::conv2d_backward_data_reference(dx_ref.data(), dy.data(), w.data(), s);
    sg::cpu::conv2d_backward_weights_reference(dw_ref.data(), dy.data(), x.data(), s);
    CHECK_CLOSE(got.y.data(), y_ref.data(), y_ref.size(), kFp32, "out");
    CHECK_CLOSE(got.dx.data(), dx_ref.data(), dx_ref.size(), kFp32, "dinp");
    CHECK_CLOSE(got.dw.data(), dw_ref.data(), dw_ref.size(), kFp32, "dweight");
    // The same bits on a second run (the scratch is reused, the products are deterministic).
    const Passes again = run_gemm(s, x, w, dy, dw0);
    CHECK(again.y == got.y);
    CHECK(again.dx == got.dx);
    CHECK(again.dw == got.dw);
  }
}

TEST_CASE("1x1 conv2d as a product: the shapes it takes") {
  CHECK(sg::cpu::conv2d_1x1_fits(shape1x1(2, 8, 8, 3, 5, 1)));
  CHECK(sg::cpu::conv2d_1x1_fits(shape1x1(2, 8, 8, 16, 16, 2)));
  sg::Conv2dShape s = shape1x1(2, 8, 8, 16, 16, 1);
  s.pad = 1;
  CHECK_FALSE(sg::cpu::conv2d_1x1_fits(s));
  s = shape1x1(2, 8, 8, 16, 16, 1);
  s.groups = 2;
  CHECK_FALSE(sg::cpu::conv2d_1x1_fits(s));
  s = shape1x1(2, 8, 8, 16, 16, 1);
  s.R = s.S = 3, s.pad = 1;
  CHECK_FALSE(sg::cpu::conv2d_1x1_fits(s));
}

TEST_CASE("1x1 conv2d: the CPU convolution runs the 1x1 layers as products unless told not to") {
  for (const auto& s : {shape1x1(2, 6, 7, 16, 24, 1), shape1x1(2, 8, 8, 16, 32, 2)}) {
    const auto x = random_floats(static_cast<size_t>(s.in_size()), 61);
    const auto w = random_floats(static_cast<size_t>(s.weight_size()), 62);
    const auto dy = random_floats(static_cast<size_t>(s.out_size()), 63);
    const auto dw0 = random_floats(w.size(), 64);
    const Passes want = run_gemm(s, x, w, dy, dw0);
    for (const sg::cpu::ConvAlgorithms chosen : {sg::cpu::ConvAlgorithms{true, true},
                                                 sg::cpu::ConvAlgorithms{false, true}}) {
      const ConvAlgorithmsScope scope(chosen);
      std::vector<float> y(dy.size()), dx(x.size()), dw = dw0;
      sg::cpu::conv2d_forward(y.data(), x.data(), w.data(), s);
      sg::cpu::conv2d_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), s);
      CHECK(y == want.y);
      CHECK(dx == want.dx);
      CHECK(dw == want.dw);
    }
    // oneDNN's direct kernel instead: the same numbers to rounding, other bits (its forward
    // blocks the channel sum differently). Only the forward is compared bitwise here: equal
    // bits would mean the choice was ignored.
    const ConvAlgorithmsScope direct(kDirect);
    std::vector<float> y(dy.size());
    sg::cpu::conv2d_forward(y.data(), x.data(), w.data(), s);
    CHECK_CLOSE(y.data(), want.y.data(), y.size(), kFp32, "out (direct)");
  }
}

TEST_CASE("SINGULARITY_CONV chooses the convolution algorithms") {
  using sg::cpu::ConvAlgorithms;
  CHECK(sg::cpu::conv_algorithms_from_env(nullptr) == ConvAlgorithms{true, true});
  CHECK(sg::cpu::conv_algorithms_from_env("") == ConvAlgorithms{true, true});
  CHECK(sg::cpu::conv_algorithms_from_env("auto") == ConvAlgorithms{true, true});
  CHECK(sg::cpu::conv_algorithms_from_env("winograd") == ConvAlgorithms{true, false});
  CHECK(sg::cpu::conv_algorithms_from_env("gemm") == ConvAlgorithms{false, true});
  CHECK(sg::cpu::conv_algorithms_from_env("direct") == ConvAlgorithms{false, false});
  const std::string e = error_of([] { sg::cpu::conv_algorithms_from_env("fft"); });
  CHECK(e.find("SINGULARITY_CONV=fft") != std::string::npos);
  CHECK(e.find("auto (the default), winograd, gemm or direct") != std::string::npos);
}
