// NCCL over device memory; see nccl_communicator.h for the streams and the deferred sends.
#include "kernels/cuda/nccl_communicator.h"

#include <string>

#include "comm/nccl_factory.h"
#include "kernels/cuda/cuda_check.h"
#include "util/error.h"

namespace sg {
namespace {

// A CUDA event without timing (the cheap kind), destroyed with its last owner.
class Event {
 public:
  Event() { SG_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
  ~Event() { cudaEventDestroy(event_); }  // work still pending on it completes regardless
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// true once the work before the event's record has finished.
bool event_done(const Event& event) {
  const cudaError_t status = cudaEventQuery(event.get());
  if (status == cudaErrorNotReady) return false;
  SG_CUDA_CHECK(status);
  return true;
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::Max ? ncclMax : ncclSum; }

// How NCCL carries n elements of dtype: its own type where it has one (BOOL as bytes); I16/U16
// as bytes when they only move, refused when they would be reduced.
struct NcclElements {
  ncclDataType_t type;
  size_t count;
};
NcclElements nccl_elements(DType dtype, size_t n, bool reduced) {
  switch (dtype) {
    case DType::F64: return {ncclFloat64, n};
    case DType::F32: return {ncclFloat32, n};
    case DType::F16: return {ncclFloat16, n};
    case DType::BF16: return {ncclBfloat16, n};
    case DType::I64: return {ncclInt64, n};
    case DType::I32: return {ncclInt32, n};
    case DType::I8: return {ncclInt8, n};
    case DType::U64: return {ncclUint64, n};
    case DType::U32: return {ncclUint32, n};
    case DType::U8:
    case DType::BOOL: return {ncclUint8, n};
    default: break;
  }
  if (reduced) {
    throw RunError(std::string("NCCL cannot reduce ") + dtype_name(dtype) +
                   " elements (it has no 16-bit integer type): reduce them as I32");
  }
  return {ncclUint8, n * dtype_size(dtype)};
}

// A start_all_reduce in flight on the comm stream.
class StreamRequest final : public CommRequest {
 public:
  StreamRequest(std::shared_ptr<Event> done, cudaStream_t compute, NcclCommunicator& owner)
      : done_(std::move(done)), compute_(compute), owner_(owner) {}
  bool test() override {
    owner_.check_async_error();
    return event_done(*done_);
  }
  // The compute stream waits for the collective; the host does not.
  void wait() override { SG_CUDA_CHECK(cudaStreamWaitEvent(compute_, done_->get(), 0)); }

 private:
  std::shared_ptr<Event> done_;
  cudaStream_t compute_;
  NcclCommunicator& owner_;
};

}  // namespace

struct NcclCommunicator::SendState {
  bool issued = false;
  std::shared_ptr<Event> done;  // recorded on compute after the group that carried the send
};

namespace {

// A start_send: recorded, then issued with this rank's next NCCL operation (see the header).
// The communicator issues every recorded send before it is destroyed, so an unissued state
// always has its communicator.
class SendRequest final : public CommRequest {
 public:
  SendRequest(std::shared_ptr<NcclCommunicator::SendState> state, NcclCommunicator& owner)
      : state_(std::move(state)), owner_(&owner) {}
  bool test() override {
    if (!state_->issued) owner_->issue_pending_sends();
    if (state_->done == nullptr) {
      throw RunError("a start_send was never issued: its NCCL communicator failed and was "
                     "destroyed first");
    }
    return event_done(*state_->done);
  }
  // Issued on the compute stream: the ops enqueued after wait() (which may reuse the buffer)
  // run after the send.
  void wait() override {
    if (!state_->issued) owner_->issue_pending_sends();
  }

