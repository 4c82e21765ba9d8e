#pragma once
// Communicator over MPI for host buffers. Every MPI call's return code is checked (the world
// communicator is set to MPI_ERRORS_RETURN) and a failure throws RunError naming the call.
// BF16 and F16 travel as 16-bit words with reduction operators of our own.
#include <mpi.h>

#include <memory>

#include "comm/communicator.h"

namespace sg {

class MpiCommunicator final : public Communicator {
 public:
  // Wraps comm; frees it on destruction unless it is MPI_COMM_WORLD. max_chunk: the most
  // elements one MPI call carries (counts are ints); tests set it small to exercise chunking.
  explicit MpiCommunicator(MPI_Comm comm, size_t max_chunk = kDefaultMaxChunk);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  // Elements per MPI call: 2^27 keeps even 8-byte elements (and a chunk's derived datatype,
  // whose size MPI reports as an int) below 2^31 bytes.
  static constexpr size_t kDefaultMaxChunk = static_cast<size_t>(1) << 27;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  void all_reduce(void* data, size_t n, DType dtype, ReduceOp op) override;
  CommHandle start_all_reduce(void* data, size_t n, DType dtype, ReduceOp op) override;
  void reduce_scatter(void* out, const void* in, size_t n_per_rank, DType dtype,
                      ReduceOp op) override;
  void all_gather_into(void* out, const void* in, size_t n_per_rank, DType dtype) override;
  void all_gather_inplace(void* buf, size_t n_per_rank, DType dtype) override;
  void broadcast(void* data, size_t bytes, int root) override;
  void send(const void* data, size_t bytes, int dest, int tag) override;
  void recv(void* data, size_t bytes, int source, int tag) override;
  CommHandle start_send(const void* data, size_t bytes, int dest, int tag) override;
  void barrier() override;
  std::unique_ptr<Communicator> split(int color, int key) override;

 private:
  MPI_Comm comm_;
  size_t max_chunk_;
  int rank_ = 0, size_ = 1;
};

}  // namespace sg
