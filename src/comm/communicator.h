#pragma once
// The one communication interface (docs/architecture.md, "The virtual mesh"): what data, tensor and
// pipeline parallelism need, and nothing else. Groups are splits of the world. Implementations: MPI
// over host buffers (mpi_communicator.cpp), a single-process one where every collective is the
// identity, MPI staged through host memory for device buffers (staged_communicator.h) and NCCL over
// GPU buffers (kernels/cuda/nccl_communicator.h). Buffers are in the memory of the communicator's
// transport: host memory for MPI, the backend's for the staged and NCCL ones.
//
// Calls are dtype-aware (F32, F64, BF16, F16 and the integer types) and take element counts of
// any size: counts above what the transport takes in one call (MPI's int) are chunked, never
// refused. Blocking collectives must be called by every rank of the group in the same order.
// An asynchronous operation returns its own handle (CommHandle), so a backend can put it on a
// stream; its buffers must stay untouched until the handle's wait() returns.
// Sums over floats are not associative: an MPI all-reduce may add in any order, so
// deterministic mode uses all_gather + a fixed-order sum instead (parallel/deterministic_reduce.h).
#include <cstddef>
#include <cstdint>
#include <memory>

#include "tensor/dtype.h"

namespace sg {

enum class ReduceOp : uint8_t { Sum, Max };

// One asynchronous operation in flight.
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  // Lets the transport advance it (MPI has no progress thread); true once it is complete.
  virtual bool test() = 0;
  virtual void wait() = 0;  // blocks until complete
};
using CommHandle = std::unique_ptr<CommRequest>;

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  virtual void all_reduce(void* data, size_t n, DType dtype, ReduceOp op) = 0;  // in place
  virtual CommHandle start_all_reduce(void* data, size_t n, DType dtype, ReduceOp op) = 0;
  // in: size() * n_per_rank elements; out: this rank's n_per_rank-element slice of the result.
  virtual void reduce_scatter(void* out, const void* in, size_t n_per_rank, DType dtype,
                              ReduceOp op) = 0;
  // in: n_per_rank elements from each rank; out: size() * n_per_rank in rank order.
  virtual void all_gather_into(void* out, const void* in, size_t n_per_rank, DType dtype) = 0;
  // buf: size() * n_per_rank elements; this rank's slice is in place, the others are filled in.
  virtual void all_gather_inplace(void* buf, size_t n_per_rank, DType dtype) = 0;
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void send(const void* data, size_t bytes, int dest, int tag) = 0;
  virtual void recv(void* data, size_t bytes, int source, int tag) = 0;
  // Pipeline stages send this way so that two neighbours sending to each other cannot deadlock.
  virtual CommHandle start_send(const void* data, size_t bytes, int dest, int tag) = 0;
  virtual void barrier() = 0;
  // Ranks with the same color form a group, ordered by key (then by rank).
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;

  // Typed forms of the calls above.
  template <class T>
  void all_reduce_sum(T* data, size_t n) {
    all_reduce(data, n, dtype_of<T>(), ReduceOp::Sum);
  }
  template <class T>
  void all_reduce_max(T* data, size_t n) {
    all_reduce(data, n, dtype_of<T>(), ReduceOp::Max);
  }
  template <class T>
  CommHandle start_all_reduce_sum(T* data, size_t n) {
    return start_all_reduce(data, n, dtype_of<T>(), ReduceOp::Sum);
  }
  template <class T>
  void reduce_scatter_sum(T* out, const T* in, size_t n_per_rank) {
    reduce_scatter(out, in, n_per_rank, dtype_of<T>(), ReduceOp::Sum);
  }
  template <class T>
  void all_gather(T* out, const T* in, size_t n_per_rank) {
    all_gather_into(out, in, n_per_rank, dtype_of<T>());
  }
  template <class T>
  void all_gather_in_place(T* buf, size_t n_per_rank) {
    all_gather_inplace(buf, n_per_rank, dtype_of<T>());
  }
};

// A group of one: collectives copy or do nothing; send/recv throw.
std::unique_ptr<Communicator> make_single_process_communicator();

}  // namespace sg
