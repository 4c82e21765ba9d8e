// Every Backend op of the CUDA backend against the CPU backend (the reference), on random inputs
// at small shapes: the same calls on both, results compared at the tolerances written once
// below. Backward outputs start from non-zero values, so += and = are both checked. Exits 77
// (skipped) where the build has no CUDA or the machine no GPU.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/device.h"
#include "kernels/rope.h"
#include "tests/backend/backend_op_cases.h"
#include "tests/cuda/gpu_test_support.h"
#include "util/error.h"

using namespace sg::test;
using namespace sg::test::gpu_support;
using sg::Backend;

// The table of backend-op cases (tests/backend/backend_op_cases.h): every op in it on the GPU
// against the CPU backend, at the case's tolerance (0: bitwise).
TEST_CASE("every op of the backend-op table on the GPU against the CPU backend") {
  int index = 0;
  for (const sg::test::BackendOpCase& c : sg::test::backend_op_cases()) {
    INFO("op " << c.op);
    sg::test::OpRun run(gpu(), /*exact=*/false, 0x5eed + static_cast<uint64_t>(++index));
    run.set_tolerance(c.tolerance);
    c.run(run);
  }
}

TEST_CASE("memory: copies, fills of every dtype, an impossible allocation") {
  const auto x = random_floats(1000, 1);
  Twin<float> a(x), b(1000, 0.0f);
  gpu().copy(b.g(), a.g(), 1000 * sizeof(float));
  CHECK(b.gpu_values() == x);
  gpu().copy(a.g() + 1, a.g(), 500 * sizeof(float));  // overlapping: memmove semantics
  std::vector<float> moved = x;
  std::memmove(moved.data() + 1, moved.data(), 500 * sizeof(float));
  CHECK(a.gpu_values() == moved);

  // The dtypes the CPU backend fills with any value (the others only with 0).
  for (const sg::DType dtype : {sg::DType::F64, sg::DType::F32, sg::DType::F16, sg::DType::BF16,
                                sg::DType::I64, sg::DType::I32, sg::DType::U16}) {
    for (const double value : {0.0, 3.0, 1.5, -2.5}) {
      if (dtype == sg::DType::U16 && value < 0) continue;  // out of range: undefined
      CAPTURE(sg::dtype_name(dtype));
      CAPTURE(value);
      const size_t n = 777, bytes = n * sg::dtype_size(dtype);
      std::vector<unsigned char> expected(bytes), got(bytes);
      cpu().fill({expected.data(), 0, dtype, sg::Device::cpu(), {static_cast<int64_t>(n)}}, value);
      void* d = gpu().allocate(bytes);
      gpu().fill({d, 0, dtype, gpu().device(), {static_cast<int64_t>(n)}}, value);
      gpu().copy_to_host(got.data(), d, bytes);
      gpu().deallocate(d);
      CHECK(got == expected);
    }
  }
  try {
    gpu().allocate(size_t{1} << 60);
    FAIL("a 1 EiB allocation succeeded");
  } catch (const sg::RunError& e) {
    CHECK(std::string(e.what()).find("micro_batch") != std::string::npos);
  }
  gpu().synchronize();
}

TEST_CASE("batch uploads: page-locked slots reused while earlier copies are queued") {
  // More uploads than slots, of growing and shrinking sizes (slots regrow), each from one host
  // buffer overwritten right after the call (it must have been copied by then), each behind a
  // fill of its destination queued before it (the copy must land after the fill), and one
  // above the staging's limit of sizes (the pageable path).
  const size_t sizes[] = {100, 5000, 64 << 10, 3, 300000, 5000, 100, (size_t{512} << 20) + 8};
  std::vector<void*> dst;
  std::vector<std::vector<unsigned char>> want;
  std::vector<unsigned char> host;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    const size_t n = sizes[i];
    dst.push_back(gpu().allocate(n));
    gpu().fill({dst.back(), 0, sg::DType::U16, gpu().device(), {static_cast<int64_t>(n / 2)}}, 7.0);
    host.assign(n, 0);
    for (size_t j = 0; j < n; ++j) host[j] = static_cast<unsigned char>((j * 31 + i * 7) & 0xff);
    want.push_back(host);
    gpu().upload_batch(dst.back(), host.data(), n);
    std::fill(host.begin(), host.end(), 0xee);  // reused at once, as a MicroBatch is
  }
  for (size_t i = 0; i < dst.size(); ++i) {
    CAPTURE(sizes[i]);
    std::vector<unsigned char> got(sizes[i]);
    gpu().copy_to_host(got.data(), dst[i], sizes[i]);
    CHECK(got == want[i]);
    gpu().deallocate(dst[i]);
  }
}

TEST_CASE("linear layer: cuBLASLt GEMMs, bias epilogue and broadcast, deterministic dbias") {
  const int N = 37, C = 70, OC = 50;
  const auto inp = random_floats(static_cast<size_t>(N) * C, 11);
  const auto w = random_floats(static_cast<size_t>(OC) * C, 12);
  // The bias one float into its buffer: too little aligned for cuBLASLt's epilogue (broadcast).
  for (const int bias_offset : {0, 1}) {
    CAPTURE(bias_offset);
    Twin<float> x(inp), weight(w), bias(random_floats(OC + 1, 13));
    Twin<float> out(static_cast<size_t>(N) * OC, 0.0f);
    cpu().matmul_forward(out.c(), x.c(), weight.c(), bias.c() + bias_offset, N, C, OC);
    gpu().matmul_forward(out.g(), x.g(), weight.g(), bias.g() + bias_offset, N, C, OC);
    check_twin(out, kAccumulated, "out");
    Twin<float> dout(random_floats(static_cast<size_t>(N) * OC, 14));
    Twin<float> dinp(static_cast<size_t>(N) * C, 0.5f), dw(static_cast<size_t>(OC) * C, -0.5f);
    Twin<float> db(OC + 1, 0.25f);
    cpu().matmul_backward(dinp.c(), dw.c(), db.c() + bias_offset, dout.c(), x.c(), weight.c(), N, C, OC);
    gpu().matmul_backward(dinp.g(), dw.g(), db.g() + bias_offset, dout.g(), x.g(), weight.g(), N, C, OC);
    check_twin(dinp, kAccumulated, "dinp (= over 0.5)");
    check_twin(dw, kAccumulated, "dweight (+=)");
    check_twin(db, kAccumulated, "dbias (+=)");
  }
  // No bias, no input gradient.
  Twin<float> x(inp), weight(w), out(static_cast<size_t>(N) * OC, 0.0f);
  cpu().matmul_forward(out.c(), x.c(), weight.c(), nullptr, N, C, OC);
  gpu().matmul_forward(out.g(), x.g(), weight.g(), nullptr, N, C, OC);
  check_twin(out, kAccumulated, "out without bias");
  Twin<float> dout(random_floats(static_cast<size_t>(N) * OC, 15)), dw(static_cast<size_t>(OC) * C, 1.0f);
  cpu().matmul_backward(nullptr, dw.c(), nullptr, dout.c(), x.c(), weight.c(), N, C, OC);
  gpu().matmul_backward(nullptr, dw.g(), nullptr, dout.g(), x.g(), weight.g(), N, C, OC);
  check_twin(dw, kAccumulated, "dweight without dinp and dbias");

  // Reduced precision: bf16 inputs, fp32 accumulation.
  gpu().set_precision(sg::Precision::BF16);
  Twin<float> rounded(static_cast<size_t>(N) * OC, 0.0f);
  gpu().matmul_forward(rounded.g(), x.g(), weight.g(), nullptr, N, C, OC);
  gpu().set_precision(sg::Precision::FP32);
  const auto got = rounded.gpu_values();
  CHECK(relative_to_largest(got.data(), out.cpu_values().data(), got.size()) < kReducedRelative);

  // Twice the same call: bitwise the same result (deterministic algorithms).
  Twin<float> again(static_cast<size_t>(OC) * C, 1.0f), twice(static_cast<size_t>(OC) * C, 1.0f);
  gpu().matmul_backward(nullptr, again.g(), nullptr, dout.g(), x.g(), weight.g(), N, C, OC);
  gpu().matmul_backward(nullptr, twice.g(), nullptr, dout.g(), x.g(), weight.g(), N, C, OC);
  CHECK(again.gpu_values() == twice.gpu_values());
}

