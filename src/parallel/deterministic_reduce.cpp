#include "parallel/deterministic_reduce.h"

#include <algorithm>

#include "util/error.h"

namespace sg {

bool is_power_of_two(long x) { return x > 0 && (x & (x - 1)) == 0; }

float* ReplicaTreeSum::push_buffer() {
  if (used_ == buffers_.size()) buffers_.emplace_back(backend_, std::max<size_t>(1, n_) * sizeof(float));
  return buffers_[used_++].as<float>();
}

void ReplicaTreeSum::add(const float* replica_gradient) {
  backend_.copy(push_buffer(), replica_gradient, n_ * sizeof(float));
  levels_.push_back(0);
  // Merge equal levels: the two top buffers are sibling subtrees.
  while (levels_.size() >= 2 && levels_[levels_.size() - 1] == levels_[levels_.size() - 2]) {
    float* left = buffers_[used_ - 2].as<float>();
    const float* right = buffers_[used_ - 1].as<float>();
    backend_.add_inplace(left, right, static_cast<long>(n_));
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
  return buffers_[0].as<float>();
}

void tree_all_reduce(float* data, size_t n, Communicator& group, Buffer& scratch,
                     Backend& backend) {
  const int rank = group.rank(), size = group.size();
  if (size == 1) return;
  if (!is_power_of_two(size)) {
    throw SpecError("train.deterministic needs a power-of-two number of data-parallel processes");
  }
  if (scratch.bytes() < n * sizeof(float)) scratch = Buffer(backend, n * sizeof(float));
  float* other = scratch.as<float>();
  constexpr int kTag = 7301;
  for (int stride = 1; stride < size; stride *= 2) {
    if (rank % (2 * stride) == stride) {
      group.send(data, n * sizeof(float), rank - stride, kTag);
      break;  // this subtree is done; the total arrives by broadcast
    }
    if (rank % (2 * stride) == 0) {
      group.recv(other, n * sizeof(float), rank + stride, kTag);
      backend.add_inplace(data, other, static_cast<long>(n));
    }
  }
  group.broadcast(data, n * sizeof(float), 0);
}

}  // namespace sg
