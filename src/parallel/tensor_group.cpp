#include "parallel/tensor_group.h"

namespace sg {

void TensorGroup::all_reduce_sum(float* data, size_t n) {
  const int size = comm_.size();
  if (size == 1) return;
  if (!deterministic_) {
    comm_.all_reduce_sum(data, n);
    return;
  }
  gathered_.resize(n * static_cast<size_t>(size));
  comm_.all_gather(gathered_.data(), data, n);
#pragma omp parallel for simd schedule(static)
  for (size_t i = 0; i < n; ++i) {
    float sum = gathered_[i];
    for (int r = 1; r < size; ++r) sum += gathered_[static_cast<size_t>(r) * n + i];
    data[i] = sum;
  }
}

double ordered_sum(double x, Communicator& group) {
  if (group.size() == 1) return x;
  std::vector<double> all(static_cast<size_t>(group.size()));
  group.all_gather(all.data(), &x, 1);
  double sum = 0;
  for (double v : all) sum += v;
  return sum;
}

}  // namespace sg
