// The tensor layer: dtypes (names, sizes, the 16-bit float conversions), devices, buffers owned
// through a backend, views that check their bounds and their element type, micro-batches.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "backend/backend.h"
#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/micro_batch.h"
#include "tensor/tensor.h"
#include "util/error.h"

TEST_CASE("dtypes: names and sizes as safetensors spells them") {
  CHECK(sg::dtype_size(sg::DType::F32) == 4);
  CHECK(sg::dtype_size(sg::DType::BF16) == 2);
  CHECK(sg::dtype_size(sg::DType::I64) == 8);
  sg::DType d;
  REQUIRE(sg::parse_dtype("F16", &d));
  CHECK(d == sg::DType::F16);
  CHECK(std::string(sg::dtype_name(sg::DType::U16)) == "U16");
  CHECK_FALSE(sg::parse_dtype("float32", &d));
  CHECK(sg::is_float_dtype(sg::DType::BF16));
  CHECK_FALSE(sg::is_float_dtype(sg::DType::I32));
}

TEST_CASE("bf16 and f16: exact where representable, round to nearest even, inf and NaN kept") {
  for (float x : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 0.333251953125f, 6.103515625e-05f}) {
    CHECK(sg::half_to_float(sg::float_to_half(x)) == x);
  }
  CHECK(sg::bf16_to_float(sg::float_to_bf16(1.0f)) == 1.0f);
  CHECK(sg::bf16_to_float(sg::float_to_bf16(-3.0f)) == -3.0f);
  // Halfway cases go to the even neighbour.
  CHECK(sg::bf16_to_float(sg::float_to_bf16(1.0f + 1.0f / 256)) == 1.0f);              // tie -> even
  CHECK(sg::bf16_to_float(sg::float_to_bf16(1.0f + 3.0f / 256)) == 1.0f + 4.0f / 256);  // tie -> even
  CHECK(sg::half_to_float(sg::float_to_half(1.0f + 1.0f / 2048)) == 1.0f);
  CHECK(sg::half_to_float(sg::float_to_half(1.0f + 3.0f / 2048)) == 1.0f + 4.0f / 2048);
  // Subnormal halves, overflow, infinities and NaN.
  CHECK(sg::half_to_float(sg::float_to_half(5.9604645e-08f)) == 5.9604645e-08f);  // 2^-24
  CHECK(std::isinf(sg::half_to_float(sg::float_to_half(1e6f))));
  CHECK(std::isinf(sg::bf16_to_float(sg::float_to_bf16(std::numeric_limits<float>::infinity()))));
  CHECK(std::isnan(sg::half_to_float(sg::float_to_half(std::nanf("")))));
  CHECK(std::isnan(sg::bf16_to_float(sg::float_to_bf16(std::nanf("")))));
}

TEST_CASE("devices: cpu and cuda:N, anything else refused") {
  CHECK(sg::parse_device("cpu").is_cpu());
  CHECK(sg::parse_device("cuda:3") == sg::Device::cuda(3));
  CHECK(sg::parse_device("cuda").str() == "cuda:0");
  CHECK_THROWS_AS(sg::parse_device("tpu"), sg::SpecError);
  CHECK_THROWS_AS(sg::parse_device("cuda:x"), sg::SpecError);
}

TEST_CASE("buffers come from a backend; views check their bounds and their type") {
  sg::Backend& cpu = sg::cpu_backend();
  sg::Buffer buffer(cpu, 10 * sizeof(float));
  CHECK(buffer.device().is_cpu());
  CHECK(reinterpret_cast<uintptr_t>(buffer.data()) % 64 == 0);
  const sg::TensorView v = sg::view_of(buffer, sg::DType::F32, {2, 3}, 4);
  CHECK(v.numel() == 6);
  CHECK(v.data() == buffer.as<float>() + 4);
  cpu.fill(v, 2.5);
  CHECK(buffer.as<float>()[4] == 2.5f);
  CHECK(buffer.as<float>()[9] == 2.5f);
  CHECK_THROWS_AS(sg::view_of(buffer, sg::DType::F32, {2, 3}, 5), sg::RunError);
  CHECK_THROWS_AS(v.as<int32_t>(), sg::RunError);
  sg::Buffer moved = std::move(buffer);
  CHECK(buffer.data() == nullptr);
  CHECK(moved.bytes() == 10 * sizeof(float));
  const sg::TensorView halves = sg::view_of(moved, sg::DType::BF16, {4});
  cpu.fill(halves, 1.0);
  CHECK(sg::bf16_to_float(moved.as<uint16_t>()[3]) == 1.0f);
}

TEST_CASE("micro-batches: one host array per field, typed, rows per sample") {
  sg::MicroBatch b({{"images", sg::DType::F32, {4, 3, 2, 2}}, {"labels", sg::DType::I32, {4}}});
  CHECK(b.samples() == 4);
  CHECK(b.per_sample(0) == 12);
  b.data<int32_t>(1)[3] = 7;
  CHECK(b.data<int32_t>(1)[3] == 7);
  CHECK_THROWS_AS(b.data<float>(1), sg::RunError);
  volatile size_t past_the_end = 2;  // not a constant: GCC 12 would warn about the dead access
  CHECK_THROWS_AS(b.data<float>(past_the_end), sg::RunError);
}

TEST_CASE("micro-batches upload their fields to a backend, which the ops read") {
  sg::MicroBatch b({{"images", sg::DType::F32, {2, 3}}, {"labels", sg::DType::I32, {2}}});
  CHECK_THROWS_AS(b.device<float>(0), sg::RunError);  // before any upload
  for (int i = 0; i < 6; ++i) b.data<float>(0)[i] = 0.5f * static_cast<float>(i);
  b.data<int32_t>(1)[1] = 9;
  b.upload(sg::cpu_backend());
  const float* images = b.device<float>(0);
  CHECK(images != b.data<float>(0));  // a copy in the backend's memory
  CHECK(images[5] == 2.5f);
  CHECK(b.device<int32_t>(1)[1] == 9);
  b.data<int32_t>(1)[1] = 4;  // the next fill, the next upload
  b.upload(sg::cpu_backend());
  CHECK(b.device<int32_t>(1)[1] == 4);
  CHECK_THROWS_AS(b.device<float>(1), sg::RunError);
}
