#pragma once
// bf16 loads and stores for the kernels that keep 16-bit activations (docs/bf16.md): round to
// nearest, ties to even, NaN kept quiet (sg::float_to_bf16's rounding), written without a
// branch so that the loops calling them vectorise. Private to kernels/cpu/.
#include <bit>
#include <cstdint>

#include "kernels/cpu/isa.h"

namespace sg::cpu::inline SG_CPU_ISA::detail {

inline uint16_t to_bf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint32_t rounded = (bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (bits >> 16) | 0x40u;
  return static_cast<uint16_t>((bits & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded);
}

inline float from_bf16(uint16_t h) { return std::bit_cast<float>(static_cast<uint32_t>(h) << 16); }

// A store of a kernel's fp32 result into its output's type: float as it is, bf16 rounded.
inline void store(float* p, float v) { *p = v; }
inline void store(uint16_t* p, float v) { *p = to_bf16(v); }
inline float load(const float* p) { return *p; }
inline float load(const uint16_t* p) { return from_bf16(*p); }

}  // namespace sg::cpu::SG_CPU_ISA::detail
