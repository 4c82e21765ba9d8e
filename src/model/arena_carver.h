#pragma once
// Hands out consecutive pieces of a stage's activation arena, each on its own 64-byte line, or,
// with a null base, only counts them: the one walk both a stage (placing its activations) and
// `plan` (sizing them) take. fp32 pieces come from take, activations in the stored type from act.
#include <cstddef>

#include "tensor/act.h"
#include "tensor/dtype.h"

namespace sg {

struct ArenaCarver {
  char* base = nullptr;
  DType storage = DType::F32;  // the act() pieces'
  size_t used = 0;             // bytes, a multiple of 64
  void* bytes(size_t n) {
    void* p = base != nullptr ? base + used : nullptr;
    used += (n + 63) / 64 * 64;
    return p;
  }
  float* take(size_t n) { return static_cast<float*>(bytes(n * sizeof(float))); }
  Act act(size_t n) { return {bytes(n * dtype_size(storage)), storage}; }
};

}  // namespace sg
