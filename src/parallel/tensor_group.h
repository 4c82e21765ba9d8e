#pragma once
// The tensor-parallel group a model shard's collectives run over (Megatron's f and g, the
// vocabulary-parallel embedding and cross-entropy). In deterministic mode sums are an
// all-gather followed by a sum in rank order, so their bits do not depend on MPI's choice of
// reduction algorithm; maxima are exact in any order.
#include <cstddef>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"

namespace sg {

class TensorGroup {
 public:
  // comm carries `backend`'s memory (ProcessMesh::tensor_device()).
  TensorGroup(Communicator& comm, bool deterministic, Backend& backend = cpu_backend())
      : comm_(comm), deterministic_(deterministic), backend_(backend) {}
  int size() const { return comm_.size(); }
  int rank() const { return comm_.rank(); }
  void all_reduce_sum(float* data, size_t n);
  void all_reduce_max(float* data, size_t n) { comm_.all_reduce_max(data, n); }

 private:
  Communicator& comm_;
  bool deterministic_;
  Backend& backend_;
  Buffer gathered_;
};

// Sum of one double over a group, in rank order (bitwise the same whatever the transport).
double ordered_sum(double x, Communicator& group);

}  // namespace sg