TEST_CASE("elementwise: GELU, ReLU, residual, in-place and bias adds") {
  const long n = 5000;
  Twin<float> x(random_floats(n, 21, -4.0f, 4.0f)), dy(random_floats(n, 22)), out(n, 0.0f);
  cpu().gelu_forward(out.c(), x.c(), n);
  gpu().gelu_forward(out.g(), x.g(), n);
  check_twin(out, kElementwise, "gelu");
  Twin<float> dx(n, 0.5f);
  cpu().gelu_backward(dx.c(), x.c(), dy.c(), n);
  gpu().gelu_backward(dx.g(), x.g(), dy.g(), n);
  check_twin(dx, kElementwise, "gelu backward (written)");
  cpu().relu_forward(out.c(), x.c(), n);
  gpu().relu_forward(out.g(), x.g(), n);
  check_equal(out, "relu");
  cpu().relu_backward(dx.c(), out.c(), dy.c(), n);
  gpu().relu_backward(dx.g(), out.g(), dy.g(), n);
  check_equal(dx, "relu backward");
  cpu().residual_forward(out.c(), x.c(), dy.c(), n);
  gpu().residual_forward(out.g(), x.g(), dy.g(), n);
  check_equal(out, "residual");
  cpu().add_inplace(out.c(), x.c(), n);
  gpu().add_inplace(out.g(), x.g(), n);
  check_equal(out, "add_inplace");
  cpu().add_relu_inplace(out.c(), x.c(), n);
  gpu().add_relu_inplace(out.g(), x.g(), n);
  check_equal(out, "add_relu_inplace");
  cpu().add_relu_backward(out.c(), x.c(), dy.c(), n);
  gpu().add_relu_backward(out.g(), x.g(), dy.g(), n);
  check_equal(out, "add_relu_backward");
  Twin<float> bias(random_floats(40, 23));
  cpu().add_bias(out.c(), bias.c(), n / 40, 40);
  gpu().add_bias(out.g(), bias.g(), n / 40, 40);
  check_equal(out, "add_bias");
}

TEST_CASE("layernorm forward and backward") {
  const int N = 45, C = 96;
  Twin<float> x(random_floats(static_cast<size_t>(N) * C, 31, -2.0f, 3.0f));
  Twin<float> w(random_floats(C, 32, 0.5f, 1.5f)), b(random_floats(C, 33));
  Twin<float> out(static_cast<size_t>(N) * C, 0.0f), mean(N, 0.0f), rstd(N, 0.0f);
  cpu().layernorm_forward(out.c(), mean.c(), rstd.c(), x.c(), w.c(), b.c(), N, C);
  gpu().layernorm_forward(out.g(), mean.g(), rstd.g(), x.g(), w.g(), b.g(), N, C);
  check_twin(out, kAccumulated, "out");
  check_twin(mean, kAccumulated, "mean");
  check_twin(rstd, kAccumulated, "rstd");
  Twin<float> dy(random_floats(static_cast<size_t>(N) * C, 34));
  Twin<float> dx(static_cast<size_t>(N) * C, 0.25f), dw(C, 1.0f), db(C, -1.0f);
  cpu().layernorm_backward(dx.c(), dw.c(), db.c(), dy.c(), x.c(), w.c(), mean.c(), rstd.c(), N, C);
  gpu().layernorm_backward(dx.g(), dw.g(), db.g(), dy.g(), x.g(), w.g(), mean.g(), rstd.g(), N, C);
  check_twin(dx, kAccumulated, "dinp (+=)");
  check_twin(dw, kAccumulated, "dweight (+=)");
  check_twin(db, kAccumulated, "dbias (+=)");
}

TEST_CASE("Llama: RMSNorm, SwiGLU, rotary q/k/v with grouped key/value heads") {
  const int N = 45, C = 96;
  Twin<float> x(random_floats(static_cast<size_t>(N) * C, 131, -2.0f, 3.0f));
  Twin<float> w(random_floats(C, 132, 0.5f, 1.5f));
  Twin<float> out(static_cast<size_t>(N) * C, 0.0f), rstd(N, 0.0f);
  cpu().rmsnorm_forward(out.c(), rstd.c(), x.c(), w.c(), N, C, 1e-5f);
  gpu().rmsnorm_forward(out.g(), rstd.g(), x.g(), w.g(), N, C, 1e-5f);
  check_twin(out, kAccumulated, "rmsnorm out");
  check_twin(rstd, kAccumulated, "rmsnorm rstd");
  Twin<float> dy(random_floats(static_cast<size_t>(N) * C, 134));
  Twin<float> dx(static_cast<size_t>(N) * C, 0.25f), dw(C, 1.0f);
  cpu().rmsnorm_backward(dx.c(), dw.c(), dy.c(), x.c(), w.c(), rstd.c(), N, C);
  gpu().rmsnorm_backward(dx.g(), dw.g(), dy.g(), x.g(), w.g(), rstd.g(), N, C);
  check_twin(dx, kAccumulated, "rmsnorm dinp (+=)");
  check_twin(dw, kAccumulated, "rmsnorm dweight (+=)");

  const long rows = 33;
  const int I = 70;
  Twin<float> gu(random_floats(static_cast<size_t>(rows) * 2 * I, 135, -5.0f, 5.0f));
  Twin<float> z(static_cast<size_t>(rows) * I, 0.0f), dz(random_floats(static_cast<size_t>(rows) * I, 136));
  Twin<float> dgu(static_cast<size_t>(rows) * 2 * I, 3.0f);
  cpu().swiglu_forward(z.c(), gu.c(), rows, I);
  gpu().swiglu_forward(z.g(), gu.g(), rows, I);
  check_twin(z, kElementwise, "swiglu");
  cpu().swiglu_backward(dgu.c(), gu.c(), dz.c(), rows, I);
  gpu().swiglu_backward(dgu.g(), gu.g(), dz.g(), rows, I);
  check_twin(dgu, kElementwise, "swiglu backward (written)");

  const int B = 2, T = 9, HS = 32;
  const auto inv = sg::rope_inverse_frequencies(HS, 10000.0, {});
  std::vector<float> cos_host(T * HS / 2), sin_host(T * HS / 2);
  sg::rope_tables(cos_host.data(), sin_host.data(), T, inv);
  Twin<float> cos_t(cos_host), sin_t(sin_host);
  for (const auto [NH, NKV] : {std::pair{4, 4}, std::pair{6, 2}}) {
    CAPTURE(NH);
    CAPTURE(NKV);
    const size_t in = static_cast<size_t>(B) * T * (NH + 2 * NKV) * HS;
    const size_t packed = static_cast<size_t>(B) * T * 3 * NH * HS;
    Twin<float> qkv(random_floats(in, 137)), o(packed, 0.0f), d(random_floats(packed, 138));
    Twin<float> dqkv(in, 2.0f);
    cpu().rope_qkv_forward(o.c(), qkv.c(), cos_t.c(), sin_t.c(), B, T, NH, NKV, HS);
    gpu().rope_qkv_forward(o.g(), qkv.g(), cos_t.g(), sin_t.g(), B, T, NH, NKV, HS);
    check_twin(o, kElementwise, "rope_qkv");
    cpu().rope_qkv_backward(dqkv.c(), d.c(), cos_t.c(), sin_t.c(), B, T, NH, NKV, HS);
    gpu().rope_qkv_backward(dqkv.g(), d.g(), cos_t.g(), sin_t.g(), B, T, NH, NKV, HS);
    check_twin(dqkv, kAccumulated, "rope_qkv backward (written; groups summed)");
  }
}

TEST_CASE("attention: flash kernels against the CPU's probabilities, T=64 NH=4 C=128") {
  const int B = 2, T = 64, C = 128, NH = 4;
  Twin<float> qkv(random_floats(static_cast<size_t>(B) * T * 3 * C, 41));
  Twin<float> out(static_cast<size_t>(B) * T * C, 0.0f);
  const sg::AttentionStorage on_cpu = cpu().attention_storage(B, T, NH);
  const sg::AttentionStorage on_gpu = gpu().attention_storage(B, T, NH);
  CHECK(on_gpu.state == static_cast<size_t>(B) * NH * T);
  std::vector<float> att(on_cpu.state), scratch(on_cpu.scratch);
  float* lse = static_cast<float*>(gpu().allocate(on_gpu.state * sizeof(float)));
  float* delta = static_cast<float*>(gpu().allocate(on_gpu.scratch * sizeof(float)));
  cpu().attention_forward(out.c(), att.data(), qkv.c(), B, T, C, NH);
  gpu().attention_forward(out.g(), lse, qkv.g(), B, T, C, NH);
  check_twin(out, kAccumulated, "out");
  Twin<float> dout(random_floats(out.size(), 42)), dqkv(qkv.size(), 0.5f);
  cpu().attention_backward(dqkv.c(), scratch.data(), dout.c(), qkv.c(), out.c(), att.data(), B, T, C, NH);
  gpu().attention_backward(dqkv.g(), delta, dout.g(), qkv.g(), out.g(), lse, B, T, C, NH);
  check_twin(dqkv, kAccumulated, "dqkv (+=)");
  gpu().deallocate(lse);
  gpu().deallocate(delta);
  // Heads above 64 channels are refused with what to do.
  try {
    gpu().attention_forward(out.g(), nullptr, qkv.g(), 1, 2, 256, 2);
    FAIL("a head size of 128 was accepted");
  } catch (const sg::RunError& e) {
    CHECK(std::string(e.what()).find("model.n_head") != std::string::npos);
  }
}

