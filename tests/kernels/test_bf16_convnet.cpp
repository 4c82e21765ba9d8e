// The convolutional network's ops on bf16 storage (docs/bf16.md), through the CPU backend (its
// dispatch on the activations' type and the dispatched kernels): each against the same op on
// fp32 tensors holding the same values. The arithmetic is the same (fp32 and double from exact
// bf16 loads), so an output stored in bf16 is the fp32 output rounded and an fp32 one (the
// gradients of unit outputs, the weights', the statistics) the fp32 op's, bit for bit.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "kernels/conv2d.h"
#include "kernels/pool.h"
#include "tensor/act.h"
#include "tensor/dtype.h"
#include "tests/kernels/conv_algorithms_scope.h"
#include "tests/kernels/kernel_test_util.h"
#include "util/error.h"

using namespace sg::test;

namespace {

// bf16 values: random floats rounded, as bits and as their exact fp32 values.
struct Values {
  std::vector<uint16_t> b;
  std::vector<float> f;
  Values(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f)
      : b(bf16_bits(random_floats(n, seed, lo, hi))), f(from_bf16_bits(b)) {}
  sg::ConstAct act() const { return {b.data(), sg::DType::BF16}; }
};
sg::Act act16(std::vector<uint16_t>& v) { return {v.data(), sg::DType::BF16}; }

sg::Backend& be() { return sg::cpu_backend(); }

}  // namespace

TEST_CASE("batch norm on bf16 storage: the fp32 op on the same values, outputs rounded") {
  // C = 37: the vector lanes and the scalar tail; M spans several bands (band_rows(37) = 256).
  for (const int C : {37, 64}) {
    CAPTURE(C);
    const long M = 700, n = M * C;
    const float eps = 1e-5f;
    const Values x(n, 1, -2.0f, 3.0f), res(n, 2), relu_out(n, 3, -0.5f, 1.0f);
    const auto gamma = random_floats(C, 4, 0.5f, 1.5f), beta = random_floats(C, 5);
    const auto dout = random_floats(n, 6), g = random_floats(n, 7);
    std::vector<float> mean32(C), var32(C), mean16(C), var16(C), out32(n);
    std::vector<uint16_t> out16(n);

    // The forward in its three forms: plain, with the ReLU, with the residual and the ReLU.
    be().batchnorm_forward_train(out32.data(), mean32.data(), var32.data(), x.f.data(),
                                 gamma.data(), beta.data(), M, C, eps);
    be().batchnorm_forward_train(act16(out16), mean16.data(), var16.data(), x.act(), gamma.data(),
                                 beta.data(), M, C, eps);
    CHECK(out16 == bf16_bits(out32));
    CHECK(mean16 == mean32);
    CHECK(var16 == var32);
    be().batchnorm_relu_forward_train(out32.data(), mean32.data(), var32.data(), x.f.data(),
                                      gamma.data(), beta.data(), M, C, eps);
    be().batchnorm_relu_forward_train(act16(out16), mean16.data(), var16.data(), x.act(),
                                      gamma.data(), beta.data(), M, C, eps);
    CHECK(out16 == bf16_bits(out32));
    // With the residual: bit for bit the unfused pair in bf16 (the batch norm's output stored,
    // so rounded, before the sum), which is not the fp32 op rounded once.
    std::vector<uint16_t> pair16(n);
    be().batchnorm_forward_train(act16(pair16), mean16.data(), var16.data(), x.act(), gamma.data(),
                                 beta.data(), M, C, eps);
    be().add_relu_inplace(act16(pair16), res.act(), n);
    be().batchnorm_add_relu_forward_train(act16(out16), mean16.data(), var16.data(), x.act(),
                                          gamma.data(), beta.data(), res.act(), M, C, eps);
    CHECK(out16 == pair16);
    CHECK(mean16 == mean32);

    // The backward: the input gradient in bf16, the parameters' gradients fp32.
    std::vector<float> dg32(C, 0.1f), db32(C, 0.2f), dg16 = dg32, db16 = db32, din32(n);
    std::vector<uint16_t> din16(n);
    be().batchnorm_backward(din32.data(), dg32.data(), db32.data(), dout.data(), x.f.data(),
                            mean32.data(), var32.data(), gamma.data(), M, C, eps);
    be().batchnorm_backward(act16(din16), dg16.data(), db16.data(), dout.data(), x.act(),
                            mean32.data(), var32.data(), gamma.data(), M, C, eps);
    CHECK(din16 == bf16_bits(din32));
    CHECK(dg16 == dg32);
    CHECK(db16 == db32);
    be().batchnorm_relu_backward(din32.data(), dg32.data(), db32.data(), dout.data(), x.f.data(),
                                 out32.data(), mean32.data(), var32.data(), gamma.data(),
                                 beta.data(), M, C, eps);
    be().batchnorm_relu_backward(act16(din16), dg16.data(), db16.data(), dout.data(), x.act(),
                                 act16(out16), mean32.data(), var32.data(), gamma.data(),
                                 beta.data(), M, C, eps);
    CHECK(din16 == bf16_bits(din32));
    CHECK(dg16 == dg32);
    CHECK(db16 == db32);
    // With a residual block's add + ReLU backward riding in the first pass: dout becomes the sum.
    std::vector<float> acc32 = dout, acc16 = dout;
    be().batchnorm_add_relu_backward(din32.data(), dg32.data(), db32.data(), acc32.data(),
                                     g.data(), relu_out.f.data(), x.f.data(), mean32.data(),
                                     var32.data(), gamma.data(), M, C, eps);
    be().batchnorm_add_relu_backward(act16(din16), dg16.data(), db16.data(), acc16.data(),
                                     g.data(), relu_out.act(), x.act(), mean32.data(),
                                     var32.data(), gamma.data(), M, C, eps);
    CHECK(acc16 == acc32);
    CHECK(din16 == bf16_bits(din32));
    CHECK(dg16 == dg32);

    // The split functions (synchronised batch norm, evaluation).
    std::vector<double> s32(2 * C), s16(2 * C);
    be().batchnorm_sums(s32.data(), x.f.data(), M, C);
    be().batchnorm_sums(s16.data(), x.act(), M, C);
    CHECK(s16 == s32);
    be().batchnorm_normalize(out32.data(), x.f.data(), mean32.data(), var32.data(), gamma.data(),
                             beta.data(), M, C, eps);
    be().batchnorm_normalize(act16(out16), x.act(), mean32.data(), var32.data(), gamma.data(),
                             beta.data(), M, C, eps);
    CHECK(out16 == bf16_bits(out32));
    be().batchnorm_backward_sums(s32.data(), dg32.data(), db32.data(), dout.data(), x.f.data(),
                                 mean32.data(), var32.data(), M, C, eps);
    be().batchnorm_backward_sums(s16.data(), dg16.data(), db16.data(), dout.data(), x.act(),
                                 mean32.data(), var32.data(), M, C, eps);
    CHECK(s16 == s32);
    CHECK(dg16 == dg32);
    be().batchnorm_backward_input(din32.data(), s32.data(), dout.data(), x.f.data(), mean32.data(),
                                  var32.data(), gamma.data(), static_cast<double>(M), M, C, eps);
    be().batchnorm_backward_input(act16(din16), s32.data(), dout.data(), x.act(), mean32.data(),
                                  var32.data(), gamma.data(), static_cast<double>(M), M, C, eps);
    CHECK(din16 == bf16_bits(din32));
  }
}

