#pragma once
// Eight floats as one GCC vector, for the hand-written kernels that spell out their SIMD (the
// Winograd transforms, the batch-norm passes). AVX registers on the x86-64-v3 and -v4 copies;
// the baseline copy splits each into two SSE halves. Sixteen on the -v4 copy where a kernel
// takes them.
//
// Include it from a kernel TU only: its helpers live in an unnamed namespace inside the
// variant's namespace, so every copy keeps its own (kernels/cpu/isa.h: a helper shared across
// variants could be merged into the widest one by the linker).
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

}  // namespace
}  // namespace sg::cpu::SG_CPU_ISA
