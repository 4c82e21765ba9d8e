// safetensors: bit-exact round trip, the reference layout, and named errors for broken files.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "checkpoint/safetensors.h"
#include "error_of.h"
#include "temp_dir.h"
#include "util/error.h"

using namespace sg;

namespace {

using sg::test::error_of;

// A file made by hand: header JSON then data bytes, as another program would write it.
void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  const uint64_t n = header.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
}

}  // namespace

TEST_CASE("round trip of every dtype, bit-exact, with metadata") {
  test::TempDir dir;
  const std::vector<float> f32 = {1.5f, -0.0f, NAN, INFINITY, 1e-40f, 3.0f};
  const std::vector<double> f64 = {M_PI, -1e300};
  const std::vector<int32_t> i32 = {-7, 2147483647};
  const std::vector<int64_t> i64 = {-(int64_t{1} << 62)};
  const std::vector<uint16_t> u16 = {65535, 0, 1};
  const std::vector<TensorRef> tensors = {
      {"u16", DType::U16, {3}, u16.data()},      {"w", DType::F32, {2, 3}, f32.data()},
      {"d", DType::F64, {2}, f64.data()},        {"i", DType::I32, {1, 2}, i32.data()},
      {"scalar", DType::I64, {}, i64.data()},    {"empty", DType::F32, {0, 4}, nullptr}};
  const FileDigest digest =
      write_safetensors(dir / "t.safetensors", tensors, {{"format", "pt"}, {"k", "v"}});
  CHECK(digest.bytes == std::filesystem::file_size(dir / "t.safetensors"));
  CHECK(digest.xxh3 == file_xxh3_hex(dir / "t.safetensors"));

  SafetensorsFile file(dir / "t.safetensors");
  CHECK(file.names() == std::vector<std::string>{"d", "empty", "i", "scalar", "u16", "w"});
  CHECK(file.metadata() == std::map<std::string, std::string>{{"format", "pt"}, {"k", "v"}});
  for (const TensorRef& t : tensors) {
    const TensorRef& got = file.get(t.name);
    CHECK(got.dtype == t.dtype);
    CHECK(got.shape == t.shape);
    const size_t bytes = element_count(t.shape) * dtype_size(t.dtype);
    if (bytes > 0) CHECK(std::memcmp(got.data, t.data, bytes) == 0);
    // the reference writer's alignment: each tensor aligned to its element size in the file
    CHECK(reinterpret_cast<uintptr_t>(got.data) % dtype_size(t.dtype) == 0);
  }
  std::vector<float> w(6);
  file.read_f32(w.data(), "w", {2, 3});
  CHECK(std::memcmp(w.data(), f32.data(), 24) == 0);
  std::vector<float> d(2);
  file.read_f32(d.data(), "d", {2});
  CHECK(d[0] == static_cast<float>(M_PI));
  std::vector<int32_t> i(2);
  file.read_exact(i.data(), "i", DType::I32, {1, 2});
  CHECK(i == i32);
}

TEST_CASE("reads a file written by another program, converting F16 and BF16") {
  test::TempDir dir;
  // 1.0, -2.0, 65504 (max half), 2^-24 (smallest subnormal half) as F16; 1.0, -3.0 as BF16
  const uint16_t half[] = {0x3c00, 0xc000, 0x7bff, 0x0001};
  const uint16_t bf16[] = {0x3f80, 0xc040};
  std::string data(reinterpret_cast<const char*>(half), 8);
  data.append(reinterpret_cast<const char*>(bf16), 4);
  write_raw(dir / "h.safetensors",
            R"({"h":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},)"
            R"("b":{"dtype":"BF16","shape":[2],"data_offsets":[8,12]}})",
            data);
  SafetensorsFile file(dir / "h.safetensors");
  std::vector<float> h(4), b(2);
  file.read_f32(h.data(), "h", {4});
  file.read_f32(b.data(), "b", {2});
  CHECK(h == std::vector<float>{1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24)});
  CHECK(b == std::vector<float>{1.0f, -3.0f});
  CHECK(file.metadata().empty());
}

TEST_CASE("shape, dtype and name mismatches name the tensor") {
  test::TempDir dir;
  const std::vector<float> x(6, 1.0f);
  write_safetensors(dir / "m.safetensors", {{"wte", DType::F32, {2, 3}, x.data()}}, {});
  SafetensorsFile file(dir / "m.safetensors");
  std::vector<float> out(6);
  CHECK(error_of([&] { file.read_f32(out.data(), "wte", {3, 2}); })
            .find("tensor 'wte' has shape [2, 3] but [3, 2] is expected") != std::string::npos);
  const std::string missing = error_of([&] { file.get("wpe"); });
  CHECK(missing.find(dir / "m.safetensors" + ": no tensor named 'wpe'") == 0);
  CHECK(missing.find("wte") != std::string::npos);
  CHECK(error_of([&] { file.read_exact(out.data(), "wte", DType::I32, {2, 3}); })
            .find("is F32 but I32 is expected") != std::string::npos);
}

