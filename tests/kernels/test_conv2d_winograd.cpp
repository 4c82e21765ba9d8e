// Winograd F(4x4, 3x3) convolutions (kernels/cpu/conv2d_winograd.cpp): every instruction-set
// variant this CPU runs against the float64 reference, for the three passes, on shapes whose
// tiles fit exactly, overhang the bottom and right edges, or are one tile; the shapes it takes
// and the ones it leaves to oneDNN; the backend routing the 3x3 stride-1 layers to it; and bits
// that do not depend on the thread count.
#include <doctest/doctest.h>
#include <omp.h>

#include <string>
#include <vector>

#include "kernels/conv2d.h"
#include "kernels/cpu/kernel_table.h"
#include "tests/kernels/conv_algorithms_scope.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/tolerance.h"

using namespace sg::test;

namespace {

sg::Conv2dShape shape3x3(int N, int H, int W, int C, int K) {
  sg::Conv2dShape s;
  s.N = N, s.H = H, s.W = W, s.C = C, s.K = K, s.R = 3, s.S = 3, s.stride = 1, s.pad = 1;
  return s;
}

std::vector<sg::Conv2dShape> shapes() {
  return {
      shape3x3(2, 8, 8, 8, 16),     // tiles fit exactly
      shape3x3(2, 9, 9, 16, 8),     // a row and a column of tiles mostly outside
      shape3x3(1, 4, 4, 16, 16),    // one tile
      shape3x3(3, 7, 7, 24, 16),    // ResNet's last stage: 7x7 in 2x2 tiles
      shape3x3(1, 14, 13, 8, 24),   // not square
      shape3x3(2, 16, 12, 32, 16),  // patches inside the image; 16 channels a vector on AVX-512
  };
}

// The transforms scale by up to 8 (A) and 1/24 (G) and sum 36 products where the direct
// convolution sums 9, so the fp32 rounding is some 10x the direct kernel's: measured worst
// 3e-6 absolute on these shapes (outputs of order 1-10); the bound leaves 10x.
constexpr Tolerance kWinograd{2e-4, 1e-4};

std::vector<const sg::cpu::KernelTable*> runnable_variants() {
  std::vector<const sg::cpu::KernelTable*> out;
  for (const auto& v : sg::cpu::kernel_variants()) {
    if (const auto* t = sg::cpu::kernel_table_for(v.isa)) out.push_back(t);
  }
  return out;
}

}  // namespace

TEST_CASE("winograd conv2d: every variant matches the reference (forward, data, weights +=)") {
  for (const sg::cpu::KernelTable* k : runnable_variants()) {
    for (const auto& s : shapes()) {
      INFO("variant " << std::string(k->isa) << ", N H W C K = " << s.N << " " << s.H << " " << s.W
                      << " " << s.C << " " << s.K);
      REQUIRE(sg::cpu::winograd_fits(s));
      const auto x = random_floats(static_cast<size_t>(s.in_size()), 21);
      const auto w = random_floats(static_cast<size_t>(s.weight_size()), 22);
      const auto dy = random_floats(static_cast<size_t>(s.out_size()), 23);
      const auto dw0 = random_floats(w.size(), 24);
      std::vector<float> y(dy.size(), 5.0f), y_ref(dy.size());
      std::vector<float> dx(x.size(), 5.0f), dx_ref(x.size());
      std::vector<float> dw = dw0, dw_ref = dw0;
      k->conv2d_winograd_forward(y.data(), x.data(), w.data(), s);
      sg::cpu::conv2d_forward_reference(y_ref.data(), x.data(), w.data(), s);
      CHECK_CLOSE(y.data(), y_ref.data(), y.size(), kWinograd, "out");
      k->conv2d_winograd_backward_data(dx.data(), dy.data(), w.data(), s);
      sg::cpu::conv2d_backward_data_reference(dx_ref.data(), dy.data(), w.data(), s);
      CHECK_CLOSE(dx.data(), dx_ref.data(), dx.size(), kWinograd, "dinp");
      k->conv2d_winograd_backward_weights(dw.data(), dy.data(), x.data(), s);
      sg::cpu::conv2d_backward_weights_reference(dw_ref.data(), dy.data(), x.data(), s);
      CHECK_CLOSE(dw.data(), dw_ref.data(), dw.size(), kWinograd, "dweight");
    }
  }
}

