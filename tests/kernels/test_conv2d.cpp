// Convolution: the plain reference's backward passes are the exact adjoints of its forward
// (checked with dot products, which hold for any linear map), and oneDNN's forward, backward
// data and backward weights agree with the reference on the shapes ResNet uses (7x7 stride-2
// stem, 3x3, 1x1 stride-2 downsampling), a grouped convolution and ragged sizes. (The 3x3
// stride-1 layers and the 1x1 ones the backend gives to other kernels are tested in
// test_conv2d_winograd.cpp and test_conv2d_gemm.cpp; here every layer runs through oneDNN, on
// the layout the rule picks and on each one forced.)
#include <doctest/doctest.h>

#include <vector>

#include "kernels/conv2d.h"
#include "kernels/matmul_bf16.h"
#include "tests/kernels/conv_algorithms_scope.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/tolerance.h"

using namespace sg::test;

namespace {

std::vector<sg::Conv2dShape> shapes() {
  std::vector<sg::Conv2dShape> out;
  auto add = [&](int N, int H, int W, int C, int K, int R, int stride, int pad, int groups) {
    sg::Conv2dShape s;
    s.N = N, s.H = H, s.W = W, s.C = C, s.K = K, s.R = R, s.S = R;
    s.stride = stride, s.pad = pad, s.groups = groups;
    out.push_back(s);
  };
  add(2, 15, 13, 3, 8, 7, 2, 3, 1);   // stem: 7x7 stride 2 pad 3
  add(2, 9, 9, 20, 16, 3, 1, 1, 1);   // 3x3 stride 1, blocked (20 channels: not Winograd's)
  add(1, 10, 10, 8, 16, 3, 2, 1, 1);  // 3x3 stride 2 (bottleneck v1.5)
  add(2, 11, 12, 16, 32, 3, 2, 1, 1); // 3x3 stride 2 with channels enough for either layout
  add(2, 8, 8, 16, 32, 1, 2, 0, 1);   // 1x1 stride 2 downsample
  add(2, 6, 7, 16, 24, 1, 1, 0, 1);   // 1x1
  add(2, 7, 7, 8, 12, 3, 1, 1, 4);    // grouped
  add(4, 10, 10, 4, 8, 1, 2, 0, 1);   // few channels: a tiny ResNet's downsample
  add(4, 10, 10, 4, 4, 3, 1, 1, 1);   // few channels: 3x3
  add(4, 40, 40, 3, 4, 7, 2, 3, 1);   // few channels: the stem
  add(4, 2, 2, 16, 64, 1, 1, 0, 1);   // 2x2 spatial
  return out;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += double{a[i]} * b[i];
  return s;
}

}  // namespace

TEST_CASE("conv2d reference: backward data and weights are the adjoints of forward") {
  for (const auto& s : shapes()) {
    CAPTURE(s.R);
    CAPTURE(s.stride);
    CAPTURE(s.groups);
    const auto x = random_floats(static_cast<size_t>(s.in_size()), 1);
    const auto w = random_floats(static_cast<size_t>(s.weight_size()), 2);
    const auto dy = random_floats(static_cast<size_t>(s.out_size()), 3);
    std::vector<float> y(dy.size()), dx(x.size()), dw(w.size(), 0.0f);
    sg::cpu::conv2d_forward_reference(y.data(), x.data(), w.data(), s);
    sg::cpu::conv2d_backward_data_reference(dx.data(), dy.data(), w.data(), s);
    sg::cpu::conv2d_backward_weights_reference(dw.data(), dy.data(), x.data(), s);
    // <conv(x, w), dy> = <x, dconv_data(dy, w)> = <w, dconv_weights(dy, x)>
    const double forward = dot(y, dy);
    CHECK(dot(x, dx) == doctest::Approx(forward).epsilon(1e-5));
    CHECK(dot(w, dw) == doctest::Approx(forward).epsilon(1e-5));
  }
}