TEST_CASE("ReLU, the residual add + ReLU and their backwards on bf16 activations") {
  const long n = 1000;
  const Values x(n, 11), y(n, 12);
  const auto dout = random_floats(n, 13), g = random_floats(n, 14);
  std::vector<float> out32(n);
  std::vector<uint16_t> out16(n);
  be().relu_forward(out32.data(), x.f.data(), n);
  be().relu_forward(act16(out16), x.act(), n);
  CHECK(out16 == bf16_bits(out32));
  std::vector<float> d32(n), d16(n);
  be().relu_backward(d32.data(), x.f.data(), dout.data(), n);
  be().relu_backward(d16.data(), x.act(), dout.data(), n);
  CHECK(d16 == d32);
  std::vector<float> sum32 = x.f;
  std::vector<uint16_t> sum16 = x.b;
  be().add_relu_inplace(sum32.data(), y.f.data(), n);
  be().add_relu_inplace(act16(sum16), y.act(), n);
  CHECK(sum16 == bf16_bits(sum32));
  std::vector<float> acc32 = dout, acc16 = dout;
  be().add_relu_backward(acc32.data(), g.data(), x.f.data(), n);
  be().add_relu_backward(acc16.data(), g.data(), x.act(), n);
  CHECK(acc16 == acc32);
}

TEST_CASE("pooling and the images' transpose on bf16 activations") {
  sg::Pool2dShape s;
  s.N = 2, s.H = 9, s.W = 11, s.C = 12, s.R = 3, s.S = 3, s.stride = 2, s.pad = 1;
  const Values x(static_cast<size_t>(s.in_size()), 21, -3.0f, 3.0f);
  std::vector<float> out32(static_cast<size_t>(s.out_size()));
  std::vector<uint16_t> out16(out32.size());
  std::vector<int32_t> arg32(out32.size()), arg16(out32.size());
  be().maxpool_forward(out32.data(), arg32.data(), x.f.data(), s);
  be().maxpool_forward(act16(out16), arg16.data(), x.act(), s);
  CHECK(out16 == bf16_bits(out32));  // the maxima of exact values: exact
  CHECK(arg16 == arg32);
  const int N = 3, HW = 49, C = 40;
  const Values f(size_t(N) * HW * C, 22);
  std::vector<float> avg32(size_t(N) * C), avg16(avg32.size());
  be().global_avgpool_forward(avg32.data(), f.f.data(), N, HW, C);
  be().global_avgpool_forward(avg16.data(), f.act(), N, HW, C);
  CHECK(avg16 == avg32);
  const auto images = random_floats(size_t(N) * 3 * HW, 23);
  std::vector<float> t32(images.size());
  std::vector<uint16_t> t16(images.size());
  be().nchw_to_nhwc(t32.data(), images.data(), N, 3, HW);
  be().nchw_to_nhwc(act16(t16), images.data(), N, 3, HW);
  CHECK(t16 == bf16_bits(t32));
}

