#pragma once
// Deterministic mode (train.deterministic): gradients summed over the virtual data-parallel
// replicas in one canonical order, so the bits do not depend on how replicas are folded onto
// processes. The order is the balanced binary tree over replicas 0..D-1: a process owns an
// aligned block of R = D / P replicas (a subtree; R and P powers of two) and sums it with a
// binary-counter stack as the replicas finish, then the P block sums are combined up the same
// tree across processes (send/recv) and the total is broadcast. Float addition is commutative,
// so only the tree's shape matters, and the shape is fixed by D alone.
#include <cstddef>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"

namespace sg {

// Sums replica gradients in the canonical tree of their block, in `backend`'s memory.
class ReplicaTreeSum {
 public:
  explicit ReplicaTreeSum(size_t n, Backend& backend = cpu_backend()) : n_(n), backend_(backend) {}
  // Adds the next replica's gradient (n floats) of this process's block.
  void add(const float* replica_gradient);
  // The block's sum (n floats); valid after a power-of-two number of add() calls.
  const float* result() const;
  void clear() { used_ = 0; levels_.clear(); }

 private:
  float* push_buffer();
  size_t n_;
  Backend& backend_;
  std::vector<Buffer> buffers_;  // reused across steps
  std::vector<int> levels_;                  // tree level of each stacked buffer
  size_t used_ = 0;
};

// Combines the block sums of the group's processes up the tree and leaves the total in `data`
// on every process. data, scratch and the group's transport are `backend`'s memory; scratch is
// grown to n floats.
void tree_all_reduce(float* data, size_t n, Communicator& group, Buffer& scratch,
                     Backend& backend);

bool is_power_of_two(long x);

}  // namespace sg