TEST_CASE("attention in bf16 and fp16: cuDNN's fused SDPA where the module has it, T=64 and 37") {
  // Which path ran is on stderr ("attention forward through cuDNN's fused SDPA"); without
  // cudnn-frontend, or where cuDNN refuses the shape, our kernels run and must pass the same.
  for (const char* precision : {"bf16", "fp16"}) {
    check_reduced_attention(precision, 2, 64, 256, 4, 51);  // HS = 64
    check_reduced_attention(precision, 2, 37, 256, 4, 53);  // odd T
  }
  // Head size 128: only cuDNN takes it, so this proves the fused path ran.
  if (module_has_cudnn_sdpa()) check_reduced_attention("bf16", 1, 32, 256, 2, 57);
}

namespace {

sg::Act act(Twin<uint16_t>& t, bool on_gpu) {
  return {on_gpu ? t.g() : t.c(), sg::DType::BF16};
}
// A bf16 twin's GPU values against its CPU values, both widened: bf16's tolerance.
void check_bf16(const Twin<uint16_t>& t, const char* what) {
  INFO(what);
  const auto got = from_bf16_bits(t.gpu_values()), want = from_bf16_bits(t.cpu_values());
  CHECK(relative_to_largest(got.data(), want.data(), got.size()) < kReducedRelative);
}

}  // namespace

TEST_CASE("bf16 storage: products, GELU, layer norm and attention on bf16 activations") {
  // docs/bf16.md: under bf16 both backends store these activations in 16 bits; the GPU's ops on
  // them against the CPU backend's, which the kernel tests hold to the fp32 ops.
  REQUIRE(gpu().activation_dtype() == sg::DType::F32);
  gpu().set_precision(sg::Precision::BF16);
  cpu().set_precision(sg::Precision::BF16);
  CHECK(gpu().activation_dtype() == sg::DType::BF16);
  const int N = 64, C = 128, OC = 96;
  Twin<uint16_t> x(bf16_bits(random_floats(static_cast<size_t>(N) * C, 61)));
  Twin<float> w(random_floats(static_cast<size_t>(OC) * C, 62)), bias(random_floats(OC, 63));
  // A product into bf16 (the MLP's first) and into fp32 (a projection into the residual).
  Twin<uint16_t> out16(static_cast<size_t>(N) * OC, 0);
  Twin<float> out32(static_cast<size_t>(N) * OC, 0.0f);
  for (const bool g : {false, true}) {
    Backend& be = g ? gpu() : cpu();
    be.matmul_forward(act(out16, g), act(x, g), g ? w.g() : w.c(), g ? bias.g() : bias.c(), N, C, OC);
    be.matmul_forward(g ? out32.g() : out32.c(), act(x, g), g ? w.g() : w.c(), nullptr, N, C, OC);
  }
  check_bf16(out16, "matmul_forward into bf16");
  auto got = out32.gpu_values();
  CHECK(relative_to_largest(got.data(), out32.cpu_values().data(), got.size()) < kReducedRelative);
  // The backward with bf16 dout and dinp, and with an fp32 dout (dqkv's case).
  Twin<uint16_t> dout16(bf16_bits(random_floats(static_cast<size_t>(N) * OC, 64)));
  Twin<float> dout32(random_floats(static_cast<size_t>(N) * OC, 65));
  Twin<uint16_t> dinp(static_cast<size_t>(N) * C, 0);
  Twin<float> dw(static_cast<size_t>(OC) * C, 0.5f), db(OC, 0.25f);
  Twin<float> dinp32(static_cast<size_t>(N) * C, 0.0f), dw2(static_cast<size_t>(OC) * C, 0.0f);
  for (const bool g : {false, true}) {
    Backend& be = g ? gpu() : cpu();
    be.matmul_backward(act(dinp, g), g ? dw.g() : dw.c(), g ? db.g() : db.c(), act(dout16, g),
                       act(x, g), g ? w.g() : w.c(), N, C, OC);
    be.matmul_backward(g ? dinp32.g() : dinp32.c(), g ? dw2.g() : dw2.c(), nullptr,
                       g ? dout32.g() : dout32.c(), act(x, g), g ? w.g() : w.c(), N, C, OC);
  }
  check_bf16(dinp, "matmul_backward dinp (bf16)");
  check_twin(db, kAccumulated, "matmul_backward dbias from bf16 dout (+=)");
  for (Twin<float>* t : {&dw, &dinp32, &dw2}) {
    got = t->gpu_values();
    CHECK(relative_to_largest(got.data(), t->cpu_values().data(), got.size()) < kReducedRelative);
  }
  // The weights' bf16 working copy (convert, once a step): the same rounding on both backends,
  // and the products on it those that cast the fp32 weight per call (the same bf16 operands;
  // within the reduced tolerance, as the scratch's alignment may pick another algorithm).
  Twin<uint16_t> w16(w.size(), 0);
  Twin<float> w_back(w.size(), 0.0f);
  const long wn = static_cast<long>(w.size());
  cpu().convert(act(w16, false), w.c(), wn);
  cpu().convert(w_back.c(), act(w16, false), wn);
  gpu().convert(act(w16, true), w.g(), wn);
  gpu().convert(w_back.g(), act(w16, true), wn);
  CHECK(w16.gpu_values() == w16.cpu_values());
  CHECK(w16.cpu_values() == bf16_bits(w.cpu_values()));
  CHECK(w_back.gpu_values() == from_bf16_bits(w16.cpu_values()));
  Twin<uint16_t> out16w(out16.size(), 0), dinpw(dinp.size(), 0);
  Twin<float> dww(static_cast<size_t>(OC) * C, 0.5f);
  gpu().matmul_forward(act(out16w, true), act(x, true), act(w16, true), bias.g(), N, C, OC);
  gpu().matmul_backward(act(dinpw, true), dww.g(), nullptr, act(dout16, true), act(x, true),
                        act(w16, true), N, C, OC);
  for (auto [a, b] : {std::pair{&out16w, &out16}, std::pair{&dinpw, &dinp}}) {
    const auto x1 = from_bf16_bits(a->gpu_values()), x2 = from_bf16_bits(b->gpu_values());
    CHECK(relative_to_largest(x1.data(), x2.data(), x1.size()) < kReducedRelative);
  }
  got = dww.gpu_values();
  CHECK(relative_to_largest(got.data(), dw.gpu_values().data(), got.size()) < kReducedRelative);
  // GELU and the layer norm.
  const long n = static_cast<long>(N) * C;
  Twin<uint16_t> gelu(static_cast<size_t>(n), 0), dgelu(static_cast<size_t>(n), 0);
  Twin<float> xs(random_floats(static_cast<size_t>(n), 66, -2.0f, 3.0f));
  Twin<float> lw(random_floats(C, 67, 0.5f, 1.5f)), lb(random_floats(C, 68));
  Twin<uint16_t> ln(static_cast<size_t>(n), 0);
  Twin<float> mean(N, 0.0f), rstd(N, 0.0f);
  for (const bool g : {false, true}) {
    Backend& be = g ? gpu() : cpu();
    be.gelu_forward(act(gelu, g), act(x, g), n);
    be.gelu_backward(act(dgelu, g), act(x, g), act(gelu, g), n);
    be.layernorm_forward(act(ln, g), g ? mean.g() : mean.c(), g ? rstd.g() : rstd.c(),
                         g ? xs.g() : xs.c(), g ? lw.g() : lw.c(), g ? lb.g() : lb.c(), N, C);
  }
  check_bf16(gelu, "gelu_forward");
  check_bf16(dgelu, "gelu_backward");
  check_bf16(ln, "layernorm_forward into bf16");
  check_twin(rstd, kAccumulated, "layernorm rstd");
  // Attention on bf16 qkv, out and dout (cuDNN straight on them where the module has it).
  const int B = 2, T = 64, NH = 4, Ca = 256;
  Twin<uint16_t> qkv(bf16_bits(random_floats(static_cast<size_t>(B) * T * 3 * Ca, 69)));
  Twin<uint16_t> ao(static_cast<size_t>(B) * T * Ca, 0);
  Twin<uint16_t> ado(bf16_bits(random_floats(static_cast<size_t>(B) * T * Ca, 70)));
  Twin<float> dqkv(qkv.size(), 0.5f);
  const sg::AttentionStorage on_gpu = gpu().attention_storage(B, T, NH);
  std::vector<float> att(cpu().attention_storage(B, T, NH).state);
  Twin<float> lse(on_gpu.state, 0.0f), delta(std::max<size_t>(1, on_gpu.scratch), 0.0f);
  cpu().attention_forward(act(ao, false), att.data(), act(qkv, false), B, T, Ca, NH);
  gpu().attention_forward(act(ao, true), lse.g(), act(qkv, true), B, T, Ca, NH);
  check_bf16(ao, "attention_forward on bf16");
  cpu().attention_backward(dqkv.c(), nullptr, act(ado, false), act(qkv, false), act(ao, false),
                           att.data(), B, T, Ca, NH);
  gpu().attention_backward(dqkv.g(), delta.g(), act(ado, true), act(qkv, true), act(ao, true),
                           lse.g(), B, T, Ca, NH);
  got = dqkv.gpu_values();
  CHECK(relative_to_largest(got.data(), dqkv.cpu_values().data(), got.size()) < kReducedRelative);
  // The classifier on bf16 logits: losses fp32, the gradient in place in bf16.
  const int rows = 8, V = 1000, Vp = 1024;
  Twin<uint16_t> logits(bf16_bits(random_floats(static_cast<size_t>(rows) * Vp, 71, -5.0f, 5.0f)));
  Twin<int32_t> targets(random_ints(rows, 72, 0, V - 1));
  Twin<float> losses(rows, 0.0f);
  for (const bool g : {false, true}) {
    Backend& be = g ? gpu() : cpu();
    be.crossentropy_forward_backward(g ? losses.g() : losses.c(), act(logits, g), act(logits, g),
                                     g ? targets.g() : targets.c(), 1.0f / rows, rows, V, Vp);
  }
  check_twin(losses, kAccumulated, "crossentropy losses on bf16 logits");
  check_bf16(logits, "crossentropy dlogits (bf16, in place)");
  cpu().set_precision(sg::Precision::FP32);
  gpu().set_precision(sg::Precision::FP32);
}