TEST_CASE("convolutions on bf16 activations: the bf16 convolution of fp32 tensors, rounded") {
  // Each layer kind the CPU routes differently under bf16: oneDNN's bf16 primitives (3x3,
  // blocked or NHWC), the 1x1 ones as the linear layers' bf16 product (the strided one on its
  // gathered pixels, its input gradient scattered back), the stem's 3 channels (no bf16 kernel on
  // some CPUs: the fp32 kernels on widened copies).
  struct Case {
    const char* name;
    sg::Conv2dShape s;
  };
  std::vector<Case> cases;
  sg::Conv2dShape c3;
  c3.N = 2, c3.H = c3.W = 10, c3.C = 32, c3.K = 48, c3.R = c3.S = 3, c3.pad = 1;
  cases.push_back({"3x3", c3});
  sg::Conv2dShape s2 = c3;
  s2.stride = 2;
  cases.push_back({"3x3 stride 2", s2});
  sg::Conv2dShape p1 = c3;
  p1.R = p1.S = 1, p1.pad = 0, p1.stride = 2;
  cases.push_back({"1x1 stride 2", p1});
  sg::Conv2dShape m1 = p1;
  m1.stride = 1;
  cases.push_back({"1x1", m1});  // the bf16 product (matmul_bf16.h)
  sg::Conv2dShape stem;
  stem.N = 2, stem.H = stem.W = 20, stem.C = 3, stem.K = 16, stem.R = stem.S = 7;
  stem.stride = 2, stem.pad = 3;
  cases.push_back({"7x7 stem", stem});
  sg::cpu::ConvAlgorithms bf16_choice;  // what train.precision: bf16 sets
  bf16_choice.bf16 = true;
  const ConvAlgorithmsScope scope(bf16_choice);
  for (const Case& c : cases) {
    const std::string name = c.name;
    CAPTURE(name);
    const sg::Conv2dShape& s = c.s;
    const std::string path = s.R == 1 ? "bf16 product"
                             : sg::cpu::conv2d_runs_bf16(s) ? "oneDNN bf16"
                                                            : "fp32 kernels";
    MESSAGE("layer " << name << ": " << path);
    const Values x(static_cast<size_t>(s.in_size()), 31), dy(static_cast<size_t>(s.out_size()), 32);
    const auto w = random_floats(static_cast<size_t>(s.weight_size()), 33, -0.2f, 0.2f);
    std::vector<float> out32(static_cast<size_t>(s.out_size()));
    std::vector<uint16_t> out16(out32.size());
    be().conv2d_forward(out32.data(), x.f.data(), w.data(), s);
    be().conv2d_forward(act16(out16), x.act(), w.data(), s);
    CHECK(out16 == bf16_bits(out32));
    // A bf16 weight (a working copy) is widened: the same as its fp32 values.
    const auto w16 = bf16_bits(w);
    const auto w16f = from_bf16_bits(w16);
    be().conv2d_forward(out32.data(), x.f.data(), w16f.data(), s);
    be().conv2d_forward(act16(out16), x.act(), sg::ConstAct(w16.data(), sg::DType::BF16), s);
    CHECK(out16 == bf16_bits(out32));

    std::vector<float> dx32(static_cast<size_t>(s.in_size())), dx16(dx32.size());
    std::vector<float> dw32(w.size(), 0.5f), dw16 = dw32;
    be().conv2d_backward(dx32.data(), dw32.data(), dy.f.data(), x.f.data(), w.data(), s);
    be().conv2d_backward(dx16.data(), dw16.data(), dy.act(), x.act(), w.data(), s);
    CHECK(dx16 == dx32);
    CHECK(dw16 == dw32);
    // The weight gradient alone (a stage's first layer).
    std::vector<float> only32(w.size(), 0.0f), only16 = only32;
    be().conv2d_backward(nullptr, only32.data(), dy.f.data(), x.f.data(), w.data(), s);
    be().conv2d_backward(nullptr, only16.data(), dy.act(), x.act(), w.data(), s);
    CHECK(only16 == only32);
  }
  // One call's activations share a type.
  sg::Conv2dShape s = c3;
  const Values x(static_cast<size_t>(s.in_size()), 41);
  std::vector<float> out(static_cast<size_t>(s.out_size()));
  const auto w = random_floats(static_cast<size_t>(s.weight_size()), 42);
  CHECK_THROWS_WITH_AS(be().conv2d_forward(out.data(), x.act(), w.data(), s),
                       doctest::Contains("in one call"), sg::RunError);
}
