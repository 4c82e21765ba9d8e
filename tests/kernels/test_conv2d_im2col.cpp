// A strided spatial layer's weight gradient as one product over the gathered input windows
// (kernels/cpu/conv2d_im2col.cpp): against the float64 reference (ragged sizes, padding on every
// side, a window that hangs over the image's edge, strides 2 and 3, non-square kernels), the
// shapes it takes, and the CPU convolution routing those layers' weight gradients to it unless
// SINGULARITY_CONV says otherwise.
#include <doctest/doctest.h>

#include <vector>

#include "kernels/conv2d.h"
#include "tests/kernels/conv_algorithms_scope.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/tolerance.h"

using namespace sg::test;

namespace {

sg::Conv2dShape shape(int N, int H, int W, int C, int K, int R, int S, int stride, int pad) {
  sg::Conv2dShape s;
  s.N = N, s.H = H, s.W = W, s.C = C, s.K = K, s.R = R, s.S = S, s.stride = stride, s.pad = pad;
  return s;
}

std::vector<sg::Conv2dShape> shapes() {
  return {
      shape(2, 8, 8, 16, 24, 3, 3, 2, 1),    // a ResNet bottleneck's strided 3x3
      shape(3, 9, 7, 16, 8, 3, 3, 2, 1),     // odd sizes: the last window reaches the far edge
      shape(2, 10, 11, 24, 16, 3, 3, 3, 0),  // stride 3, no padding: pixels no window reads
      shape(2, 9, 9, 16, 20, 5, 5, 2, 2),    // 5x5
      shape(2, 8, 7, 16, 12, 3, 1, 2, 0),    // a kernel taller than wide
      shape(1, 12, 12, 32, 16, 7, 7, 2, 3),  // a 7x7 stem on enough channels
  };
}

}  // namespace

TEST_CASE("im2col weight gradient matches the reference (+= into the weights' gradient)") {
  for (const auto& s : shapes()) {
    INFO("N H W C K R S stride pad = " << s.N << " " << s.H << " " << s.W << " " << s.C << " "
                                       << s.K << " " << s.R << " " << s.S << " " << s.stride
                                       << " " << s.pad);
    REQUIRE(sg::cpu::conv2d_im2col_weights_applies(s));
    const auto x = random_floats(static_cast<size_t>(s.in_size()), 71);
    const auto dy = random_floats(static_cast<size_t>(s.out_size()), 72);
    const auto dw0 = random_floats(static_cast<size_t>(s.weight_size()), 73);
    auto dw = dw0, ref = dw0;
    sg::cpu::conv2d_im2col_backward_weights(dw.data(), dy.data(), x.data(), s);
    sg::cpu::conv2d_backward_weights_reference(ref.data(), dy.data(), x.data(), s);
    CHECK_CLOSE(dw.data(), ref.data(), ref.size(), kFp32, "dweight");
    // The same bits on a second run (the scratch is reused).
    auto again = dw0;
    sg::cpu::conv2d_im2col_backward_weights(again.data(), dy.data(), x.data(), s);
    CHECK(again == dw);
    // In bands of 7 output pixels (the last one partial), as large batches run.
    const long row = static_cast<long>(s.R) * s.S * s.C;
    REQUIRE((s.out_size() / s.K) % 7 != 0);
    auto banded = dw0;
    sg::cpu::conv2d_im2col_backward_weights(banded.data(), dy.data(), x.data(), s, 7 * row);
    CHECK_CLOSE(banded.data(), ref.data(), ref.size(), kFp32, "dweight (bands)");
  }
}

TEST_CASE("im2col weight gradient: the shapes it takes") {
  CHECK(sg::cpu::conv2d_im2col_weights_applies(shape(8, 56, 56, 128, 128, 3, 3, 2, 1)));
  CHECK_FALSE(sg::cpu::conv2d_im2col_weights_applies(shape(8, 56, 56, 64, 64, 3, 3, 1, 1)));
  CHECK_FALSE(sg::cpu::conv2d_im2col_weights_applies(shape(8, 56, 56, 256, 512, 1, 1, 2, 0)));
  CHECK_FALSE(sg::cpu::conv2d_im2col_weights_applies(shape(8, 224, 224, 3, 64, 7, 7, 2, 3)));
  sg::Conv2dShape grouped = shape(8, 56, 56, 128, 128, 3, 3, 2, 1);
  grouped.groups = 2;
  CHECK_FALSE(sg::cpu::conv2d_im2col_weights_applies(grouped));
}

TEST_CASE("im2col weight gradient: the CPU convolution takes it for strided layers") {
  const sg::Conv2dShape s = shape(2, 8, 8, 16, 24, 3, 3, 2, 1);
  const auto x = random_floats(static_cast<size_t>(s.in_size()), 81);
  const auto w = random_floats(static_cast<size_t>(s.weight_size()), 82);
  const auto dy = random_floats(static_cast<size_t>(s.out_size()), 83);
  const auto dw0 = random_floats(w.size(), 84);
  auto want = dw0;
  sg::cpu::conv2d_im2col_backward_weights(want.data(), dy.data(), x.data(), s);
  std::vector<float> dx_alone(x.size());
  {
    const ConvAlgorithmsScope direct(kDirect);
    sg::cpu::conv2d_backward_data(dx_alone.data(), dy.data(), w.data(), s);
  }
  for (const sg::cpu::ConvAlgorithms chosen : {sg::cpu::ConvAlgorithms{true, true},
                                               sg::cpu::ConvAlgorithms{false, true}}) {
    const ConvAlgorithmsScope scope(chosen);
    std::vector<float> dx(x.size(), 3.0f);
    auto dw = dw0;
    sg::cpu::conv2d_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), s);
    CHECK(dw == want);
    CHECK(dx == dx_alone);  // the input gradient stays oneDNN's direct pass
    auto dw_alone = dw0;
    sg::cpu::conv2d_backward_weights(dw_alone.data(), dy.data(), x.data(), s);
    CHECK(dw_alone == want);
  }
  // SINGULARITY_CONV=direct (or winograd): oneDNN's direct pass, the same numbers to rounding.
  for (const sg::cpu::ConvAlgorithms chosen : {kDirect, sg::cpu::ConvAlgorithms{true, false}}) {
    const ConvAlgorithmsScope scope(chosen);
    auto dw = dw0;
    sg::cpu::conv2d_backward_weights(dw.data(), dy.data(), x.data(), s);
    CHECK_CLOSE(dw.data(), want.data(), want.size(), kFp32, "dweight (direct)");
  }
}