TEST_CASE("embeddings: whole and vocabulary-parallel, forward and backward") {
  const int B = 3, T = 9, C = 48, V = 60, maxT = 16;
  auto ids = random_ints(static_cast<size_t>(B) * T, 51, 0, V - 1);
  ids[3] = ids[11] = ids[20] = 7;  // a token seen several times
  Twin<int32_t> inp(ids);
  Twin<float> wte(random_floats(static_cast<size_t>(V) * C, 52)), wpe(random_floats(static_cast<size_t>(maxT) * C, 53));
  Twin<float> out(static_cast<size_t>(B) * T * C, 0.0f);
  cpu().encoder_forward(out.c(), inp.c(), wte.c(), wpe.c(), B, T, C);
  gpu().encoder_forward(out.g(), inp.g(), wte.g(), wpe.g(), B, T, C);
  check_equal(out, "encoder forward");
  Twin<float> dout(random_floats(out.size(), 54));
  Twin<float> dwte(wte.size(), 0.5f), dwpe(wpe.size(), -0.5f);
  cpu().encoder_backward(dwte.c(), dwpe.c(), dout.c(), inp.c(), B, T, C);
  gpu().encoder_backward(dwte.g(), dwpe.g(), dout.g(), inp.g(), B, T, C);
  check_twin(dwte, kAccumulated, "dwte (+=)");
  check_twin(dwpe, kAccumulated, "dwpe (+=)");

  const int v0 = 20, Vl = 25;  // a middle rank's rows
  Twin<float> part(out.size(), 1.0f);
  cpu().embedding_forward_vocab_range(part.c(), inp.c(), wte.c() + v0 * C, B * T, C, v0, Vl);
  gpu().embedding_forward_vocab_range(part.g(), inp.g(), wte.g() + v0 * C, B * T, C, v0, Vl);
  check_equal(part, "embedding of a vocabulary range");
  cpu().position_add(part.c(), wpe.c(), B, T, C);
  gpu().position_add(part.g(), wpe.g(), B, T, C);
  check_equal(part, "position_add");
  Twin<float> dlocal(static_cast<size_t>(Vl) * C, 0.125f), dpos(wpe.size(), 0.0f);
  cpu().encoder_backward_vocab_range(dlocal.c(), dpos.c(), dout.c(), inp.c(), B, T, C, v0, Vl);
  gpu().encoder_backward_vocab_range(dlocal.g(), dpos.g(), dout.g(), inp.g(), B, T, C, v0, Vl);
  check_twin(dlocal, kAccumulated, "dwte of a vocabulary range (+=)");
  check_twin(dpos, kAccumulated, "dwpe (+=)");
}

TEST_CASE("cross-entropy: padded vocabulary, fused in place, vocabulary-parallel pieces") {
  const int N = 7, V = 300, Vp = 320;
  const float dloss = 1.0f / N;
  const auto logits = random_floats(static_cast<size_t>(N) * Vp, 61, -5.0f, 5.0f);
  Twin<float> x(logits), probs(logits.size(), 0.0f), losses(N, 0.0f);
  Twin<int32_t> targets(random_ints(N, 62, 0, V - 1));
  cpu().crossentropy_forward(losses.c(), probs.c(), x.c(), targets.c(), N, V, Vp);
  gpu().crossentropy_forward(losses.g(), probs.g(), x.g(), targets.g(), N, V, Vp);
  check_twin(losses, kAccumulated, "losses");
  check_twin(probs, kAccumulated, "probs");
  Twin<float> dlogits(logits.size(), 3.0f);
  cpu().crossentropy_backward(dlogits.c(), probs.c(), targets.c(), dloss, N, V, Vp);
  gpu().crossentropy_backward(dlogits.g(), probs.g(), targets.g(), dloss, N, V, Vp);
  check_twin(dlogits, kAccumulated, "dlogits");
  Twin<float> fused(logits);
  cpu().crossentropy_forward_backward(losses.c(), fused.c(), fused.c(), targets.c(), dloss, N, V, Vp);
  gpu().crossentropy_forward_backward(losses.g(), fused.g(), fused.g(), targets.g(), dloss, N, V, Vp);
  check_twin(losses, kAccumulated, "fused losses");
  check_twin(fused, kAccumulated, "fused dlogits (in place)");

  for (int rank = 0; rank < 2; ++rank) {  // two ranks of 160 columns; the second holds padding
    CAPTURE(rank);
    const int Vl = Vp / 2, v0 = rank * Vl;
    std::vector<float> local(static_cast<size_t>(N) * Vl);
    for (int n = 0; n < N; ++n) {
      std::copy_n(logits.data() + static_cast<size_t>(n) * Vp + v0, Vl, local.data() + static_cast<size_t>(n) * Vl);
    }
    Twin<float> lx(local), row_max(N, 0.0f), sum_exp(N, 0.0f), target_logit(N, 0.0f), vl(N, 0.0f);
    cpu().crossentropy_vp_max(row_max.c(), lx.c(), N, Vl, v0, V);
    gpu().crossentropy_vp_max(row_max.g(), lx.g(), N, Vl, v0, V);
    check_equal(row_max, "vp row max");
    cpu().crossentropy_vp_sums(sum_exp.c(), target_logit.c(), lx.c(), row_max.c(), targets.c(), N, Vl, v0, V);
    gpu().crossentropy_vp_sums(sum_exp.g(), target_logit.g(), lx.g(), row_max.g(), targets.g(), N, Vl, v0, V);
    check_twin(sum_exp, kAccumulated, "vp sum_exp");
    check_equal(target_logit, "vp target logit");
    cpu().crossentropy_vp_losses(vl.c(), row_max.c(), sum_exp.c(), target_logit.c(), N);
    gpu().crossentropy_vp_losses(vl.g(), row_max.g(), sum_exp.g(), target_logit.g(), N);
    check_twin(vl, kAccumulated, "vp losses");
    Twin<float> grad(local);
    cpu().crossentropy_vp_backward(grad.c(), grad.c(), row_max.c(), sum_exp.c(), targets.c(), dloss, N, Vl, v0, V);
    gpu().crossentropy_vp_backward(grad.g(), grad.g(), row_max.g(), sum_exp.g(), targets.g(), dloss, N, Vl, v0, V);
    check_twin(grad, kAccumulated, "vp dlogits (in place)");
  }
}