TEST_CASE("conv2d reference: one output by hand (padding, stride, group)") {
  sg::Conv2dShape s;
  s.N = 1, s.H = 3, s.W = 3, s.C = 2, s.K = 2, s.R = 2, s.S = 2, s.stride = 2, s.pad = 1, s.groups = 2;
  std::vector<float> x(18), w(8, 0.0f), y(static_cast<size_t>(s.out_size()));
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);  // x[h,w,c] = (h*3+w)*2+c
  w[3] = 1.0f;        // output 0 (group 0, channel 0): tap (r=1, s=1)
  w[4 + 0] = 2.0f;    // output 1 (group 1, channel 1): tap (r=0, s=0)
  sg::cpu::conv2d_forward_reference(y.data(), x.data(), w.data(), s);
  REQUIRE(s.P() == 2);
  // Output (p=1, q=1) reads input rows/cols 1..2; tap (1,1) is (2,2), tap (0,0) is (1,1).
  CHECK(y[(1 * 2 + 1) * 2 + 0] == x[(2 * 3 + 2) * 2 + 0]);
  CHECK(y[(1 * 2 + 1) * 2 + 1] == 2.0f * x[(1 * 3 + 1) * 2 + 1]);
  // Output (0,0): tap (0,0) falls in the padding.
  CHECK(y[1] == 0.0f);
}

TEST_CASE("conv2d through oneDNN matches the reference: forward, backward data, weights (+=)") {
  using sg::cpu::SpatialLayout;
  for (const SpatialLayout layout :
       {SpatialLayout::by_isa, SpatialLayout::blocked, SpatialLayout::nhwc}) {
    const ConvAlgorithmsScope direct(sg::cpu::ConvAlgorithms{false, false, layout});
    for (const auto& s : shapes()) {
      CAPTURE(static_cast<int>(layout));
      CAPTURE(s.R);
      CAPTURE(s.stride);
      CAPTURE(s.groups);
      const auto x = random_floats(static_cast<size_t>(s.in_size()), 11);
      const auto w = random_floats(static_cast<size_t>(s.weight_size()), 12);
      const auto dy = random_floats(static_cast<size_t>(s.out_size()), 13);
      const auto dw0 = random_floats(w.size(), 14);  // backward weights accumulates onto this
      std::vector<float> y(dy.size()), y_ref(dy.size()), dx(x.size(), 7.0f), dx_ref(x.size());
      std::vector<float> dw = dw0, dw_ref = dw0;
      sg::cpu::conv2d_forward(y.data(), x.data(), w.data(), s);
      sg::cpu::conv2d_forward_reference(y_ref.data(), x.data(), w.data(), s);
      CHECK_CLOSE(y.data(), y_ref.data(), y.size(), kFp32, "out");
      sg::cpu::conv2d_backward_data(dx.data(), dy.data(), w.data(), s);
      sg::cpu::conv2d_backward_data_reference(dx_ref.data(), dy.data(), w.data(), s);
      CHECK_CLOSE(dx.data(), dx_ref.data(), dx.size(), kFp32, "dinp");
      sg::cpu::conv2d_backward_weights(dw.data(), dy.data(), x.data(), s);
      sg::cpu::conv2d_backward_weights_reference(dw_ref.data(), dy.data(), x.data(), s);
      CHECK_CLOSE(dw.data(), dw_ref.data(), dw.size(), kFp32, "dweight");
      // Both passes in one call: the same bits as the two calls.
      std::vector<float> dx_both(x.size()), dw_both = dw0, dw_again = dw0;
      sg::cpu::conv2d_backward(dx_both.data(), dw_both.data(), dy.data(), x.data(), w.data(), s);
      sg::cpu::conv2d_backward_weights(dw_again.data(), dy.data(), x.data(), s);
      CHECK(dx_both == dx);
      CHECK(dw_both == dw_again);
    }
  }
}

