#include "parallel/tensor_group.h"

namespace sg {

void TensorGroup::all_reduce_sum(float* data, size_t n) {
  const int size = comm_.size();
  if (size == 1) return;
  if (!deterministic_) {
    comm_.all_reduce_sum(data, n);
    return;
  }
  const size_t bytes = n * static_cast<size_t>(size) * sizeof(float);
  if (gathered_.bytes() < bytes) gathered_ = Buffer(backend_, bytes);
  float* all = gathered_.as<float>();
  comm_.all_gather(all, data, n);
  backend_.copy(data, all, n * sizeof(float));
  for (int r = 1; r < size; ++r) {
    backend_.add_inplace(data, all + static_cast<size_t>(r) * n, static_cast<long>(n));
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