TEST_CASE("convolutions through cuDNN: stem, 3x3, stride 2, 1x1, few channels, groups") {
  std::vector<sg::Conv2dShape> shapes;
  auto add = [&](int N, int H, int W, int C, int K, int R, int stride, int pad, int groups) {
    sg::Conv2dShape s;
    s.N = N, s.H = H, s.W = W, s.C = C, s.K = K, s.R = R, s.S = R;
    s.stride = stride, s.pad = pad, s.groups = groups;
    shapes.push_back(s);
  };
  add(2, 32, 32, 3, 8, 7, 2, 3, 1);   // the stem: 7x7 stride 2, three channels
  add(2, 9, 9, 16, 16, 3, 1, 1, 1);   // 3x3
  add(1, 10, 10, 8, 16, 3, 2, 1, 1);  // 3x3 stride 2
  add(2, 8, 8, 16, 32, 1, 2, 0, 1);   // 1x1 stride 2 (downsample)
  add(2, 6, 7, 16, 24, 1, 1, 0, 1);   // 1x1
  add(4, 10, 10, 4, 4, 3, 1, 1, 1);   // fewer than 8 channels
  add(2, 7, 7, 8, 12, 3, 1, 1, 4);    // grouped
  for (const sg::Conv2dShape& s : shapes) {
    CAPTURE(s.C);
    CAPTURE(s.K);
    CAPTURE(s.R);
    CAPTURE(s.stride);
    CAPTURE(s.groups);
    Twin<float> x(random_floats(static_cast<size_t>(s.in_size()), 71));
    Twin<float> w(random_floats(static_cast<size_t>(s.weight_size()), 72));
    Twin<float> out(static_cast<size_t>(s.out_size()), 9.0f);
    cpu().conv2d_forward(out.c(), x.c(), w.c(), s);
    gpu().conv2d_forward(out.g(), x.g(), w.g(), s);
    check_twin(out, kAccumulated, "out (=)");
    Twin<float> dout(random_floats(out.size(), 73));
    Twin<float> dx(x.size(), 9.0f), dw(w.size(), 0.5f);
    cpu().conv2d_backward(dx.c(), dw.c(), dout.c(), x.c(), w.c(), s);
    gpu().conv2d_backward(dx.g(), dw.g(), dout.g(), x.g(), w.g(), s);
    check_twin(dx, kAccumulated, "dinp (=)");
    check_twin(dw, kAccumulated, "dweight (+=)");
    cpu().conv2d_backward(nullptr, dw.c(), dout.c(), x.c(), w.c(), s);
    gpu().conv2d_backward(nullptr, dw.g(), dout.g(), x.g(), w.g(), s);
    check_twin(dw, kAccumulated, "dweight without dinp (+=)");
  }
}

TEST_CASE("batch norm: fused pair and split functions") {
  const long M = 300;  // two bands, the last ragged
  const int C = 12;
  const float eps = 1e-5f;
  Twin<float> x(random_floats(static_cast<size_t>(M) * C, 81, -1.0f, 2.0f));
  Twin<float> gamma(random_floats(C, 82, 0.5f, 1.5f)), beta(random_floats(C, 83));
  Twin<float> out(x.size(), 0.0f), mean(C, 0.0f), var(C, 0.0f);
  cpu().batchnorm_forward_train(out.c(), mean.c(), var.c(), x.c(), gamma.c(), beta.c(), M, C, eps);
  gpu().batchnorm_forward_train(out.g(), mean.g(), var.g(), x.g(), gamma.g(), beta.g(), M, C, eps);
  check_twin(out, kAccumulated, "out");
  check_twin(mean, kAccumulated, "mean");
  check_twin(var, kAccumulated, "var");
  Twin<float> dy(random_floats(x.size(), 84)), dx(x.size(), 5.0f), dg(C, 1.0f), db(C, 2.0f);
  cpu().batchnorm_backward(dx.c(), dg.c(), db.c(), dy.c(), x.c(), mean.c(), var.c(), gamma.c(), M, C, eps);
  gpu().batchnorm_backward(dx.g(), dg.g(), db.g(), dy.g(), x.g(), mean.g(), var.g(), gamma.g(), M, C, eps);
  check_twin(dx, kAccumulated, "dinp (=)");
  check_twin(dg, kAccumulated, "dgamma (+=)");
  check_twin(db, kAccumulated, "dbeta (+=)");

  // With the ReLU fused in: the CPU masks where it recomputes the batch norm from beta, the
  // CUDA backend where the output is positive.
  cpu().batchnorm_relu_forward_train(out.c(), mean.c(), var.c(), x.c(), gamma.c(), beta.c(), M, C, eps);
  gpu().batchnorm_relu_forward_train(out.g(), mean.g(), var.g(), x.g(), gamma.g(), beta.g(), M, C, eps);
  check_twin(out, kAccumulated, "relu(bn) out");
  check_twin(var, kAccumulated, "relu(bn) var");
  cpu().batchnorm_relu_backward(dx.c(), dg.c(), db.c(), dy.c(), x.c(), out.c(), mean.c(), var.c(), gamma.c(), beta.c(), M, C, eps);
  gpu().batchnorm_relu_backward(dx.g(), dg.g(), db.g(), dy.g(), x.g(), out.g(), mean.g(), var.g(), gamma.g(), beta.g(), M, C, eps);
  check_twin(dx, kAccumulated, "relu(bn) dinp (=)");
  check_twin(dg, kAccumulated, "relu(bn) dgamma (+=)");
  check_twin(db, kAccumulated, "relu(bn) dbeta (+=)");
  Twin<float> residual(random_floats(x.size(), 85));
  cpu().batchnorm_add_relu_forward_train(out.c(), mean.c(), var.c(), x.c(), gamma.c(), beta.c(), residual.c(), M, C, eps);
  gpu().batchnorm_add_relu_forward_train(out.g(), mean.g(), var.g(), x.g(), gamma.g(), beta.g(), residual.g(), M, C, eps);
  check_twin(out, kAccumulated, "relu(bn + residual) out");

  Twin<double> sums(2 * C, 0.0);
  cpu().batchnorm_sums(sums.c(), x.c(), M, C);
  gpu().batchnorm_sums(sums.g(), x.g(), M, C);
  check_twin(sums, kAccumulated, "sums");
  cpu().batchnorm_stats(mean.c(), var.c(), sums.c(), static_cast<double>(M), C);
  gpu().batchnorm_stats(mean.g(), var.g(), sums.g(), static_cast<double>(M), C);
  check_twin(var, kAccumulated, "stats var");
  cpu().batchnorm_normalize(out.c(), x.c(), mean.c(), var.c(), gamma.c(), beta.c(), M, C, eps);
  gpu().batchnorm_normalize(out.g(), x.g(), mean.g(), var.g(), gamma.g(), beta.g(), M, C, eps);
  check_twin(out, kAccumulated, "normalize");
  cpu().batchnorm_backward_sums(sums.c(), dg.c(), db.c(), dy.c(), x.c(), mean.c(), var.c(), M, C, eps);
  gpu().batchnorm_backward_sums(sums.g(), dg.g(), db.g(), dy.g(), x.g(), mean.g(), var.g(), M, C, eps);
  check_twin(sums, kAccumulated, "backward sums");
  check_twin(dg, kAccumulated, "split dgamma (+=)");
  cpu().batchnorm_backward_input(dx.c(), sums.c(), dy.c(), x.c(), mean.c(), var.c(), gamma.c(), 2.0 * M, M, C, eps);
  gpu().batchnorm_backward_input(dx.g(), sums.g(), dy.g(), x.g(), mean.g(), var.g(), gamma.g(), 2.0 * M, M, C, eps);
  check_twin(dx, kAccumulated, "split dinp over two replicas' count");
  Twin<float> rm(C, 0.1f), rv(C, 0.9f);
  cpu().batchnorm_update_running(rm.c(), rv.c(), mean.c(), var.c(), static_cast<double>(M), C, 0.1f);
  gpu().batchnorm_update_running(rm.g(), rv.g(), mean.g(), var.g(), static_cast<double>(M), C, 0.1f);
  check_twin(rm, kElementwise, "running mean");
  check_twin(rv, kElementwise, "running var");
}

