// Global gradient norm on the CPU. See kernels/grad_norm.h for the contract.
#include "kernels/grad_norm.h"

#include <cstddef>
#include <vector>

namespace sg::cpu::inline SG_CPU_ISA {
namespace {

// Fixed summation blocks: each block is summed on its own (in a fixed lane order), then the
// block sums are added in index order. Neither depends on how blocks are spread over threads,
// so the result is the same for every thread count.
constexpr long kBlock = 1 << 14;
constexpr int kLanes = 8;  // independent partial sums, so the block loop vectorises

double block_sum_of_squares(const float* x, long n) {
  double lanes[kLanes] = {};
  long i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int l = 0; l < kLanes; ++l) {
      const double xi = x[i + l];
      lanes[l] += xi * xi;
    }
  }
  for (; i < n; ++i) {
    const double xi = x[i];
    lanes[0] += xi * xi;
  }
  double sum = 0.0;
  for (double lane : lanes) sum += lane;
  return sum;
}

}  // namespace

double sum_of_squares(const float* x, long n) {
  const long nblocks = (n + kBlock - 1) / kBlock;
  std::vector<double> block_sums(static_cast<std::size_t>(nblocks));
#pragma omp parallel for schedule(static)
  for (long b = 0; b < nblocks; ++b) {
    const long begin = b * kBlock;
    const long len = (begin + kBlock <= n) ? kBlock : n - begin;
    block_sums[static_cast<std::size_t>(b)] = block_sum_of_squares(x + begin, len);
  }
  double sum = 0.0;
  for (double s : block_sums) sum += s;
  return sum;
}

}  // namespace sg::cpu::SG_CPU_ISA