// bf16 (train.precision: bf16): where a shape runs on oneDNN's bf16 kernels, each pass equals the
// float64 reference on the bf16-rounded operands up to fp32 summation (so the operands, and only
// they, were rounded) and differs from the fp32 pass; every shape is within bf16's tolerance of
// the reference on the unrounded operands. The strided 1x1 weight gradients stay fp32 products.
TEST_CASE("conv2d in bf16: oneDNN's bf16 kernels against the reference on rounded operands") {
  const Tolerance fp32_sums{1e-4, 1e-4};  // up to 20 x 9 products summed in fp32
  // against the unrounded operands: each product off by ~2^-8 relative, sums of up to a few
  // hundred terms (the weight gradients'), so errors ~2^-8 sqrt(terms) in absolute terms
  const Tolerance bf16_sums{0.1, 2e-2};
  int ran_bf16 = 0;
  for (const auto& s : shapes()) {
    CAPTURE(s.R);
    CAPTURE(s.C);
    CAPTURE(s.stride);
    CAPTURE(s.groups);
    const auto x = random_floats(static_cast<size_t>(s.in_size()), 21);
    const auto w = random_floats(static_cast<size_t>(s.weight_size()), 22);
    const auto dy = random_floats(static_cast<size_t>(s.out_size()), 23);
    std::vector<float> y(dy.size()), dx(x.size(), 7.0f), dw(w.size(), 0.0f), y32(dy.size());
    bool bf16 = false;
    {
      const ConvAlgorithmsScope scope(sg::cpu::ConvAlgorithms{false, false,
                                                              sg::cpu::SpatialLayout::by_isa, true});
      bf16 = sg::cpu::conv2d_runs_bf16(s);
      sg::cpu::conv2d_forward(y.data(), x.data(), w.data(), s);
      sg::cpu::conv2d_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), s);
    }
    CAPTURE(bf16);
    ran_bf16 += bf16;
    std::vector<float> y_ref(y.size()), dx_ref(x.size()), dw_ref(w.size(), 0.0f);
    sg::cpu::conv2d_forward_reference(y_ref.data(), x.data(), w.data(), s);
    sg::cpu::conv2d_backward_data_reference(dx_ref.data(), dy.data(), w.data(), s);
    sg::cpu::conv2d_backward_weights_reference(dw_ref.data(), dy.data(), x.data(), s);
    CHECK_CLOSE(y.data(), y_ref.data(), y.size(), bf16_sums, "out vs unrounded");
    CHECK_CLOSE(dx.data(), dx_ref.data(), dx.size(), bf16_sums, "dinp vs unrounded");
    CHECK_CLOSE(dw.data(), dw_ref.data(), dw.size(), bf16_sums, "dweight vs unrounded");
    if (!bf16) continue;
    const auto xr = bf16_rounded(x), wr = bf16_rounded(w), dyr = bf16_rounded(dy);
    sg::cpu::conv2d_forward_reference(y_ref.data(), xr.data(), wr.data(), s);
    sg::cpu::conv2d_backward_data_reference(dx_ref.data(), dyr.data(), wr.data(), s);
    CHECK_CLOSE(y.data(), y_ref.data(), y.size(), fp32_sums, "out vs rounded");
    CHECK_CLOSE(dx.data(), dx_ref.data(), dx.size(), fp32_sums, "dinp vs rounded");
    if (!(s.R == 1 && s.stride > 1)) {
      std::fill(dw_ref.begin(), dw_ref.end(), 0.0f);
      sg::cpu::conv2d_backward_weights_reference(dw_ref.data(), dyr.data(), xr.data(), s);
      CHECK_CLOSE(dw.data(), dw_ref.data(), dw.size(), fp32_sums, "dweight vs rounded");
    }
    {
      const ConvAlgorithmsScope scope(kDirect);
      sg::cpu::conv2d_forward(y32.data(), x.data(), w.data(), s);
    }
    CHECK(y32 != y);
  }
  if (!sg::cpu::bf16_matmul_implementation().empty()) {
    CHECK(ran_bf16 >= 5);  // this CPU has bf16 units: most shapes have bf16 kernels
  } else {
    MESSAGE("bf16 convolutions on " << ran_bf16 << " of " << shapes().size() << " shapes");
  }
}
