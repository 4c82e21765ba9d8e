#pragma once
// Scratch memory for the CPU ops that run one at a time (one thread issues them, so two calls
// never overlap): each op keeps its own static areas and asks for them through grown(), which
// enlarges an area to the largest size asked so far and never shrinks it. Private to the
// kernels compiled once (kernels/cpu/*_dnnl.cpp, conv2d_gemm.cpp): a dispatched kernel must not
// use it, its copy would be an inline symbol outside its variant's namespace (isa.h).
#include <cstddef>
#include <vector>

namespace sg::cpu::detail {

inline float* grown(std::vector<float>& area, std::size_t floats) {
  if (area.size() < floats) area.resize(floats);
  return area.data();
}

}  // namespace sg::cpu::detail