TEST_CASE("pooling, layout, classifier: maxpool 3x3/2, averages, NCHW->NHWC, loss and top-k") {
  sg::Pool2dShape s;
  s.N = 2, s.H = 11, s.W = 9, s.C = 6, s.R = 3, s.S = 3, s.stride = 2, s.pad = 1;
  Twin<float> x(random_floats(static_cast<size_t>(s.in_size()), 91));
  Twin<float> out(static_cast<size_t>(s.out_size()), 0.0f);
  Twin<int32_t> argmax(static_cast<size_t>(s.out_size()), 0);  // each backend's own encoding
  cpu().maxpool_forward(out.c(), argmax.c(), x.c(), s);
  gpu().maxpool_forward(out.g(), argmax.g(), x.g(), s);
  check_equal(out, "maxpool");
  Twin<float> dout(random_floats(out.size(), 92)), dx(x.size(), 3.0f);
  cpu().maxpool_backward(dx.c(), dout.c(), argmax.c(), s);
  gpu().maxpool_backward(dx.g(), dout.g(), argmax.g(), s);
  check_twin(dx, kElementwise, "maxpool backward (=)");

  const int N = 4, C = 10, HW = 49;
  Twin<float> img(random_floats(static_cast<size_t>(N) * C * HW, 93)), nhwc(img.size(), 0.0f);
  cpu().nchw_to_nhwc(nhwc.c(), img.c(), N, C, HW);
  gpu().nchw_to_nhwc(nhwc.g(), img.g(), N, C, HW);
  check_equal(nhwc, "nchw_to_nhwc");
  Twin<float> pooled(static_cast<size_t>(N) * C, 0.0f);
  cpu().global_avgpool_forward(pooled.c(), nhwc.c(), N, HW, C);
  gpu().global_avgpool_forward(pooled.g(), nhwc.g(), N, HW, C);
  check_twin(pooled, kAccumulated, "global average pool");
  Twin<float> dpooled(random_floats(pooled.size(), 94)), dimg(img.size(), 1.0f);
  cpu().global_avgpool_backward(dimg.c(), dpooled.c(), N, HW, C);
  gpu().global_avgpool_backward(dimg.g(), dpooled.g(), N, HW, C);
  check_twin(dimg, kElementwise, "global average pool backward (=)");

  const int rows = 9, K = 37;
  Twin<float> logits(random_floats(static_cast<size_t>(rows) * K, 95, -3.0f, 3.0f));
  Twin<int32_t> labels(random_ints(rows, 96, 0, K - 1));
  Twin<float> losses(rows, 0.0f);
  cpu().classifier_loss_forward_backward(losses.c(), nullptr, logits.c(), labels.c(), 0.1f, 0.0f, rows, K);
  gpu().classifier_loss_forward_backward(losses.g(), nullptr, logits.g(), labels.g(), 0.1f, 0.0f, rows, K);
  check_twin(losses, kAccumulated, "evaluation losses");
  // Counted before training overwrites the logits with their gradient.
  Twin<int64_t> correct(2, 0);
  cpu().classifier_correct(correct.c(), correct.c() + 1, logits.c(), labels.c(), rows, K);
  gpu().classifier_correct(correct.g(), correct.g() + 1, logits.g(), labels.g(), rows, K);
  check_equal(correct, "top-1 and top-5 counts");
  cpu().classifier_loss_forward_backward(losses.c(), logits.c(), logits.c(), labels.c(), 0.1f, 0.25f, rows, K);
  gpu().classifier_loss_forward_backward(losses.g(), logits.g(), logits.g(), labels.g(), 0.1f, 0.25f, rows, K);
  check_twin(losses, kAccumulated, "training losses");
  check_twin(logits, kAccumulated, "dlogits (in place)");
}

TEST_CASE("optimizers: AdamW, SGD with Nesterov momentum (a clipping factor in step 2), the global norm") {
  const long n = 40000;  // three 16K blocks of the norm, the last ragged
  Twin<float> g(random_floats(n, 101, -0.1f, 0.1f)), p(random_floats(n, 102));
  Twin<float> m(n, 0.0f), v(n, 0.0f);
  for (int step = 1; step <= 3; ++step) {
    const float scale = step == 2 ? 0.375f : 1.0f;
    cpu().adamw_update(p.c(), m.c(), v.c(), g.c(), n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step, scale);
    gpu().adamw_update(p.g(), m.g(), v.g(), g.g(), n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, step, scale);
  }
  check_twin(p, kAccumulated, "adamw params");
  check_twin(m, kAccumulated, "adamw m");
  check_twin(v, kAccumulated, "adamw v");
  Twin<float> q(random_floats(n, 103)), buf(n, 0.0f);
  for (int step = 0; step < 3; ++step) {
    const float scale = step == 1 ? 0.375f : 1.0f;
    cpu().sgd_update(q.c(), buf.c(), g.c(), n, 0.1f, 0.9f, 1e-4f, true, scale);
    gpu().sgd_update(q.g(), buf.g(), g.g(), n, 0.1f, 0.9f, 1e-4f, true, scale);
  }
  check_twin(q, kAccumulated, "sgd params");
  check_twin(buf, kAccumulated, "sgd momentum");
  const double norm_cpu = cpu().sum_of_squares(g.c(), n), norm_gpu = gpu().sum_of_squares(g.g(), n);
  CHECK(norm_gpu == doctest::Approx(norm_cpu).epsilon(1e-12));
}

TEST_CASE("scale, and the ops the CUDA backend leaves to the Backend's composites") {
  const long n = 5000;
  Twin<float> x(random_floats(n, 111)), y(random_floats(n, 112));
  cpu().scale(x.c(), 0.375f, n);
  gpu().scale(x.g(), 0.375f, n);
  check_equal(x, "scale");

  const int N = 45, C = 96;  // residual + layer norm in one call
  Twin<float> w(random_floats(C, 113, 0.5f, 1.5f)), b(random_floats(C, 114));
  Twin<float> residual(static_cast<size_t>(N) * C, 0.0f), out(residual.size(), 0.0f);
  Twin<float> mean(N, 0.0f), rstd(N, 0.0f);
  cpu().residual_layernorm_forward(residual.c(), out.c(), mean.c(), rstd.c(), x.c(), y.c(), w.c(), b.c(), N, C);
  gpu().residual_layernorm_forward(residual.g(), out.g(), mean.g(), rstd.g(), x.g(), y.g(), w.g(), b.g(), N, C);
  check_equal(residual, "residual_layernorm_forward residual");
  check_twin(out, kAccumulated, "residual_layernorm_forward out");

  const long M = 300;  // a residual block's last batch norm, forward with its sum and ReLU
  const int K = 12;
  Twin<float> a(random_floats(static_cast<size_t>(M) * K, 115)), skip(random_floats(static_cast<size_t>(M) * K, 116));
  Twin<float> gamma(random_floats(K, 117, 0.5f, 1.5f)), beta(random_floats(K, 118));
  Twin<float> bn(a.size(), 0.0f), bmean(K, 0.0f), bvar(K, 0.0f);
  cpu().batchnorm_add_relu_forward_train(bn.c(), bmean.c(), bvar.c(), a.c(), gamma.c(), beta.c(), skip.c(), M, K, 1e-5f);
  gpu().batchnorm_add_relu_forward_train(bn.g(), bmean.g(), bvar.g(), a.g(), gamma.g(), beta.g(), skip.g(), M, K, 1e-5f);
  check_twin(bn, kAccumulated, "batchnorm_add_relu_forward_train");
  Twin<float> dout(random_floats(a.size(), 119)), g(random_floats(a.size(), 120));
  Twin<float> dinp(a.size(), 0.0f), dgamma(K, 0.5f), dbeta(K, -0.5f);
  cpu().batchnorm_add_relu_backward(dinp.c(), dgamma.c(), dbeta.c(), dout.c(), g.c(), bn.c(), a.c(), bmean.c(), bvar.c(), gamma.c(), M, K, 1e-5f);
  gpu().batchnorm_add_relu_backward(dinp.g(), dgamma.g(), dbeta.g(), dout.g(), g.g(), bn.g(), a.g(), bmean.g(), bvar.g(), gamma.g(), M, K, 1e-5f);
  check_twin(dout, kAccumulated, "batchnorm_add_relu_backward dout (the sum through the ReLU)");
  check_twin(dinp, kAccumulated, "batchnorm_add_relu_backward dinp");
  check_twin(dgamma, kAccumulated, "batchnorm_add_relu_backward dgamma");

  // Optimizer ranges with gaps and their own decays.
  const std::vector<sg::UpdateRange> ranges = {{0, 1000, 0.1f}, {1500, 4000, 0.0f}, {4000, 5000, 0.05f}};
  Twin<float> p(random_floats(n, 121)), m(n, 0.0f), v(n, 0.0f), grad(random_floats(n, 122, -0.1f, 0.1f));
  cpu().adamw_update_ranges(p.c(), m.c(), v.c(), grad.c(), ranges, 1e-2f, 0.9f, 0.95f, 1e-8f, 1, 0.5f);
  gpu().adamw_update_ranges(p.g(), m.g(), v.g(), grad.g(), ranges, 1e-2f, 0.9f, 0.95f, 1e-8f, 1, 0.5f);
  check_twin(p, kAccumulated, "adamw_update_ranges params");
  Twin<float> q(random_floats(n, 123)), buf(n, 0.0f);
  cpu().sgd_update_ranges(q.c(), buf.c(), grad.c(), ranges, 0.1f, 0.9f, true, 1.0f);
  gpu().sgd_update_ranges(q.g(), buf.g(), grad.g(), ranges, 0.1f, 0.9f, true, 1.0f);
  check_twin(q, kAccumulated, "sgd_update_ranges params");
  check_twin(buf, kAccumulated, "sgd_update_ranges momentum");
  CHECK(gpu().device_memory_peak() > 0);
  CHECK(gpu().name() == "cuda");
}