TEST_CASE("broken files give named errors") {
  test::TempDir dir;
  const std::string path = dir / "bad.safetensors";
  const std::string ok_entry = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  auto error_for = [&](const std::string& header, const std::string& data) {
    write_raw(path, header, data);
    return error_of([&] { SafetensorsFile file(path); });
  };
  CHECK(error_for("{" + ok_entry + "}", std::string(8, '\0')).empty());  // the control case
  CHECK(error_for("{" + ok_entry + "}", std::string(7, '\0')).find("outside the 7-byte data") !=
        std::string::npos);
  CHECK(error_for("{" + ok_entry, std::string(8, '\0')).find("header is not valid JSON") !=
        std::string::npos);
  CHECK(error_for(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",
                  std::string(8, '\0'))
            .find("shape [3] of F32 does not match its 8 bytes") != std::string::npos);
  CHECK(error_for(R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})",
                  std::string(8, '\0'))
            .find("unsupported dtype Q4") != std::string::npos);
  CHECK(error_for("{" + ok_entry + R"(,"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                  std::string(8, '\0'))
            .find("overlap") != std::string::npos);
  CHECK(error_for(R"({"a":{"dtype":"F32","shape":[2]}})", "").find("needs dtype, shape") !=
        std::string::npos);
  CHECK(error_for(R"({"__metadata__":{"k":1}})", "").find("__metadata__.k is not a string") !=
        std::string::npos);
  CHECK(error_for(R"({"a":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}})", "")
            .find("invalid shape") != std::string::npos);
  // a forged shape whose byte count overflows 64 bits
  CHECK(error_for(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})",
                  "")
            .find("does not match") != std::string::npos);
  // header length larger than the file
  {
    std::ofstream out(path, std::ios::binary);
    const uint64_t n = 1000;
    out.write(reinterpret_cast<const char*>(&n), 8);
    out << "{}";
  }
  const std::string e = error_of([&] { SafetensorsFile file(path); });
  CHECK(e.find(path + ": header length 1000 does not fit") == 0);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << "abc";
  CHECK(error_of([&] { SafetensorsFile file(path); }).find("too short") != std::string::npos);
}

TEST_CASE("deeply nested header JSON is refused before parsing; echoed values are cut short") {
  test::TempDir dir;
  const std::string path = dir / "deep.safetensors";
  const auto nested = [](size_t levels) {
    return std::string(levels, '[') + std::string(levels, ']');
  };
  const auto error_for = [&](const std::string& header) {
    write_raw(path, header, "");
    const std::string e = error_of([&] { SafetensorsFile file(path); });
    INFO(e);
    CHECK(e.rfind(path + ": ", 0) == 0);
    CHECK(e.find('\n') == std::string::npos);
    CHECK(e.size() < 400);
    return e;
  };
  const std::string deeper = "header is nested deeper than 64 levels (at byte ";
  // A forged shape or data_offsets 60,000 arrays deep (a 120 KB header): once a stack overflow.
  CHECK(error_for(R"({"a":{"dtype":"F32","shape":)" + nested(60000) +
                  R"(,"data_offsets":[0,0]}})")
            .find(deeper) != std::string::npos);
  CHECK(error_for(R"({"a":{"dtype":"F32","shape":[0],"data_offsets":)" + nested(60000) + "}}")
            .find(deeper) != std::string::npos);
  // The limit: 64 levels in all are read (and the shape refused as a shape), 65 are not.
  const std::string at_limit = error_for(R"({"a":{"dtype":"F32","shape":)" + nested(62) +
                                         R"(,"data_offsets":[0,0]}})");
  CHECK(at_limit.find("has an invalid shape [[[[") != std::string::npos);
  CHECK(at_limit.find(deeper) == std::string::npos);
  CHECK(error_for(R"({"a":{"dtype":"F32","shape":)" + nested(63) + R"(,"data_offsets":[0,0]}})")
            .find(deeper + "98)") != std::string::npos);  // the 65th level: file byte 8 + 90
  // 30,000 levels once printed a 60 KB line; now no echo is longer than 80 characters + "…".
  const std::string wide = error_for(R"({"a":{"dtype":"F32","shape":[")" +
                                     std::string(10000, 'x') + R"("],"data_offsets":[0,0]}})");
  CHECK(wide.find("has an invalid shape [\"xxxx") != std::string::npos);
  CHECK(wide.find("x\xE2\x80\xA6; the file is corrupt") != std::string::npos);
  const std::string name = error_for("{\"" + std::string(5000, 'n') +
                                     R"(":{"dtype":"Q4","shape":[0],"data_offsets":[0,0]}})");
  CHECK(name.find("n\xE2\x80\xA6' has unsupported dtype Q4") != std::string::npos);
}
