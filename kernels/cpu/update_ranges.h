#pragma once
// The optimizers' ranges split between the threads of a parallel region (kernels/update_range.h).
// Private to kernels/cpu/.
#include <omp.h>

#include <algorithm>

#include "kernels/update_range.h"

namespace sg::cpu {

// Inside a parallel region: calls f(range, lo, hi) for each piece [lo, hi) (array indices) of the
// ranges that the calling thread owns. The ranges' elements, taken in order, are split into one
// contiguous share a thread, the shares' bounds on 16-float steps.
template <class F>
void for_this_threads_share(const UpdateRange* ranges, int count, F f) {
  long total = 0;
  for (int k = 0; k < count; ++k) total += ranges[k].end - ranges[k].begin;
  const long threads = omp_get_num_threads(), t = omp_get_thread_num();
  const auto bound = [&](long i) { return i == threads ? total : total * i / threads / 16 * 16; };
  const long lo = bound(t), hi = bound(t + 1);
  long seen = 0;  // elements of the ranges before ranges[k]
  for (int k = 0; k < count && seen < hi; ++k) {
    const long n = ranges[k].end - ranges[k].begin;
    const long a = std::max(lo - seen, 0L), b = std::min(hi - seen, n);
    if (a < b) f(ranges[k], ranges[k].begin + a, ranges[k].begin + b);
    seen += n;
  }
}

}  // namespace sg::cpu
