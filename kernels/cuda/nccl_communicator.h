#pragma once
// sg::Communicator over NCCL for the device memory of one CudaBackend (contract:
// comm/communicator.h), one GPU per process. Counts of any size (NCCL takes size_t); F64, F32,
// F16, BF16 and the 8-, 32- and 64-bit integers reduce with Sum and Max; I16/U16 (no NCCL type)
// only move (gathers, broadcast), as bytes.
//
// Streams: blocking collectives are enqueued on the backend's compute stream, ordered with the
// kernels around them, and return without the host waiting. start_all_reduce runs on the comm
// stream after an event from compute; its handle's wait() makes compute wait for it (no host
// block) and test() asks whether it is done.
//
// Order across communicators: the data group's all-reduces run on the comm stream while the
// tensor group's collectives run on compute, two communicators on two streams, which NCCL's
// documentation warns can deadlock: each rank's NCCL kernels may occupy the GPU waiting for
// peers, and nothing makes two ranks run the two communicators' kernels in the same order.
// So every collective on compute first waits (cudaStreamWaitEvent, no host block) for the last
// one queued on the comm stream (CudaBackend::order_after_comm_stream_collective), and every
// comm-stream collective starts after compute's work queued before it (the `ready` event). This
// process's NCCL kernels then run in its program order, one at a time across communicators; and
// every rank issues its collectives in the same program order (the same layers, buckets and
// micro-batches), so no rank waits in one communicator for a peer that waits in another. The
// price: a tensor-group collective waits for the data-parallel bucket queued before it, where
// before the two could overlap; compute kernels still overlap the buckets.
//
// Point to point: NCCL runs one operation of a communicator at a time, and a send may wait for
// its receive, so two neighbours that each send and then receive would deadlock. start_send
// therefore only records the send; it is issued together with this rank's next recv in one NCCL
// group (or on its own when its handle is tested or waited for, or before any other operation,
// so every rank issues its NCCL operations in program order). This is the fusion NCCL's authors
// recommend, and it gives the schedules written for MPI's Isend the same deadlock freedom.
// NCCL has no tags: messages between two ranks match in issue order (the tag is only checked to
// be non-negative, as MPI requires). A rank does not send to itself. Handles must be waited for
// before their communicator is destroyed (as MPI requests before MPI_Comm_free).
#include <nccl.h>

#include <memory>
#include <vector>

#include "comm/communicator.h"
#include "kernels/cuda/cuda_backend.h"

namespace sg {

class NcclCommunicator final : public Communicator {
 public:
  // Takes `comm` (ncclCommDestroy on destruction); rank and size as NCCL numbered them.
  NcclCommunicator(ncclComm_t comm, int rank, int size, CudaBackend& backend);
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

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

  // What a start_send handle shares with the communicator: whether its send has been issued,
  // and the event recorded after the group that carried it.
  struct SendState;
  // Issues the recorded sends (one NCCL group on the compute stream); nothing when none.
  void issue_pending_sends();
  // Throws RunError when NCCL reported an asynchronous failure (a peer died, the network broke).
  void check_async_error() const;

 private:
  struct PendingSend {
    const void* data;
    size_t bytes;
    int peer;
    std::shared_ptr<SendState> state;
  };
  // One NCCL group: the recorded sends, then the receive when recv_data/recv_source say so.
  void issue_group(void* recv_data, size_t recv_bytes, int recv_source);
  void check_peer(int peer, int tag, const char* what) const;

  ncclComm_t comm_;
  int rank_, size_;
  CudaBackend& backend_;
  std::vector<PendingSend> pending_;
  int32_t* barrier_word_ = nullptr;  // device memory the barrier's all-reduce runs on
};

// The NCCL communicator of host_group's processes over `backend`'s GPU: rank 0 makes NCCL's
// unique id, host_group broadcasts it, and every rank joins with ncclCommInitRank. Collective
// over host_group.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& host_group,
                                                     CudaBackend& backend);

}  // namespace sg
