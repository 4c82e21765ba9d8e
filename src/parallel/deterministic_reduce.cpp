#include "parallel/deterministic_reduce.h"

#include <cstring>

#include "util/error.h"

namespace sg {

bool is_power_of_two(long x) { return x > 0 && (x & (x - 1)) == 0; }

float* ReplicaTreeSum::push_buffer() {
  if (used_ == buffers_.size()) buffers_.emplace_back(n_);
  return buffers_[used_++].data();
}

void ReplicaTreeSum::add(const float* replica_gradient) {
  std::memcpy(push_buffer(), replica_gradient, n_ * sizeof(float));
  levels_.push_back(0);
  // Merge equal levels: the two top buffers are sibling subtrees.
  while (levels_.size() >= 2 && levels_[levels_.size() - 1] == levels_[levels_.size() - 2]) {
    float* left = buffers_[used_ - 2].data();
    const float* right = buffers_[used_ - 1].data();
#pragma omp parallel for simd schedule(static)
    for (size_t i = 0; i < n_; ++i) left[i] += right[i];
    --used_;
    levels_.pop_back();
    ++levels_.back();
  }
}

const float* ReplicaTreeSum::result() const {
  if (levels_.size() != 1) {
    throw RunError("deterministic reduction: the replicas of a process do not form one subtree "
                   "(their number must be a power of two)");
  }
  return buffers_[0].data();
}

void tree_all_reduce(float* data, size_t n, Communicator& group, std::vector<float>& scratch) {
  const int rank = group.rank(), size = group.size();
  if (size == 1) return;
  if (!is_power_of_two(size)) {
    throw SpecError("train.deterministic needs a power-of-two number of data-parallel processes");
  }
  scratch.resize(n);
  constexpr int kTag = 7301;
  for (int stride = 1; stride < size; stride *= 2) {
    if (rank % (2 * stride) == stride) {
      group.send(data, n * sizeof(float), rank - stride, kTag);
      break;  // this subtree is done; the total arrives by broadcast
    }
    if (rank % (2 * stride) == 0) {
      group.recv(scratch.data(), n * sizeof(float), rank + stride, kTag);
#pragma omp parallel for simd schedule(static)
      for (size_t i = 0; i < n; ++i) data[i] += scratch[i];
    }
  }
  group.broadcast(data, n * sizeof(float), 0);
}

}  // namespace sg