TEST_CASE("winograd conv2d: the AVX-512 copy's 16-channel vectors give the AVX2 copy's bits") {
  // Both contract the same multiply-adds and call the same products; the transforms' lanes are
  // 16 wide on AVX-512 where the channels allow, 8 on AVX2, with the same arithmetic per lane.
  const sg::cpu::KernelTable* v3 = sg::cpu::kernel_table_for("x86-64-v3");
  const sg::cpu::KernelTable* v4 = sg::cpu::kernel_table_for("x86-64-v4");
  if (v3 == nullptr || v4 == nullptr) {
    MESSAGE("skipped: this CPU does not run both the x86-64-v3 and -v4 kernels");
    return;
  }
  for (const auto& s : shapes()) {
    INFO("N H W C K = " << s.N << " " << s.H << " " << s.W << " " << s.C << " " << s.K);
    const auto x = random_floats(static_cast<size_t>(s.in_size()), 31);
    const auto w = random_floats(static_cast<size_t>(s.weight_size()), 32);
    const auto dy = random_floats(static_cast<size_t>(s.out_size()), 33);
    auto run = [&](const sg::cpu::KernelTable* k) {
      std::vector<float> y(dy.size()), dx(x.size()), dw(w.size(), 0.5f);
      k->conv2d_winograd_forward(y.data(), x.data(), w.data(), s);
      k->conv2d_winograd_backward_data(dx.data(), dy.data(), w.data(), s);
      k->conv2d_winograd_backward_weights(dw.data(), dy.data(), x.data(), s);
      return std::vector<std::vector<float>>{y, dx, dw};
    };
    CHECK(run(v4) == run(v3));
  }
}

TEST_CASE("winograd conv2d: the shapes it takes, and those the CPU convolution gives it") {
  CHECK(sg::cpu::winograd_fits(shape3x3(2, 8, 8, 16, 16)));
  sg::Conv2dShape s = shape3x3(2, 8, 8, 16, 16);
  s.stride = 2;
  CHECK_FALSE(sg::cpu::winograd_fits(s));
  s = shape3x3(2, 8, 8, 16, 16);
  s.groups = 2;
  CHECK_FALSE(sg::cpu::winograd_fits(s));
  s = shape3x3(2, 8, 8, 16, 16);
  s.pad = 0;
  CHECK_FALSE(sg::cpu::winograd_fits(s));
  s = shape3x3(2, 8, 8, 16, 16);
  s.R = s.S = 1, s.pad = 0;
  CHECK_FALSE(sg::cpu::winograd_fits(s));
  CHECK_FALSE(sg::cpu::winograd_fits(shape3x3(2, 8, 8, 4, 16)));  // channels not 8k
  CHECK_FALSE(sg::cpu::winograd_fits(shape3x3(2, 8, 8, 16, 12)));
  // All three passes from 32 tiles of 4x4 up: ResNet-50 at batch 8, its last stage (7x7: 4 tiles
  // an image) included; the weight gradient alone from 16.
  CHECK(sg::cpu::winograd_applies(shape3x3(8, 56, 56, 64, 64)));
  CHECK(sg::cpu::winograd_applies(shape3x3(8, 14, 14, 256, 256)));
  CHECK(sg::cpu::winograd_applies(shape3x3(8, 7, 7, 512, 512)));
  CHECK_FALSE(sg::cpu::winograd_applies(shape3x3(4, 7, 7, 512, 512)));
  CHECK(sg::cpu::winograd_weights_applies(shape3x3(4, 7, 7, 512, 512)));
  CHECK_FALSE(sg::cpu::winograd_weights_applies(shape3x3(2, 7, 7, 512, 512)));
  CHECK(sg::cpu::winograd_applies(shape3x3(2, 16, 13, 8, 8)));  // 2 x 4 x 4 tiles
  CHECK_FALSE(sg::cpu::winograd_applies(shape3x3(1, 16, 13, 8, 8)));
  CHECK(sg::cpu::winograd_weights_applies(shape3x3(1, 16, 13, 8, 8)));
  CHECK_FALSE(sg::cpu::winograd_weights_applies(shape3x3(1, 16, 12, 8, 8)));  // 4 x 3 tiles
  CHECK_FALSE(sg::cpu::winograd_applies(shape3x3(4, 16, 16, 20, 8)));
  CHECK_FALSE(sg::cpu::winograd_weights_applies(shape3x3(4, 16, 16, 20, 8)));
}

TEST_CASE("winograd conv2d: the CPU convolution runs the 3x3 stride-1 layers through it") {
  const auto s = shape3x3(4, 16, 15, 16, 8);
  REQUIRE(sg::cpu::winograd_applies(s));
  const ConvAlgorithmsScope scope(sg::cpu::ConvAlgorithms{true, true});
  const auto x = random_floats(static_cast<size_t>(s.in_size()), 31);
  const auto w = random_floats(static_cast<size_t>(s.weight_size()), 32);
  const auto dy = random_floats(static_cast<size_t>(s.out_size()), 33);
  const auto dw0 = random_floats(w.size(), 34);
  const auto& k = sg::cpu::kernels();
  std::vector<float> y(dy.size()), y_w(dy.size()), dx(x.size()), dx_w(x.size());
  std::vector<float> dw = dw0, dw_w = dw0;
  sg::cpu::conv2d_forward(y.data(), x.data(), w.data(), s);
  k.conv2d_winograd_forward(y_w.data(), x.data(), w.data(), s);
  CHECK(y == y_w);
  sg::cpu::conv2d_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), s);
  k.conv2d_winograd_backward_data(dx_w.data(), dy.data(), w.data(), s);
  k.conv2d_winograd_backward_weights(dw_w.data(), dy.data(), x.data(), s);
  CHECK(dx == dx_w);
  CHECK(dw == dw_w);
}

