#pragma once
// Communicator over MPI for host buffers. Every MPI call's return code is checked (the world
// communicator is set to MPI_ERRORS_RETURN) and a failure throws RunError naming the call.
#include <mpi.h>

#include <memory>
#include <vector>

#include "comm/communicator.h"

namespace sg {

class MpiCommunicator final : public Communicator {
 public:
  // Wraps comm; frees it on destruction unless it is MPI_COMM_WORLD.
  explicit MpiCommunicator(MPI_Comm comm);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce_sum(float* data, size_t n) override;
  void all_reduce_sum(double* data, size_t n) override;
  void all_reduce_max(float* data, size_t n) override;
  void start_all_reduce_sum(float* data, size_t n) override;
  void progress() override;
  void wait_all() override;
  void reduce_scatter_sum(float* out, const float* in, size_t n_per_rank) override;
  void all_gather(float* out, const float* in, size_t n_per_rank) override;
  void all_gather(double* out, const double* in, size_t n_per_rank) override;
  void all_gather_in_place(float* buf, size_t n_per_rank) override;
  void broadcast(void* data, size_t bytes, int root) override;
  void send(const void* data, size_t bytes, int dest, int tag) override;
  void recv(void* data, size_t bytes, int source, int tag) override;
  void start_send(const void* data, size_t bytes, int dest, int tag) override;
  void barrier() override;
  std::unique_ptr<Communicator> split(int color, int key) override;

 private:
  MPI_Comm comm_;
  std::vector<MPI_Request> pending_;
  int rank_ = 0, size_ = 1;
};

}  // namespace sg
