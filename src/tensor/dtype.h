#pragma once
// Element types (docs/architecture.md, "Tensors, models and optimizers"). One enum serves the
// tensors of every backend and the safetensors files that hold them, so a checkpoint's dtype is the
// tensor's. The compute dtypes are f32, bf16, f16 (and f64 for reductions); i32 and u16 carry token
// ids and labels; the rest exist for files written by other tools.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace sg {

enum class DType : uint8_t { F64, F32, F16, BF16, I64, I32, I16, I8, U64, U32, U16, U8, BOOL };

size_t dtype_size(DType dtype);       // bytes per element
const char* dtype_name(DType dtype);  // "F32", as in a safetensors header
bool parse_dtype(const std::string& name, DType* out);
bool is_float_dtype(DType dtype);     // F64, F32, F16, BF16

// The DType of a C++ element type, for typed views and communicator calls.
template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<double>() { return DType::F64; }
template <> constexpr DType dtype_of<float>() { return DType::F32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::I64; }
template <> constexpr DType dtype_of<int32_t>() { return DType::I32; }
template <> constexpr DType dtype_of<uint64_t>() { return DType::U64; }
template <> constexpr DType dtype_of<uint16_t>() { return DType::U16; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::U8; }

// Host conversions of the 16-bit floats (round to nearest even; NaN stays NaN).
inline float bf16_to_float(uint16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}
inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);

}  // namespace sg