int main(int argc, char** argv) { return run_gpu_tests(argc, argv); }

namespace {

// ResNet under bf16 (docs/bf16.md): the GPU's convolutional ops on bf16 activations against the
// CPU backend's fp32 ops on the same values (its bf16 convnet kernels are not needed for this),
// the reference rounded where the GPU stores bf16: bf16's tolerance.
std::vector<float> widen_bits(const Twin<uint16_t>& t) { return from_bf16_bits(t.cpu_values()); }
void check_bf16_against(const Twin<uint16_t>& got, const std::vector<float>& want, const char* what) {
  INFO(what);
  const auto g = from_bf16_bits(got.gpu_values()), w = from_bf16_bits(bf16_bits(want));
  CHECK(relative_to_largest(g.data(), w.data(), g.size()) < kReducedRelative);
}
void check_f32_against(const Twin<float>& got, const std::vector<float>& want, const char* what) {
  INFO(what);
  const auto g = got.gpu_values();
  CHECK(relative_to_largest(g.data(), want.data(), g.size()) < kReducedRelative);
}
sg::ConstAct gpu_act(Twin<uint16_t>& t) { return sg::Act{t.g(), sg::DType::BF16}; }
sg::Act gpu_out(Twin<uint16_t>& t) { return {t.g(), sg::DType::BF16}; }

}  // namespace

