#pragma once
// Eight floats as one GCC vector, for the hand-written kernels that spell out their SIMD (the
// Winograd transforms, the batch-norm passes). AVX registers on the x86-64-v3 and -v4 copies;
// the baseline copy splits each into two SSE halves.
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
typedef int v8i __attribute__((vector_size(32)));  // what comparing two v8 gives: -1 or 0

inline v8 load8(const float* p) {
  v8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store8(float* p, v8 v) { std::memcpy(p, &v, sizeof v); }
inline v8 splat(float x) { return v8{x, x, x, x, x, x, x, x}; }

}  // namespace
}  // namespace sg::cpu::SG_CPU_ISA