namespace {

// Which of the CPU convolution's passes go through Winograd for shape s: dx and dw from
// conv2d_backward (and dw from conv2d_backward_weights) compared bit for bit with Winograd's and
// with the direct kernels', which differ from them in rounding.
void check_backward_routes(const sg::Conv2dShape& s, bool data_by_winograd,
                           bool weights_by_winograd) {
  const auto x = random_floats(static_cast<size_t>(s.in_size()), 35);
  const auto w = random_floats(static_cast<size_t>(s.weight_size()), 36);
  const auto dy = random_floats(static_cast<size_t>(s.out_size()), 37);
  const auto dw0 = random_floats(w.size(), 38);
  const auto& k = sg::cpu::kernels();
  std::vector<float> dx_w(x.size()), dw_w = dw0, dx_direct(x.size()), dw_direct = dw0;
  k.conv2d_winograd_backward_data(dx_w.data(), dy.data(), w.data(), s);
  k.conv2d_winograd_backward_weights(dw_w.data(), dy.data(), x.data(), s);
  {
    const ConvAlgorithmsScope scope(kDirect);
    sg::cpu::conv2d_backward(dx_direct.data(), dw_direct.data(), dy.data(), x.data(), w.data(), s);
  }
  REQUIRE(dx_w != dx_direct);  // the two differ in rounding, so the checks below tell them apart
  REQUIRE(dw_w != dw_direct);
  const ConvAlgorithmsScope scope(sg::cpu::ConvAlgorithms{true, true});
  std::vector<float> dx(x.size()), dw = dw0;
  sg::cpu::conv2d_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), s);
  CHECK(dx == (data_by_winograd ? dx_w : dx_direct));
  CHECK(dw == (weights_by_winograd ? dw_w : dw_direct));
  std::vector<float> dw_only = dw0;
  sg::cpu::conv2d_backward_weights(dw_only.data(), dy.data(), x.data(), s);
  CHECK(dw_only == dw);
}

}  // namespace

TEST_CASE("winograd conv2d: from 16 to 31 tiles only the weight gradient runs through it") {
  const auto s = shape3x3(4, 8, 8, 16, 16);  // 16 tiles
  REQUIRE(sg::cpu::winograd_weights_applies(s));
  REQUIRE_FALSE(sg::cpu::winograd_applies(s));
  check_backward_routes(s, false, true);
}

TEST_CASE("winograd conv2d: below 16 tiles no pass runs through it") {
  const auto s = shape3x3(2, 8, 8, 16, 16);  // 8 tiles
  REQUIRE(sg::cpu::winograd_fits(s));
  REQUIRE_FALSE(sg::cpu::winograd_weights_applies(s));
  check_backward_routes(s, false, false);
}

TEST_CASE("winograd conv2d: from 32 tiles every pass runs through it") {
  const auto s = shape3x3(8, 8, 8, 16, 16);  // 32 tiles
  REQUIRE(sg::cpu::winograd_applies(s));
  check_backward_routes(s, true, true);
}

TEST_CASE("winograd conv2d: the same bits on 1 and 3 threads") {
  const auto s = shape3x3(2, 12, 12, 16, 24);
  const auto x = random_floats(static_cast<size_t>(s.in_size()), 41);
  const auto w = random_floats(static_cast<size_t>(s.weight_size()), 42);
  const auto dy = random_floats(static_cast<size_t>(s.out_size()), 43);
  const auto& k = sg::cpu::kernels();
  const int saved = omp_get_max_threads();
  std::vector<std::vector<float>> runs;
  for (int threads : {1, 3}) {
    omp_set_num_threads(threads);
    std::vector<float> y(dy.size()), dx(x.size()), dw(w.size(), 0.0f);
    k.conv2d_winograd_forward(y.data(), x.data(), w.data(), s);
    k.conv2d_winograd_backward_data(dx.data(), dy.data(), w.data(), s);
    k.conv2d_winograd_backward_weights(dw.data(), dy.data(), x.data(), s);
    y.insert(y.end(), dx.begin(), dx.end());
    y.insert(y.end(), dw.begin(), dw.end());
    runs.push_back(y);
  }
  omp_set_num_threads(saved);
  CHECK(runs[0] == runs[1]);
}