TEST_CASE("bf16 storage: ResNet's convolutions, batch norms, ReLUs and pools on bf16 activations") {
  gpu().set_precision(sg::Precision::BF16);
  struct Fp32Again {  // the later test cases run in fp32, also after a failure here
    ~Fp32Again() { gpu().set_precision(sg::Precision::FP32); }
  } fp32_again;
  REQUIRE(gpu().activation_dtype() == sg::DType::BF16);

  // Convolutions: 3x3 (a transposed filter), 1x1 stride 2 (the same bytes); the weight fp32 (cast
  // per call) and its bf16 working copy (conv2d_filter: cuDNN's layout, taken as it is).
  std::vector<sg::Conv2dShape> shapes(2);
  shapes[0].N = 2, shapes[0].H = 9, shapes[0].W = 9, shapes[0].C = 16, shapes[0].K = 16;
  shapes[0].R = shapes[0].S = 3, shapes[0].stride = 1, shapes[0].pad = 1, shapes[0].groups = 1;
  shapes[1].N = 2, shapes[1].H = 8, shapes[1].W = 8, shapes[1].C = 16, shapes[1].K = 32;
  shapes[1].R = shapes[1].S = 1, shapes[1].stride = 2, shapes[1].pad = 0, shapes[1].groups = 1;
  for (const sg::Conv2dShape& s : shapes) {
    CAPTURE(s.R);
    Twin<uint16_t> x(bf16_bits(random_floats(static_cast<size_t>(s.in_size()), 161)));
    Twin<float> xf(widen_bits(x)), w(random_floats(static_cast<size_t>(s.weight_size()), 162));
    Twin<uint16_t> w16(w.size(), 0);
    gpu().conv2d_filter(gpu_out(w16), w.g(), s);
    // The weight rounded, (K, C, R, S) -> (K, R, S, C): the identity for the 1x1 filter.
    const auto rounded = bf16_bits(w.cpu_values());
    const auto copy = w16.gpu_values();
    bool in_krsc = true;
    for (int k = 0; k < s.K; ++k)
      for (int c = 0; c < s.C; ++c)
        for (int rs = 0; rs < s.R * s.S; ++rs)
          in_krsc = in_krsc && copy[(size_t(k) * s.R * s.S + rs) * s.C + c] ==
                                   rounded[(size_t(k) * s.C + c) * s.R * s.S + rs];
    CHECK_MESSAGE(in_krsc, "conv2d_filter: the weight rounded to bf16 in cuDNN's KRSC layout");
    Twin<float> out32(static_cast<size_t>(s.out_size()), 0.0f);
    Twin<uint16_t> out(static_cast<size_t>(s.out_size()), 0), out_w16(out.size(), 0);
    cpu().conv2d_forward(out32.c(), xf.c(), w.c(), s);
    gpu().conv2d_forward(gpu_out(out), gpu_act(x), w.g(), s);
    gpu().conv2d_forward(gpu_out(out_w16), gpu_act(x), gpu_act(w16), s);
    check_bf16_against(out, out32.cpu_values(), "conv2d_forward into bf16");
    check_bf16_against(out_w16, out32.cpu_values(), "conv2d_forward with the bf16 weight");
    CHECK(out_w16.gpu_values() == out.gpu_values());  // the same filter, cast once or per call
    Twin<uint16_t> dy(bf16_bits(random_floats(out.size(), 163)));
    Twin<float> dyf(widen_bits(dy)), dx(x.size(), 9.0f), dw(w.size(), 0.5f);
    Twin<float> dw_only(w.size(), 0.5f);
    cpu().conv2d_backward(dx.c(), dw.c(), dyf.c(), xf.c(), w.c(), s);
    cpu().conv2d_backward(nullptr, dw_only.c(), dyf.c(), xf.c(), w.c(), s);
    gpu().conv2d_backward(dx.g(), dw.g(), gpu_act(dy), gpu_act(x), w.g(), s);
    gpu().conv2d_backward(nullptr, dw_only.g(), gpu_act(dy), gpu_act(x), gpu_act(w16), s);
    check_f32_against(dx, dx.cpu_values(), "conv2d_backward dinp (fp32, =)");
    check_f32_against(dw, dw.cpu_values(), "conv2d_backward dweight (fp32, +=)");
    check_f32_against(dw_only, dw_only.cpu_values(), "conv2d_backward dweight without dinp");
    // A call mixing bf16 and fp32 activations is refused.
    CHECK_THROWS_AS(gpu().conv2d_forward(out32.g(), gpu_act(x), w.g(), s), sg::RunError);
  }

  // Batch norms, fused and split: x, outputs and dinp bf16; dout, g and statistics fp32.
  const long M = 300;
  const int C = 12;
  const float eps = 1e-5f;
  const size_t n = static_cast<size_t>(M) * C;
  Twin<uint16_t> x(bf16_bits(random_floats(n, 171, -1.0f, 2.0f))), res(bf16_bits(random_floats(n, 172)));
  Twin<float> xf(widen_bits(x)), resf(widen_bits(res));
  Twin<float> gamma(random_floats(C, 173, 0.5f, 1.5f)), beta(random_floats(C, 174));
  Twin<float> dy(random_floats(n, 175)), g(random_floats(n, 176));
  Twin<float> mean(C, 0.0f), var(C, 0.0f), out32(n, 0.0f), dx32(n, 0.0f), dg(C, 1.0f), db(C, 2.0f);
  Twin<uint16_t> out(n, 0), dx(n, 0);
  cpu().batchnorm_forward_train(out32.c(), mean.c(), var.c(), xf.c(), gamma.c(), beta.c(), M, C, eps);
  gpu().batchnorm_forward_train(gpu_out(out), mean.g(), var.g(), gpu_act(x), gamma.g(), beta.g(), M, C, eps);
  check_bf16_against(out, out32.cpu_values(), "batchnorm_forward_train out");
  check_twin(var, kAccumulated, "batchnorm_forward_train var (fp32 sums of the same values)");
  cpu().batchnorm_backward(dx32.c(), dg.c(), db.c(), dy.c(), xf.c(), mean.c(), var.c(), gamma.c(), M, C, eps);
  gpu().batchnorm_backward(gpu_out(dx), dg.g(), db.g(), dy.g(), gpu_act(x), mean.g(), var.g(), gamma.g(), M, C, eps);
  check_bf16_against(dx, dx32.cpu_values(), "batchnorm_backward dinp (bf16)");
  check_twin(dg, kAccumulated, "batchnorm_backward dgamma (+=)");
  check_twin(db, kAccumulated, "batchnorm_backward dbeta (+=)");

  cpu().batchnorm_relu_forward_train(out32.c(), mean.c(), var.c(), xf.c(), gamma.c(), beta.c(), M, C, eps);
  gpu().batchnorm_relu_forward_train(gpu_out(out), mean.g(), var.g(), gpu_act(x), gamma.g(), beta.g(), M, C, eps);
  check_bf16_against(out, out32.cpu_values(), "batchnorm_relu_forward_train out");
  Twin<float> outf(from_bf16_bits(out.gpu_values()));  // the CPU masks where the GPU does
  cpu().batchnorm_relu_backward(dx32.c(), dg.c(), db.c(), dy.c(), xf.c(), outf.c(), mean.c(), var.c(), gamma.c(), beta.c(), M, C, eps);
  gpu().batchnorm_relu_backward(gpu_out(dx), dg.g(), db.g(), dy.g(), gpu_act(x), gpu_act(out), mean.g(), var.g(), gamma.g(), beta.g(), M, C, eps);
  check_bf16_against(dx, dx32.cpu_values(), "batchnorm_relu_backward dinp (bf16)");
  check_twin(dg, kAccumulated, "batchnorm_relu_backward dgamma (+=)");

  cpu().batchnorm_add_relu_forward_train(out32.c(), mean.c(), var.c(), xf.c(), gamma.c(), beta.c(), resf.c(), M, C, eps);
  gpu().batchnorm_add_relu_forward_train(gpu_out(out), mean.g(), var.g(), gpu_act(x), gamma.g(), beta.g(), gpu_act(res), M, C, eps);
  check_bf16_against(out, out32.cpu_values(), "batchnorm_add_relu_forward_train out");
  Twin<float> add_out(from_bf16_bits(out.gpu_values()));
  Twin<float> dsum(dy.cpu_values());  // dout: in one gradient, out the masked sum (fp32)
  cpu().batchnorm_add_relu_backward(dx32.c(), dg.c(), db.c(), dsum.c(), g.c(), add_out.c(), xf.c(), mean.c(), var.c(), gamma.c(), M, C, eps);
  gpu().batchnorm_add_relu_backward(gpu_out(dx), dg.g(), db.g(), dsum.g(), g.g(), gpu_act(out), gpu_act(x), mean.g(), var.g(), gamma.g(), M, C, eps);
  check_twin(dsum, kElementwise, "batchnorm_add_relu_backward dout (the masked sum, fp32)");
  check_bf16_against(dx, dx32.cpu_values(), "batchnorm_add_relu_backward dinp (bf16)");
  check_twin(db, kAccumulated, "batchnorm_add_relu_backward dbeta (+=)");

  Twin<double> sums(2 * C, 0.0);
  cpu().batchnorm_sums(sums.c(), xf.c(), M, C);
  gpu().batchnorm_sums(sums.g(), gpu_act(x), M, C);
  check_twin(sums, kAccumulated, "batchnorm_sums of bf16 values");
  cpu().batchnorm_normalize(out32.c(), xf.c(), mean.c(), var.c(), gamma.c(), beta.c(), M, C, eps);
  gpu().batchnorm_normalize(gpu_out(out), gpu_act(x), mean.g(), var.g(), gamma.g(), beta.g(), M, C, eps);
  check_bf16_against(out, out32.cpu_values(), "batchnorm_normalize into bf16");
  cpu().batchnorm_backward_sums(sums.c(), dg.c(), db.c(), dy.c(), xf.c(), mean.c(), var.c(), M, C, eps);
  gpu().batchnorm_backward_sums(sums.g(), dg.g(), db.g(), dy.g(), gpu_act(x), mean.g(), var.g(), M, C, eps);
  check_twin(sums, kAccumulated, "batchnorm_backward_sums over bf16 x");
  cpu().batchnorm_backward_input(dx32.c(), sums.c(), dy.c(), xf.c(), mean.c(), var.c(), gamma.c(), 2.0 * M, M, C, eps);
  gpu().batchnorm_backward_input(gpu_out(dx), sums.g(), dy.g(), gpu_act(x), mean.g(), var.g(), gamma.g(), 2.0 * M, M, C, eps);
  check_bf16_against(dx, dx32.cpu_values(), "batchnorm_backward_input into bf16");

  // ReLUs: activations bf16, gradients fp32.
  Twin<uint16_t> r(n, 0), acc16(x.cpu_values());
  Twin<float> r32(n, 0.0f), dr(n, 0.0f), acc(dy.cpu_values()), acc32(xf.cpu_values());
  cpu().relu_forward(r32.c(), xf.c(), static_cast<long>(n));
  gpu().relu_forward(gpu_out(r), gpu_act(x), static_cast<long>(n));
  check_bf16_against(r, r32.cpu_values(), "relu_forward");
  cpu().relu_backward(dr.c(), r32.c(), dy.c(), static_cast<long>(n));
  gpu().relu_backward(dr.g(), gpu_act(r), dy.g(), static_cast<long>(n));
  check_twin(dr, kElementwise, "relu_backward (bf16 out)");
  cpu().add_relu_inplace(acc32.c(), resf.c(), static_cast<long>(n));
  gpu().add_relu_inplace(gpu_out(acc16), gpu_act(res), static_cast<long>(n));
  check_bf16_against(acc16, acc32.cpu_values(), "add_relu_inplace");
  Twin<float> acc16f(from_bf16_bits(acc16.gpu_values()));
  cpu().add_relu_backward(acc.c(), g.c(), acc16f.c(), static_cast<long>(n));
  gpu().add_relu_backward(acc.g(), g.g(), gpu_act(acc16), static_cast<long>(n));
  check_twin(acc, kElementwise, "add_relu_backward (bf16 out)");

  // Pools and the input transpose.
  sg::Pool2dShape p;
  p.N = 2, p.H = 11, p.W = 9, p.C = 6, p.R = 3, p.S = 3, p.stride = 2, p.pad = 1;
  Twin<uint16_t> a(bf16_bits(random_floats(static_cast<size_t>(p.in_size()), 181)));
  Twin<float> af(widen_bits(a)), pooled32(static_cast<size_t>(p.out_size()), 0.0f);
  Twin<uint16_t> pooled(static_cast<size_t>(p.out_size()), 0);
  Twin<int32_t> argmax(static_cast<size_t>(p.out_size()), 0);
  cpu().maxpool_forward(pooled32.c(), argmax.c(), af.c(), p);
  gpu().maxpool_forward(gpu_out(pooled), argmax.g(), gpu_act(a), p);
  CHECK(from_bf16_bits(pooled.gpu_values()) == pooled32.cpu_values());  // picked, not computed
  Twin<float> features(static_cast<size_t>(p.N) * p.C, 0.0f);
  cpu().global_avgpool_forward(features.c(), af.c(), p.N, p.H * p.W, p.C);
  gpu().global_avgpool_forward(features.g(), gpu_act(a), p.N, p.H * p.W, p.C);
  check_twin(features, kAccumulated, "global_avgpool_forward of bf16 values (fp32 features)");
  const int N = 4, Ci = 3, HW = 49;
  Twin<float> img(random_floats(static_cast<size_t>(N) * Ci * HW, 182)), nhwc32(img.size(), 0.0f);
  Twin<uint16_t> nhwc(img.size(), 0);
  cpu().nchw_to_nhwc(nhwc32.c(), img.c(), N, Ci, HW);
  gpu().nchw_to_nhwc(gpu_out(nhwc), img.g(), N, Ci, HW);
  CHECK(nhwc.gpu_values() == bf16_bits(nhwc32.cpu_values()));  // rounded to nearest even
}
