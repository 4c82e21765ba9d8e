#pragma once
// Eight floats as one GCC vector, for the hand-written kernels that spell out their SIMD (the
// Winograd transforms, the batch-norm passes). AVX registers on the x86-64-v3 and -v4 copies;
// the baseline copy splits each into two SSE halves. Sixteen on the -v4 copy where a kernel
// takes them.
//
// Include it from a kernel TU only: its helpers live in an unnamed namespace inside the
// variant's namespace, so every copy keeps its own (kernels/cpu/isa.h: a helper shared across
// variants could be merged into the widest one by the linker).
#include <cstdint>
#include <cstring>

#include "kernels/cpu/isa.h"

// The baseline copy is built without AVX, where GCC warns that passing a 32-byte vector by value
// has a different ABI; these helpers are internal and inlined, so no call crosses that boundary.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace sg::cpu::inline SG_CPU_ISA {
namespace {

typedef float v8 __attribute__((vector_size(32)));

// Sixteen floats, one AVX-512 register, for the kernels whose lanes can widen where the variant
// has AVX-512; the helpers below take either width (load_as and store_as also the double
// vectors sums widen to). Each lane's arithmetic is the same at both widths, so a kernel keeps
// its bits whichever it runs.
#ifdef __AVX512F__
typedef float v16 __attribute__((vector_size(64)));
#endif

template <class V>
constexpr int kLanes = static_cast<int>(sizeof(V) / sizeof(float));

template <class V>
inline V splat_as(float x) {
  V v;
  for (int i = 0; i < kLanes<V>; ++i) v[i] = x;
  return v;
}
template <class V, class T>
inline V load_as(const T* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V, class T>
inline void store_as(T* p, V v) {
  std::memcpy(p, &v, sizeof v);
}


// Activations stored as float or as bf16 (uint16_t, docs/bf16.md): load_act widens kLanes<V>
// of them into a float vector (exact), store_act stores one, bf16 rounded to nearest even with
// NaN kept quiet, lane by lane the scalar detail::to_bf16 of kernels/cpu/bf16.h.
typedef uint32_t u32x8 __attribute__((vector_size(32)));
typedef uint16_t u16x8 __attribute__((vector_size(16)));
template <class V>
struct Bf16Lanes {
  typedef u32x8 Bits;
  typedef u16x8 Half;
};
#ifdef __AVX512F__
typedef uint32_t u32x16 __attribute__((vector_size(64)));
typedef uint16_t u16x16 __attribute__((vector_size(32)));
template <>
struct Bf16Lanes<v16> {
  typedef u32x16 Bits;
  typedef u16x16 Half;
};
#endif
template <class V>
inline V load_act(const float* p) {
  return load_as<V>(p);
}
template <class V>
inline V load_act(const uint16_t* p) {
  typename Bf16Lanes<V>::Half h;
  std::memcpy(&h, p, sizeof h);
  using Bits = typename Bf16Lanes<V>::Bits;
  const Bits b = __builtin_convertvector(h, Bits) << 16;
  V v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}
template <class V>
inline void store_act(float* p, V v) {
  store_as(p, v);
}
template <class V>
inline void store_act(uint16_t* p, V v) {
  using Bits = typename Bf16Lanes<V>::Bits;
  Bits b;
  std::memcpy(&b, &v, sizeof b);
  const Bits rounded = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
  const Bits quiet_nan = (b >> 16) | 0x40u;
  const Bits nan = reinterpret_cast<Bits>((b & 0x7fffffffu) > 0x7f800000u);
  const Bits r = (nan & quiet_nan) | (~nan & rounded);
  const typename Bf16Lanes<V>::Half h = __builtin_convertvector(r, typename Bf16Lanes<V>::Half);
  std::memcpy(p, &h, sizeof h);
}

// v rounded to bf16 and back (store_act then load_act of one vector).
template <class V>
inline V bf16_round(V v) {
  alignas(64) uint16_t h[kLanes<V>];
  store_act(h, v);
  return load_act<V>(h);
}
}  // namespace
}  // namespace sg::cpu::SG_CPU_ISA
