#pragma once
// The one communication interface (DESIGN §3): what data, tensor and pipeline parallelism need,
// and nothing else. Groups are splits of the world. Implementations: MPI over host buffers
// (mpi_communicator.cpp) and a single-process one where every collective is the identity.
// NCCL over device buffers arrives with the CUDA training loop.
//
// All collectives are blocking and must be called by every rank of the group in the same order.
// Sums over floats are not associative: an MPI all-reduce may add in any order, so deterministic
// mode uses all_gather + a fixed-order sum instead (see parallel/deterministic_reduce.h).
#include <cstddef>
#include <cstdint>
#include <memory>

namespace sg {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  virtual void all_reduce_sum(float* data, size_t n) = 0;   // in place
  // Starts an in-place sum that completes by wait_all(); data must stay untouched until then.
  // progress() lets the library advance outstanding operations (MPI has no progress thread).
  virtual void start_all_reduce_sum(float* data, size_t n) = 0;
  virtual void progress() = 0;
  virtual void wait_all() = 0;
  virtual void all_reduce_sum(double* data, size_t n) = 0;  // in place
  virtual void all_reduce_max(float* data, size_t n) = 0;   // in place; exact in any order
  // in: size() * n_per_rank floats; out: this rank's n_per_rank-float slice of the sum.
  virtual void reduce_scatter_sum(float* out, const float* in, size_t n_per_rank) = 0;
  // in: n_per_rank floats from each rank; out: size() * n_per_rank floats in rank order.
  virtual void all_gather(float* out, const float* in, size_t n_per_rank) = 0;
  virtual void all_gather(double* out, const double* in, size_t n_per_rank) = 0;
  // buf: size() * n_per_rank floats; this rank's slice is in place, the others are filled in.
  virtual void all_gather_in_place(float* buf, size_t n_per_rank) = 0;
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  virtual void send(const void* data, size_t bytes, int dest, int tag) = 0;
  virtual void recv(void* data, size_t bytes, int source, int tag) = 0;
  // Starts a send that completes by wait_all(); data must stay untouched until then. Pipeline
  // stages send this way so that two neighbours sending to each other cannot deadlock.
  virtual void start_send(const void* data, size_t bytes, int dest, int tag) = 0;
  virtual void barrier() = 0;
  // Ranks with the same color form a group, ordered by key (then by rank).
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
};

// A group of one: collectives copy or do nothing; send/recv throw.
std::unique_ptr<Communicator> make_single_process_communicator();

}  // namespace sg
