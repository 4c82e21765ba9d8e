#pragma once
// A communicator over a backend's (device) memory that moves every buffer through host memory
// and a host communicator (MPI): device -> host copy, the host call, host -> device copy. It is
// how processes that share one GPU talk (devices.share_gpus: NCCL refuses two ranks on one
// device), how pipeline stages exchange activations on GPUs, and how the tests run the whole
// trainer on a guarded test backend. Correct for any backend, never fast: each call waits for
// the device. Asynchronous calls stage at start and copy back in wait(). Over a group of one it
// stages nothing: collectives are the identity or a device copy (the one-GPU case).
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "comm/communicator.h"

namespace sg {

class StagedCommunicator final : public Communicator {
 public:
  // host: the group over host memory (not owned unless `owned` holds it).
  StagedCommunicator(Communicator& host, Backend& backend,
                     std::unique_ptr<Communicator> owned = nullptr);

  int rank() const override { return host_.rank(); }
  int size() const override { return host_.size(); }
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
  void barrier() override { host_.barrier(); }
  std::unique_ptr<Communicator> split(int color, int key) override;

 private:
  bool alone() const;
  // A host copy of `bytes` of device memory at `src`.
  std::vector<unsigned char>& stage_in(const void* src, size_t bytes);
  std::unique_ptr<Communicator> owned_;
  Communicator& host_;
  Backend& backend_;
  std::vector<unsigned char> staging_, staging_out_;
};

}  // namespace sg