 private:
  std::shared_ptr<NcclCommunicator::SendState> state_;
  NcclCommunicator* owner_;
};

}  // namespace

NcclCommunicator::NcclCommunicator(ncclComm_t comm, int rank, int size, CudaBackend& backend)
    : comm_(comm), rank_(rank), size_(size), backend_(backend) {
  try {
    barrier_word_ = static_cast<int32_t*>(backend_.allocate(sizeof(int32_t)));
  } catch (...) {
    ncclCommDestroy(comm_);
    throw;
  }
}

NcclCommunicator::~NcclCommunicator() {
  // Destructors do not throw: a failure to issue the last sends is the peers' problem to report.
  try {
    backend_.activate();
    issue_pending_sends();
  } catch (...) {
  }
  for (PendingSend& p : pending_) p.state->issued = true;  // never touch this object again
  cudaStreamSynchronize(backend_.compute_stream());
  cudaStreamSynchronize(backend_.comm_stream());
  ncclCommDestroy(comm_);
  backend_.deallocate(barrier_word_);
}

void NcclCommunicator::check_async_error() const {
  ncclResult_t state = ncclSuccess;
  SG_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
  if (state != ncclSuccess && state != ncclInProgress) {
    throw RunError(std::string("NCCL communicator of ") + std::to_string(size_) +
                   " ranks failed: " + ncclGetErrorString(state) + " (" +
                   ncclGetLastError(comm_) +
                   "); another process probably died or lost its network: see its log");
  }
}

void NcclCommunicator::check_peer(int peer, int tag, const char* what) const {
  if (peer < 0 || peer >= size_ || peer == rank_) {
    throw RunError(std::string(what) + ": rank " + std::to_string(peer) +
                   " is not another rank of this " + std::to_string(size_) + "-rank group");
  }
  if (tag < 0) throw RunError(std::string(what) + ": negative tag " + std::to_string(tag));
}

void NcclCommunicator::issue_group(void* recv_data, size_t recv_bytes, int recv_source) {
  const bool receive = recv_source >= 0;
  if (pending_.empty() && !receive) return;
  const cudaStream_t stream = backend_.compute_stream();
  backend_.order_after_comm_stream_collective();
  SG_NCCL_CHECK(ncclGroupStart());
  try {
    for (const PendingSend& p : pending_) {
      SG_NCCL_CHECK(ncclSend(p.data, p.bytes, ncclUint8, p.peer, comm_, stream));
    }
    if (receive) SG_NCCL_CHECK(ncclRecv(recv_data, recv_bytes, ncclUint8, recv_source, comm_, stream));
  } catch (...) {
    ncclGroupEnd();
    throw;
  }
  SG_NCCL_CHECK(ncclGroupEnd());
  if (pending_.empty()) return;
  auto done = std::make_shared<Event>();
  SG_CUDA_CHECK(cudaEventRecord(done->get(), stream));
  for (PendingSend& p : pending_) {
    p.state->issued = true;
    p.state->done = done;
  }
  pending_.clear();
}

void NcclCommunicator::issue_pending_sends() {
  backend_.activate();
  issue_group(nullptr, 0, -1);
}

void NcclCommunicator::all_reduce(void* data, size_t n, DType dtype, ReduceOp op) {
  check_async_error();
  issue_pending_sends();
  const NcclElements e = nccl_elements(dtype, n, true);
  backend_.order_after_comm_stream_collective();
  SG_NCCL_CHECK(ncclAllReduce(data, data, e.count, e.type, nccl_op(op), comm_,
                              backend_.compute_stream()));
}

CommHandle NcclCommunicator::start_all_reduce(void* data, size_t n, DType dtype, ReduceOp op) {
  check_async_error();
  issue_pending_sends();
  const NcclElements e = nccl_elements(dtype, n, true);
  // The comm stream starts once compute has produced the data (the event's state is captured
  // by cudaStreamWaitEvent, so the event may go right after).
  const Event ready;
  SG_CUDA_CHECK(cudaEventRecord(ready.get(), backend_.compute_stream()));
  SG_CUDA_CHECK(cudaStreamWaitEvent(backend_.comm_stream(), ready.get(), 0));
  SG_NCCL_CHECK(ncclAllReduce(data, data, e.count, e.type, nccl_op(op), comm_,
                              backend_.comm_stream()));
  backend_.note_comm_stream_collective();
  auto done = std::make_shared<Event>();
  SG_CUDA_CHECK(cudaEventRecord(done->get(), backend_.comm_stream()));
  return std::make_unique<StreamRequest>(std::move(done), backend_.compute_stream(), *this);
}

void NcclCommunicator::reduce_scatter(void* out, const void* in, size_t n_per_rank, DType dtype,
                                      ReduceOp op) {
  check_async_error();
  issue_pending_sends();
  const NcclElements e = nccl_elements(dtype, n_per_rank, true);
  backend_.order_after_comm_stream_collective();
  SG_NCCL_CHECK(ncclReduceScatter(in, out, e.count, e.type, nccl_op(op), comm_,
                                  backend_.compute_stream()));
}

void NcclCommunicator::all_gather_into(void* out, const void* in, size_t n_per_rank,
                                       DType dtype) {
  check_async_error();
  issue_pending_sends();
  const NcclElements e = nccl_elements(dtype, n_per_rank, false);
  backend_.order_after_comm_stream_collective();
  SG_NCCL_CHECK(ncclAllGather(in, out, e.count, e.type, comm_, backend_.compute_stream()));
}

void NcclCommunicator::all_gather_inplace(void* buf, size_t n_per_rank, DType dtype) {
  check_async_error();
  issue_pending_sends();
  const NcclElements e = nccl_elements(dtype, n_per_rank, false);
  // In place as NCCL defines it: this rank's slice is already where the result puts it.
  const void* mine = static_cast<const char*>(buf) +
                     static_cast<size_t>(rank_) * n_per_rank * dtype_size(dtype);
  backend_.order_after_comm_stream_collective();
  SG_NCCL_CHECK(ncclAllGather(mine, buf, e.count, e.type, comm_, backend_.compute_stream()));
}

void NcclCommunicator::broadcast(void* data, size_t bytes, int root) {
  check_async_error();
  if (root < 0 || root >= size_) {
    throw RunError("broadcast from rank " + std::to_string(root) + " of a " +
                   std::to_string(size_) + "-rank group");
  }
  issue_pending_sends();
  backend_.order_after_comm_stream_collective();
  SG_NCCL_CHECK(ncclBroadcast(data, data, bytes, ncclUint8, root, comm_, backend_.compute_stream()));
}

void NcclCommunicator::send(const void* data, size_t bytes, int dest, int tag) {
  check_async_error();
  check_peer(dest, tag, "send");
  backend_.activate();
  // With the recorded sends, in one group: the stream order is the program order.
  pending_.push_back({data, bytes, dest, std::make_shared<SendState>()});
  issue_group(nullptr, 0, -1);
}

void NcclCommunicator::recv(void* data, size_t bytes, int source, int tag) {
  check_async_error();
  check_peer(source, tag, "recv");
  backend_.activate();
  issue_group(data, bytes, source);  // fused with the recorded sends: no send waits on this recv
}

CommHandle NcclCommunicator::start_send(const void* data, size_t bytes, int dest, int tag) {
  check_async_error();
  check_peer(dest, tag, "start_send");
  auto state = std::make_shared<SendState>();
  pending_.push_back({data, bytes, dest, state});
  return std::make_unique<SendRequest>(std::move(state), *this);
}

void NcclCommunicator::barrier() {
  check_async_error();
  issue_pending_sends();
  backend_.order_after_comm_stream_collective();
  // Every rank's all-reduce completes only when all have issued theirs.
  SG_NCCL_CHECK(ncclAllReduce(barrier_word_, barrier_word_, 1, ncclInt32, ncclSum, comm_,
                              backend_.compute_stream()));
  SG_CUDA_CHECK(cudaStreamSynchronize(backend_.compute_stream()));
  check_async_error();
}

std::unique_ptr<Communicator> NcclCommunicator::split(int, int) {
  throw RunError(
      "an NCCL communicator cannot be split: split the host (MPI) group and make a device "
      "communicator for each part (make_device_communicator)");
}

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& host_group,
                                                     CudaBackend& backend) {
  backend.activate();  // NCCL binds the communicator to the current device
  ncclUniqueId id{};
  if (host_group.rank() == 0) SG_NCCL_CHECK(ncclGetUniqueId(&id));
  host_group.broadcast(&id, sizeof(id), 0);
  ncclComm_t comm = nullptr;
  const ncclResult_t status = ncclCommInitRank(&comm, host_group.size(), id, host_group.rank());
  if (status != ncclSuccess) {
    const char* detail = ncclGetLastError(nullptr);
    throw RunError("NCCL could not join rank " + std::to_string(host_group.rank()) + " of " +
                   std::to_string(host_group.size()) + " on cuda:" +
                   std::to_string(backend.device_index()) + ": " + ncclGetErrorString(status) +
                   (detail != nullptr && detail[0] != '\0' ? std::string(" (") + detail + ")" : "") +
                   (status == ncclInvalidUsage
                        ? "; NCCL needs one GPU per process: give each process its own GPU, or "
                          "set devices.share_gpus to talk through the host"
                        : ""));
  }
  return std::make_unique<NcclCommunicator>(comm, host_group.rank(), host_group.size(), backend);
}

std::unique_ptr<Communicator> make_device_communicator(Communicator& host_group,
                                                       Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  if (cuda == nullptr) {
    throw RunError("a device communicator (NCCL) needs the cuda backend, not '" + backend.name() +
                   "': use the host communicator for " + backend.name() + " memory");
  }
  return make_nccl_communicator(host_group, *cuda);
}

}  // namespace sg
