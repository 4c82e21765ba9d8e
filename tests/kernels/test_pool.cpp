// Pooling and the image layout change: every variant's max pool against the reference, bit for
// bit (values, argmax, the routed gradient), the reference against a hand check, global average
// pooling against float64.
#include <doctest/doctest.h>

#include <vector>

#include "kernels/cpu/kernel_table.h"
#include "kernels/pool.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/tolerance.h"

using namespace sg::test;

TEST_CASE("max pool reference: window maxima, padding never wins, gradient to the max") {
  sg::Pool2dShape s;
  s.N = 1, s.H = 3, s.W = 3, s.C = 1, s.R = 3, s.S = 3, s.stride = 2, s.pad = 1;
  const std::vector<float> x = {-5, -4, -3, -2, -1, -6, -7, -8, -9};  // all negative
  std::vector<float> y(static_cast<size_t>(s.out_size()));
  std::vector<int32_t> argmax(y.size());
  sg::cpu::maxpool_forward_reference(y.data(), argmax.data(), x.data(), s);
  REQUIRE(y.size() == 4);
  CHECK(y[0] == -1.0f);  // window rows 0..1, cols 0..1 (padding excluded)
  CHECK(y[1] == -1.0f);
  CHECK(y[2] == -1.0f);
  CHECK(y[3] == -1.0f);
  std::vector<float> dx(x.size());
  const std::vector<float> dy = {1, 2, 3, 4};
  sg::cpu::maxpool_backward_reference(dx.data(), dy.data(), argmax.data(), s);
  CHECK(dx[4] == 10.0f);  // every window's max is the centre
  CHECK(dx[0] == 0.0f);
}

TEST_CASE("max pool: every variant is the reference's bits (ResNet's 3x3 stride 2 pad 1, others)") {
  struct Case {
    int H, W, C, R, stride, pad;
  };
  // ResNet's pool on even and odd sizes, a 2x2 stride-2 pool, overlapping windows at stride 1.
  for (const Case& k : {Case{16, 16, 24, 3, 2, 1}, Case{15, 11, 24, 3, 2, 1}, Case{9, 8, 5, 2, 2, 0},
                        Case{7, 9, 17, 3, 1, 1}}) {
    sg::Pool2dShape s;
    s.N = 2, s.H = k.H, s.W = k.W, s.C = k.C, s.R = s.S = k.R, s.stride = k.stride, s.pad = k.pad;
    CAPTURE(k.H);
    CAPTURE(k.stride);
    auto x = random_floats(static_cast<size_t>(s.in_size()), 5);
    const size_t C = static_cast<size_t>(s.C);  // ties with the next pixel: the first max wins
    for (size_t i = 0; i + C < x.size(); i += 3) x[i] = x[i + C];
    const auto dy = random_floats(static_cast<size_t>(s.out_size()), 6);
    std::vector<float> y_ref(dy.size()), dx_ref(x.size());
    std::vector<int32_t> ws_ref(dy.size());
    sg::cpu::maxpool_forward_reference(y_ref.data(), ws_ref.data(), x.data(), s);
    sg::cpu::maxpool_backward_reference(dx_ref.data(), dy.data(), ws_ref.data(), s);
    for (const auto& variant : sg::cpu::kernel_variants()) {
      const sg::cpu::KernelTable* k_table = sg::cpu::kernel_table_for(variant.isa);
      if (k_table == nullptr) continue;
      CAPTURE(variant.isa);
      std::vector<float> y(dy.size(), 5.0f), dx(x.size(), 3.0f);
      std::vector<int32_t> ws(dy.size(), 7);
      k_table->maxpool_forward(y.data(), ws.data(), x.data(), s);
      CHECK(y == y_ref);
      CHECK(ws == ws_ref);
      k_table->maxpool_backward(dx.data(), dy.data(), ws.data(), s);
      CHECK(dx == dx_ref);
    }
  }
}

TEST_CASE("global average pooling and its gradient against float64") {
  const int N = 3, HW = 49, C = 10;
  const auto x = random_floats(static_cast<size_t>(N) * HW * C, 7);
  const auto dy = random_floats(static_cast<size_t>(N) * C, 8);
  std::vector<float> y(static_cast<size_t>(N) * C), dx(x.size(), 9.0f);
  sg::cpu::global_avgpool_forward(y.data(), x.data(), N, HW, C);
  sg::cpu::global_avgpool_backward(dx.data(), dy.data(), N, HW, C);
  std::vector<double> y_ref(y.size(), 0.0), dx_ref(x.size());
  for (int n = 0; n < N; ++n) {
    for (int i = 0; i < HW; ++i) {
      for (int c = 0; c < C; ++c) {
        y_ref[n * C + c] += double{x[(n * HW + i) * C + c]} / HW;
        dx_ref[(n * HW + i) * C + c] = double{dy[n * C + c]} / HW;
      }
    }
  }
  CHECK_CLOSE(y.data(), y_ref.data(), y.size(), kFp32, "out");
  CHECK_CLOSE(dx.data(), dx_ref.data(), dx.size(), kFp32, "dinp");
}

TEST_CASE("NCHW images become NHWC") {
  const int N = 2, C = 3, HW = 5;
  std::vector<float> x(N * C * HW), y(x.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  sg::cpu::nchw_to_nhwc(y.data(), x.data(), N, C, HW);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int i = 0; i < HW; ++i) REQUIRE(y[(n * HW + i) * C + c] == x[(n * C + c) * HW + i]);
}
